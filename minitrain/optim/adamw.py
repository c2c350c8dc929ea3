"""AdamW (Loshchilov & Hutter): Adam with weight decay decoupled from the gradient, as `torch.optim.AdamW`.

For step t, per element (see `minitrain/autograd/kernels/adamw_update.py` for the fused kernel):

    p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
    p ← p − lr/(1−β1ᵗ) · m / (√v/√(1−β2ᵗ) + ε)

wd is 0 for biases and LayerNorm parameters unless a group rule says otherwise (see `groups.py`).

`amsgrad=True` (Reddi et al., as torch's `amsgrad`) divides by the largest second moment seen so far instead of
the current one, v_max ← max(v_max, v), so the effective step never grows back; it runs the NumPy code below
(`amsgrad_update`), not the fused kernel.
With a `ParameterBuffer` a step is one kernel call per group: two calls with the default settings.
The numba kernel runs unless minitrain's kernel backend is "numpy" (NUMBA_DISABLE_JIT=1, MINITRAIN_KERNELS=numpy
or `kernels.use_backend("numpy")`), which runs the NumPy reference instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

import numpy as np

from minitrain.autograd import kernels
from minitrain.autograd.parameters import ParameterBuffer
from minitrain.optim.optimizer import Optimizer, Parameter, check_range


class AdamW(Optimizer):
    """AdamW with `torch.optim.AdamW`'s defaults (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight_decay 0.01)."""

    name = "adamw"
    decoupled: ClassVar[bool] = True  # False: classic Adam, decay as an L2 term added to the gradient

    def __init__(
        self,
        named_params: Iterable[tuple[str, Parameter]],
        lr: float = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        amsgrad: bool = False,
        groups: Sequence[Mapping[str, object]] | None = None,
        buffer: ParameterBuffer | None = None,
    ) -> None:
        check_range("beta1", beta1, high=1.0, open_high=True)
        check_range("beta2", beta2, high=1.0, open_high=True)
        check_range("eps", eps)
        self.beta1, self.beta2, self.eps, self.amsgrad = float(beta1), float(beta2), float(eps), bool(amsgrad)
        init = {"exp_avg": 0.0, "exp_avg_sq": 0.0, **({"max_exp_avg_sq": 0.0} if amsgrad else {})}
        super().__init__(named_params, lr, weight_decay, init, groups, buffer)

    def _update(
        self, data: np.ndarray, grad: np.ndarray, state: dict[str, np.ndarray], lr: float, weight_decay: float
    ) -> None:
        if self.amsgrad:
            amsgrad_update(data, grad, state["exp_avg"], state["exp_avg_sq"], state["max_exp_avg_sq"],
                           lr, self.beta1, self.beta2, self.eps, weight_decay, self.step_count, self.decoupled)
            return
        kernels.active.adamw_update(
            data, grad, state["exp_avg"], state["exp_avg_sq"],
            lr, self.beta1, self.beta2, self.eps, weight_decay, self.step_count, self.decoupled,
        )  # fmt: skip


def amsgrad_update(
    param: np.ndarray,
    grad: np.ndarray,
    exp_avg: np.ndarray,
    exp_avg_sq: np.ndarray,
    max_exp_avg_sq: np.ndarray,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
    decoupled: bool = True,
) -> None:
    """One AdamW (or Adam) step with AMSGrad, in place: the kernel's math with v_max ← max(v_max, v) in the
    denominator (torch.optim.AdamW(amsgrad=True) step by step).

    The decay and the moments repeat `kernels.adamw_update.adamw_update_reference`'s first lines on purpose: the course
    (theory/02) quotes that reference whole, and this reads whole too.
    """
    if decoupled:
        param *= 1.0 - lr * weight_decay
    else:
        grad = grad + weight_decay * param
    exp_avg *= beta1
    exp_avg += (1.0 - beta1) * grad
    exp_avg_sq *= beta2
    exp_avg_sq += (1.0 - beta2) * grad * grad
    np.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
    step_size = lr / (1.0 - beta1**step)
    param -= step_size * (exp_avg / (np.sqrt(max_exp_avg_sq) / math.sqrt(1.0 - beta2**step) + eps))
