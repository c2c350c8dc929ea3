"""Nonlinear conjugate gradient, Polak–Ribière+ (Nocedal & Wright §5.2), for full-batch problems: each direction
is the negative gradient plus a share β of the previous direction,

    β = max(0, g·(g − g_prev) / g_prev·g_prev)        d = −g + β·d_prev

On a quadratic with exact line searches the directions are conjugate and it reaches the minimum in n steps; on any
other objective β = 0 (the "+") restarts it from steepest descent whenever the new gradient has turned too far
from the last, and a direction that does not descend is replaced by −g. The trial step is the last step's first-
order change scaled to the new slope, t = g_prev·s_prev / g·d (N&W eq. 3.60); on the first iteration lr, shortened
to move at most lr in ℓ₁. The line search is strong Wolfe with c₂ = 0.2: below ½, as the convergence results of
nonlinear CG need, and a closer search than a quasi-Newton step's (N&W suggest 0.1; on Rosenbrock 0.2 took 41
iterations, 0.1 took 227, scipy's CG 101). The shared machinery is minitrain/optim/full_batch.py.
"""

from __future__ import annotations

import numpy as np

from minitrain.optim.full_batch import FullBatchOptimizer


class ConjugateGradient(FullBatchOptimizer):
    """Polak–Ribière+ nonlinear CG with a strong-Wolfe line search."""

    name = "cg"
    state_names = ("direction", "prev_grad", "last_step")
    c2 = 0.2

    lr: float = 1.0
    weight_decay: float = 0.0

    def _direction(self, x: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, float]:
        if self.step_count == 1:
            return -g, self._first_step(g)
        g_prev, d_prev, s_prev = (self.state[k].astype(np.float64) for k in ("prev_grad", "direction", "last_step"))
        beta = max(0.0, float(g @ (g - g_prev)) / max(float(g_prev @ g_prev), 1e-300))
        d = -g + beta * d_prev
        slope = float(g @ d)  # ≥ 0 (no descent, or g = 0): the step's base class restarts from −g
        return d, float(g_prev @ s_prev) / slope if slope < 0 else 0.0

    def _accepted(self, s: np.ndarray, g: np.ndarray, d: np.ndarray) -> None:
        self.state["direction"][...], self.state["prev_grad"][...], self.state["last_step"][...] = d, g, s
