"""A strong-Wolfe line search (Nocedal & Wright, Numerical Optimization, Algorithms 3.5 and 3.6): the step the
full-batch optimizers (L-BFGS, nonlinear CG) take along a descent direction d from x, φ(t) = f(x + t·d).

A step t is accepted when it decreases f enough and flattens the slope enough:

    φ(t) ≤ φ(0) + c₁·t·φ'(0)          (sufficient decrease, Armijo)
    |φ'(t)| ≤ c₂·|φ'(0)|              (strong curvature; φ'(t) = ∇f(x + t·d)·d)

The search first grows t (doubling) until it brackets an acceptable step, or finds one, then zooms into the
bracket [lo, hi] (lo: the best step so far that decreases f enough) by the minimizer of the cubic through both
ends' values and slopes, kept 10 % of the bracket away from its ends (bisection when the cubic has none).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Objective = Callable[[np.ndarray], tuple[float, np.ndarray]]  # x -> (f(x), ∇f(x)), both float64


def _cubic_minimizer(t1: float, f1: float, d1: float, t2: float, f2: float, d2: float) -> float:
    """The minimizer of the cubic matching f and f' at t1 and t2, clamped into the middle 80 % of [t1, t2]."""
    low, high = min(t1, t2), max(t1, t2)
    a = d1 + d2 - 3 * (f1 - f2) / (t1 - t2)
    root = a * a - d1 * d2
    if root >= 0:
        b = np.sign(t2 - t1) * np.sqrt(root)
        t = t2 - (t2 - t1) * (d2 + b - a) / (d2 - d1 + 2 * b)
    else:
        t = (low + high) / 2
    margin = 0.1 * (high - low)
    return float(np.clip(t, low + margin, high - margin))


def strong_wolfe(objective: Objective, x: np.ndarray, f0: float, g0: np.ndarray, d: np.ndarray, t: float,
                 c1: float = 1e-4, c2: float = 0.9, max_evals: int = 25) -> tuple[float, float, np.ndarray]:
    """(t, f(x + t·d), ∇f(x + t·d)) for a step meeting the strong Wolfe conditions; d must descend (g0·d < 0).

    At most `max_evals` evaluations, fewer when the bracket shrinks below rounding; when no step meets both
    conditions, the best step that decreased f enough, or t = 0 (f0, g0): no move, never a worse point."""
    slope0 = float(g0 @ d)
    best = (0.0, f0, g0)
    prev = (0.0, f0, slope0)
    bracket = None
    for i in range(max_evals):
        f, g = objective(x + t * d)
        slope = float(g @ d)
        if f <= f0 + c1 * t * slope0 and f < best[1]:
            best = (t, f, g)
        if f > f0 + c1 * t * slope0 or (i > 0 and f >= prev[1]):
            bracket = (prev, (t, f, slope))
        elif abs(slope) <= -c2 * slope0:
            return t, f, g
        elif slope >= 0:
            bracket = ((t, f, slope), prev)
        if bracket is not None:
            break
        prev, t = (t, f, slope), 2 * t
    evals = i + 1
    while bracket is not None and evals < max_evals:
        (t_lo, f_lo, s_lo), (t_hi, f_hi, s_hi) = bracket
        if abs(t_hi - t_lo) <= 1e-12 * max(t_lo, t_hi):  # the bracket has shrunk to a point: rounding, not f
            break
        t = _cubic_minimizer(t_lo, f_lo, s_lo, t_hi, f_hi, s_hi)
        f, g = objective(x + t * d)
        slope, evals = float(g @ d), evals + 1
        if f > f0 + c1 * t * slope0 or f >= f_lo:
            bracket = ((t_lo, f_lo, s_lo), (t, f, slope))
            continue
        if f < best[1]:
            best = (t, f, g)
        if abs(slope) <= -c2 * slope0:
            return t, f, g
        bracket = ((t, f, slope), (t_lo, f_lo, s_lo) if slope * (t_hi - t_lo) >= 0 else (t_hi, f_hi, s_hi))
    return best
