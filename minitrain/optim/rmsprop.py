"""RMSprop (Hinton), as `torch.optim.RMSprop`, optionally centered and with momentum.

    g ← g + wd·p                                      (L2 weight decay, only if wd > 0)
    s ← α·s + (1 − α)·g²                              (square_avg)
    centered:  a ← α·a + (1 − α)·g;  d = √(s − a²) + ε  (grad_avg; subtracting the mean's square
    otherwise: d = √s + ε                               turns the second moment into a variance)
    momentum:  b ← μ·b + g/d;  p ← p − lr·b
    otherwise: p ← p − lr·g/d

s − a² is ≥ 0 in exact arithmetic; it is clamped at 0 so float rounding cannot produce √(negative) = NaN.
"""

from __future__ import annotations

import numpy as np

from minitrain.optim.optimizer import Optimizer, with_l2


class RMSprop(Optimizer):
    """RMSprop with `torch.optim.RMSprop`'s defaults (lr 1e-2, alpha 0.99, eps 1e-8)."""

    name = "rmsprop"

    lr: float = 1e-2
    alpha: float = 0.99
    eps: float = 1e-8
    momentum: float = 0.0
    centered: bool = False
    weight_decay: float = 0.0

    def _state_init(self) -> dict[str, float]:
        init = {"square_avg": 0.0}
        if self.momentum > 0:
            init["momentum_buffer"] = 0.0
        if self.centered:
            init["grad_avg"] = 0.0
        return init

    def _update(
        self, data: np.ndarray, grad: np.ndarray, state: dict[str, np.ndarray], lr: float, weight_decay: float
    ) -> None:
        g = with_l2(grad, data, weight_decay)
        square_avg = state["square_avg"]
        square_avg *= self.alpha
        square_avg += (1.0 - self.alpha) * g * g
        if self.centered:
            grad_avg = state["grad_avg"]
            grad_avg *= self.alpha
            grad_avg += (1.0 - self.alpha) * g
            denom = np.sqrt(np.maximum(square_avg - grad_avg * grad_avg, 0.0)) + self.eps
        else:
            denom = np.sqrt(square_avg) + self.eps
        if self.momentum > 0:
            buf = state["momentum_buffer"]
            buf *= self.momentum
            buf += g / denom
            data -= lr * buf
        else:
            data -= lr * (g / denom)
