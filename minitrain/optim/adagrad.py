"""Adagrad (Duchi et al.), as `torch.optim.Adagrad`: each coordinate's step shrinks with its summed squares.

g ← g + wd·p                             (L2 weight decay, only if wd > 0)
clr = lr / (1 + (t − 1)·lr_decay)        (t = 1, 2, ... the step number)
s ← s + g²                               (sum, starting at initial_accumulator_value)
p ← p − clr · g / (√s + ε)
"""

from __future__ import annotations

import numpy as np

from minitrain.optim.optimizer import Optimizer, with_l2


class Adagrad(Optimizer):
    """Adagrad with `torch.optim.Adagrad`'s defaults (lr 1e-2, lr_decay 0, initial accumulator 0, eps 1e-10)."""

    name = "adagrad"

    lr: float = 1e-2
    lr_decay: float = 0.0
    initial_accumulator_value: float = 0.0
    eps: float = 1e-10
    weight_decay: float = 0.0

    def _state_init(self) -> dict[str, float]:
        return {"sum": self.initial_accumulator_value}

    def _update(
        self, data: np.ndarray, grad: np.ndarray, state: dict[str, np.ndarray], lr: float, weight_decay: float
    ) -> None:
        g = with_l2(grad, data, weight_decay)
        clr = lr / (1.0 + (self.step_count - 1) * self.lr_decay)
        state["sum"] += g * g
        data -= clr * (g / (np.sqrt(state["sum"]) + self.eps))
