"""L-BFGS (Liu & Nocedal 1989; Nocedal & Wright, Algorithm 7.4), a quasi-Newton method for full-batch problems:
the direction is d = −H·g, H an approximation of the inverse Hessian built from the last m steps sᵢ = x_{i+1} − xᵢ
and gradient changes yᵢ = g_{i+1} − gᵢ, applied by the two-loop recursion without ever forming H:

    q ← g;  for i newest → oldest:  ρᵢ = 1/(yᵢ·sᵢ),  αᵢ = ρᵢ·sᵢ·q,  q ← q − αᵢ·yᵢ
    r ← γ·q,  γ = s·y / y·y  of the newest pair      (H₀ = γ·I: the scale of the latest curvature)
    for i oldest → newest:  β = ρᵢ·yᵢ·r,  r ← r + sᵢ·(αᵢ − β)
    d = −r

A pair joins the history only when yᵢ·sᵢ > 1e-10 (positive curvature keeps H positive definite; the strong-Wolfe
search guarantees it on a smooth objective). The trial step is lr (1: the quasi-Newton step itself), on the first
iteration lr shortened to move at most lr in ℓ₁. One `step(closure)` is one iteration (torch's LBFGS with
max_iter=1, line_search_fn="strong_wolfe"); the shared machinery is minitrain/optim/full_batch.py.
"""

from __future__ import annotations

import numpy as np

from minitrain.common.errors import ArgumentError
from minitrain.optim.full_batch import FullBatchOptimizer

CURVATURE_EPS = 1e-10  # torch's LBFGS skips a pair with y·s at or below it


class LBFGS(FullBatchOptimizer):
    """L-BFGS with a strong-Wolfe line search; `history_size` pairs (s, y), newest in s0, y0."""

    name = "lbfgs"

    lr: float = 1.0
    history_size: int = 10
    weight_decay: float = 0.0

    def _state_init(self) -> dict[str, float]:
        if not isinstance(self.history_size, int) or self.history_size < 1:
            raise ArgumentError(f"optimizer.history_size: must be an integer >= 1, got {self.history_size!r}")
        pairs = [f"{v}{i}" for i in range(self.history_size) for v in "sy"]
        return dict.fromkeys([*pairs, "last_step", "prev_grad"], 0.0)

    def _pairs(self) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """(s, y, y·s) of the history, newest first; unfilled (all-zero) pairs are left out."""
        pairs = []
        for i in range(self.history_size):
            s, y = self.state[f"s{i}"].astype(np.float64), self.state[f"y{i}"].astype(np.float64)
            ys = float(y @ s)
            if ys > CURVATURE_EPS:
                pairs.append((s, y, ys))
        return pairs

    def _direction(self, x: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, float]:
        if self.step_count > 1:
            s, y = self.state["last_step"].astype(np.float64), g - self.state["prev_grad"]
            if float(y @ s) > CURVATURE_EPS:  # shift the history one place older, the new pair in front
                for i in range(self.history_size - 1, 0, -1):
                    self.state[f"s{i}"][...], self.state[f"y{i}"][...] = self.state[f"s{i-1}"], self.state[f"y{i-1}"]
                self.state["s0"][...], self.state["y0"][...] = s, y
        pairs = self._pairs()
        if not pairs:
            return -g, self._first_step(g)
        q, alphas = g.copy(), []
        for s, y, ys in pairs:
            alphas.append(float(s @ q) / ys)
            q -= alphas[-1] * y
        s, y, ys = pairs[0]
        r = q * (ys / float(y @ y))
        for (s, y, ys), alpha in zip(reversed(pairs), reversed(alphas), strict=True):
            r += s * (alpha - float(y @ r) / ys)
        return -r, self.lr

    def _accepted(self, s: np.ndarray, g: np.ndarray, d: np.ndarray) -> None:
        self.state["last_step"][...], self.state["prev_grad"][...] = s, g
