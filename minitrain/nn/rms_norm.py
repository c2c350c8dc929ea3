"""`RMSNorm`: each position's vector rescaled to root-mean-square 1, then given a learned gain (the Llama family's
norm; GPT-2's LayerNorm is in normalization.py)."""

from __future__ import annotations

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.nn.module import Module, Parameter


class RMSNorm(Module):
    """y = x/√(mean(x²) + eps) · w over the last axis.  x (..., C) -> y (..., C); w = 1 at init.

    LayerNorm without the centring and the shift (Zhang & Sennrich 2019, the Llama family's norm): only the
    vector's scale is normalised, which is what keeps the residual stream stable, at one reduction per row.
    `weight` is the gain w (C,), a Parameter of `dtype`; `eps` sits inside the root, so a zero vector gives 0.
    """

    def __init__(self, dim: int, eps: float = 1e-6, *, dtype: type = np.float32) -> None:
        """Keep dim and eps (as self.dim, self.eps); self.weight = Parameter(np.ones(dim), dtype=dtype)."""
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = Parameter(np.ones(dim), dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        """x (..., C) -> x/√(mean(x²) + eps) · weight, the mean over the last axis."""
        return F.rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        """What repr(module) shows inside the parentheses: `64, eps=1e-05`."""
        return f"{self.dim}, eps={self.eps:g}"
