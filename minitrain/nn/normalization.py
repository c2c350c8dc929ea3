"""`LayerNorm`: each position's vector rescaled to mean 0 and variance 1, then given a learned gain and shift
(GPT-2's norm; the Llama family's RMSNorm is in rms_norm.py)."""

from __future__ import annotations

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.nn.module import Module, Parameter


class LayerNorm(Module):
    """y = (x − μ)/√(σ² + eps) · w + b, μ and σ² over the last axis.  x (..., C) -> y (..., C); w = 1, b = 0 at init.

    Normalising each position keeps the residual stream at a scale where the next layer's inputs are neither
    vanishing nor exploding, whatever the depth; w and b let the network undo it where that helps.
    """

    def __init__(self, dim: int, eps: float = 1e-5, *, dtype: type = np.float32) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = Parameter(np.ones(dim), dtype=dtype)
        self.bias = Parameter(np.zeros(dim), dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}" + ("" if self.eps == 1e-5 else f", eps={self.eps:g}")

