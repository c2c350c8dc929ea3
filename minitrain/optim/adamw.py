"""AdamW (Loshchilov & Hutter): Adam with weight decay decoupled from the gradient, as `torch.optim.AdamW`.

For step t, per element (see `minitrain/autograd/kernels/adamw_update.py` for the fused kernel):

    p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
    p ← p − lr/(1−β1ᵗ) · m / (√v/√(1−β2ᵗ) + ε)

wd is 0 for biases and LayerNorm parameters unless a group rule says otherwise (see `groups.py`).

`amsgrad=True` (Reddi et al., as torch's `amsgrad`) divides by the largest second moment seen so far instead of
the current one, v_max ← max(v_max, v), so the effective step never grows back; it runs the NumPy reference, not
the fused kernel.
With a `ParameterBuffer` a step is one kernel call per group: two calls with the default settings.
The numba kernel runs unless minitrain's kernel backend is "numpy" (NUMBA_DISABLE_JIT=1, MINITRAIN_KERNELS=numpy
or `kernels.use_backend("numpy")`), which runs the NumPy reference instead.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from minitrain.autograd import kernels
from minitrain.optim.optimizer import Optimizer


class AdamW(Optimizer):
    """AdamW with `torch.optim.AdamW`'s defaults (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight_decay 0.01)."""

    name = "adamw"
    decoupled: ClassVar[bool] = True  # False: classic Adam, decay as an L2 term added to the gradient

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.01
    amsgrad: bool = False

    def _state_init(self) -> dict[str, float]:
        return {"exp_avg": 0.0, "exp_avg_sq": 0.0, **({"max_exp_avg_sq": 0.0} if self.amsgrad else {})}

    def _update(
        self, data: np.ndarray, grad: np.ndarray, state: dict[str, np.ndarray], lr: float, weight_decay: float
    ) -> None:
        args = (data, grad, state["exp_avg"], state["exp_avg_sq"],
                lr, self.beta1, self.beta2, self.eps, weight_decay, self.step_count, self.decoupled)  # fmt: skip
        if self.amsgrad:  # the fused kernel keeps no v_max; its file (and numba) load on first use, as kernels' do
            from minitrain.autograd.kernels.adamw_update import adamw_update_reference

            adamw_update_reference(*args, state["max_exp_avg_sq"])
        else:
            kernels.active.adamw_update(*args)
