"""SGD with optional momentum and Nesterov momentum, as `torch.optim.SGD`.

g ← g + wd·p                               (L2 weight decay, only if wd > 0)
b ← g                        on step 1     (momentum buffer; no dampening on the first step)
b ← μ·b + (1 − dampening)·g  afterwards
g ← g + μ·b  (nesterov)   or   g ← b  (classic momentum)
p ← p − lr·g
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from minitrain.autograd.parameters import ParameterBuffer
from minitrain.common.errors import ArgumentError
from minitrain.optim.optimizer import Optimizer, Parameter, check_range, with_l2


class SGD(Optimizer):
    """Stochastic gradient descent; `momentum=0` is plain SGD."""

    name = "sgd"

    def __init__(
        self,
        named_params: Iterable[tuple[str, Parameter]],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        nesterov: bool = False,
        weight_decay: float = 0.0,
        groups: Sequence[Mapping[str, object]] | None = None,
        buffer: ParameterBuffer | None = None,
    ) -> None:
        check_range("momentum", momentum)
        check_range("dampening", dampening, high=1.0)
        if nesterov and (momentum == 0 or dampening != 0):
            raise ArgumentError("optimizer.nesterov: needs momentum > 0 and dampening = 0")
        self.momentum, self.dampening, self.nesterov = float(momentum), float(dampening), bool(nesterov)
        init = {"momentum_buffer": 0.0} if momentum > 0 else {}
        super().__init__(named_params, lr, weight_decay, init, groups, buffer)

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
