"""`Linear4Bit`: a frozen linear layer whose weight is held in 4-bit blocks (the base of a QLoRA model)."""

from __future__ import annotations

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.nn.linear import Linear
from minitrain.nn.module import Module
from minitrain.quant.blockwise import Blockwise4Bit, quantize_4bit
from minitrain.quant.tape_ops import linear_4bit


class Linear4Bit(Module):
    """y = x·deq(W₄) + b (then the activation, if any).  x (..., in) -> y (..., out).

    W₄ is the `Linear`'s weight quantized in blocks of 64 (nf4 or fp4 code book, optionally double-quantized;
    minitrain/quant/blockwise.py). It is not a Parameter: it has no gradient, no optimizer state, and no place in
    a state dict or checkpoint; it is rebuilt from the base model, which is deterministic. The bias stays a
    float Parameter (frozen unless LoRA's `bias` setting trains it).
    """

    def __init__(self, linear: Linear, quant_type: str = "nf4", double_quantize: bool = False) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.activation = linear.activation
        self.weight: Blockwise4Bit = quantize_4bit(linear.weight.data, quant_type, double_quantize)
        self.bias = linear.bias

    def forward(self, x: Tensor) -> Tensor:
        y = self.pre_activation(x)
        return F.gelu(y) if self.activation == "gelu" else y

    def pre_activation(self, x: Tensor) -> Tensor:
        """x·deq(W₄) + b without the activation."""
        return linear_4bit(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        dq = ", double-quantized" if self.weight.absmax is None else ""
        return f"{self.in_features} → {self.out_features}, {self.weight.quant_type}{dq}, {self.weight.nbytes:,} bytes"
