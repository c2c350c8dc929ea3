"""Adagrad (Duchi et al.), as `torch.optim.Adagrad`: each coordinate's step shrinks with its summed squares.

g ← g + wd·p                             (L2 weight decay, only if wd > 0)
clr = lr / (1 + (t − 1)·lr_decay)        (t = 1, 2, ... the step number)
s ← s + g²                               (sum, starting at initial_accumulator_value)
p ← p − clr · g / (√s + ε)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from minitrain.autograd.parameters import ParameterBuffer
from minitrain.optim.optimizer import Optimizer, Parameter, check_range, with_l2


class Adagrad(Optimizer):
    """Adagrad with `torch.optim.Adagrad`'s defaults (lr 1e-2, lr_decay 0, initial accumulator 0, eps 1e-10)."""

    name = "adagrad"

    def __init__(
        self,
        named_params: Iterable[tuple[str, Parameter]],
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        weight_decay: float = 0.0,
        groups: Sequence[Mapping[str, object]] | None = None,
        buffer: ParameterBuffer | None = None,
    ) -> None:
        check_range("lr_decay", lr_decay)
        check_range("initial_accumulator_value", initial_accumulator_value)
        check_range("eps", eps)
        self.lr_decay, self.eps = float(lr_decay), float(eps)
        init = {"sum": float(initial_accumulator_value)}
        super().__init__(named_params, lr, weight_decay, init, groups, buffer)

    def _update(
        self, data: np.ndarray, grad: np.ndarray, state: dict[str, np.ndarray], lr: float, weight_decay: float
    ) -> None:
        g = with_l2(grad, data, weight_decay)
        clr = lr / (1.0 + (self.step_count - 1) * self.lr_decay)
        state["sum"] += g * g
        data -= clr * (g / (np.sqrt(state["sum"]) + self.eps))
