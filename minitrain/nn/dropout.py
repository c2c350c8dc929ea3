"""`Dropout`: random zeros while training, so no unit can rely on one particular other unit."""

from __future__ import annotations

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.random import or_default
from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import ArgumentError
from minitrain.nn.module import Module


class Dropout(Module):
    """y = x · keep / (1 − p), keep ~ Bernoulli(1 − p) per element, while training; y = x in eval mode.

    The masks are drawn from `rng`, the training RNG (the one that drew the initial weights), so a resumed run
    draws the same masks as an uninterrupted one; without one, from the default generator (`minitrain.manual_seed`).
    With p = 0 it is the identity and draws nothing.
    """

    def __init__(self, p: float = 0.0, *, rng: np.random.Generator | None = None) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ArgumentError(f"Dropout: p must be in [0, 1), got {p}")
        self.p, self.rng = p, or_default(rng)

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training, self.rng)

    def extra_repr(self) -> str:
        return f"p={self.p:g}"
