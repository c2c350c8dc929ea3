"""`Linear`: y = x·W + b, the layer every network is mostly made of."""

from __future__ import annotations

import math

import numpy as np

import minitrain.functional as F
from minitrain.nn.module import Module, Parameter
from minitrain.tensor import Tensor


class Linear(Module):
    """y = x·W + b, or with activation="gelu" y = gelu(x·W + b) as one fused op.  x (..., in) -> y (..., out).

    W is stored [in, out] (GPT-2's Conv1D layout, the transpose of torch.nn.Linear's), so the forward pass is
    x·W with no transpose and a state dict loads into Hugging Face GPT-2 unchanged.

    Init, drawn from `rng` (the training RNG): W ~ N(0, std²) with std = 1/√in unless given (LeCun: the
    output's variance stays near the input's), b = 0.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        activation: str | None = None,
        *,
        rng: np.random.Generator,
        std: float | None = None,
        dtype: type = np.float32,
    ) -> None:
        super().__init__()
        if activation not in (None, "gelu"):
            raise ValueError(f"Linear: unknown activation {activation!r}; use None or 'gelu'")
        self.in_features, self.out_features, self.activation = in_features, out_features, activation
        std = 1.0 / math.sqrt(in_features) if std is None else std
        self.weight = Parameter(rng.normal(0.0, std, size=(in_features, out_features)), dtype=dtype)
        self.bias = Parameter(np.zeros(out_features), dtype=dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        gelu = ", activation=gelu" if self.activation else ""
        return f"{self.in_features} → {self.out_features}" + ("" if self.bias is not None else ", bias=False") + gelu
