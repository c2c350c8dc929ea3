"""SGD with optional momentum and Nesterov momentum, as `torch.optim.SGD`.

g ← g + wd·p                               (L2 weight decay, only if wd > 0)
b ← g                        on step 1     (momentum buffer; no dampening on the first step)
b ← μ·b + (1 − dampening)·g  afterwards
g ← g + μ·b  (nesterov)   or   g ← b  (classic momentum)
p ← p − lr·g
"""

from __future__ import annotations

import numpy as np

from minitrain.common.errors import ArgumentError
from minitrain.optim.optimizer import Optimizer, with_l2


class SGD(Optimizer):
    """Stochastic gradient descent; `momentum=0` is plain SGD."""

    name = "sgd"

    lr: float = 1e-3
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0

    def _state_init(self) -> dict[str, float]:
        if self.nesterov and (self.momentum == 0 or self.dampening != 0):
            raise ArgumentError("optimizer.nesterov: needs momentum > 0 and dampening = 0")
        return {"momentum_buffer": 0.0} if self.momentum > 0 else {}

    def _update(
        self, data: np.ndarray, grad: np.ndarray, state: dict[str, np.ndarray], lr: float, weight_decay: float
    ) -> None:
        g = with_l2(grad, data, weight_decay)
        if self.momentum > 0:
            buf = state["momentum_buffer"]
            if self.step_count == 1:
                buf[...] = g
            else:
                buf *= self.momentum
                buf += (1.0 - self.dampening) * g
            g = g + self.momentum * buf if self.nesterov else buf
        data -= lr * g
