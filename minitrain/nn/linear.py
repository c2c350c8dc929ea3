"""`Linear`: y = x·W + b, the layer every network is mostly made of."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.random import or_default
from minitrain.autograd.tensor import Tensor
from minitrain.nn.module import Module, Parameter


class Linear(Module):
    """y = x·W + b, or with activation="gelu" y = gelu(x·W + b) as one fused op.  x (..., in) -> y (..., out).

    W is stored [in, out] (GPT-2's Conv1D layout, the transpose of torch.nn.Linear's), so the forward pass is
    x·W with no transpose and a state dict loads into Hugging Face GPT-2 unchanged.

    Init, drawn from `rng` (the training RNG; the default generator, `minitrain.manual_seed`, when not given):
    W ~ N(0, std²) with std = 1/√in unless given (LeCun: the
    output's variance stays near the input's), b = 0.

    `weight_transform`, None unless set, is applied to W on every forward pass: quantization-aware training sets
    it to a fake quantizer (minitrain/training/qat.py), so the layer computes with the weight it will be stored as
    while its parameters and their names stay the same.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, activation: str | None = None, *,
                 rng: np.random.Generator | None = None, std: float | None = None, dtype: type = np.float32) -> None:
        super().__init__()
        if activation not in (None, "gelu"):
            raise ValueError(f"Linear: unknown activation {activation!r}; use None or 'gelu'")
        self.in_features, self.out_features, self.activation = in_features, out_features, activation
        std = 1.0 / math.sqrt(in_features) if std is None else std
        self.weight = Parameter(or_default(rng).normal(0.0, std, size=(in_features, out_features)), dtype=dtype)
        self.bias = Parameter(np.zeros(out_features), dtype=dtype) if bias else None
        self.weight_transform: Callable[[Tensor], Tensor] | None = None

    @classmethod
    def from_arrays(cls, weight: np.ndarray, bias: np.ndarray | None = None, activation: str | None = None) -> Linear:
        """A Linear holding these values: weight (in, out), bias (out,) or None (e.g. a merged LoRA layer)."""
        layer = cls(*weight.shape, bias=bias is not None, activation=activation, rng=np.random.default_rng(0),
                    dtype=weight.dtype.type)
        layer.weight.data[...] = weight
        if bias is not None:
            layer.bias.data[...] = bias
        return layer

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self._weight(), self.bias, self.activation)

    def pre_activation(self, x: Tensor) -> Tensor:
        """x·W + b without the activation (what a LoRA adapter adds its update to)."""
        return F.linear(x, self._weight(), self.bias)

    def _weight(self) -> Tensor:
        return self.weight if self.weight_transform is None else self.weight_transform(self.weight)

    def extra_repr(self) -> str:
        gelu = ", activation=gelu" if self.activation else ""
        return f"{self.in_features} → {self.out_features}" + ("" if self.bias is not None else ", bias=False") + gelu
