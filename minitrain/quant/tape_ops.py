"""The two tape ops quantization adds: a linear layer over a 4-bit weight, and fake quantization for QAT.

    linear_4bit(x, W₄, b)    y = x·deq(W₄) + b;  dx = g·deq(W₄)ᵀ, db = Σ_rows g   (W₄ is frozen: no dW)
    fake_quantize(w, scheme) ŵ = deq(q(w));        dw = g where w is inside its unit's grid range, else 0

linear_4bit dequantizes the weight in the forward pass and again in the backward pass instead of keeping the
float32 copy between them: the 4-bit blocks are all a QLoRA base holds, during a step as between steps.

fake_quantize's backward is the straight-through estimator: rounding has derivative 0 almost everywhere, which
would stop all learning, so the backward pass treats it as the identity and keeps only the clamp's derivative
(1 inside [lo, hi], 0 outside). It is the exact gradient of clamp(w, lo, hi), which tests check by central
differences away from the range's ends.
"""

from __future__ import annotations

import numpy as np

from minitrain.autograd.tensor import Tensor
from minitrain.quant.affine import fake_quantize_array
from minitrain.quant.blockwise import Blockwise4Bit
from minitrain.quant.scheme import Scheme


def linear_4bit(x: Tensor, weight: Blockwise4Bit, bias: Tensor | None = None) -> Tensor:
    """y = x·W + b with W dequantized from 4-bit blocks.  x (..., I), W (I, O), b (O,) -> y (..., O)."""
    n_in, n_out = weight.shape
    if x.shape[-1] != n_in:
        raise ValueError(f"linear_4bit: input of shape {x.shape} does not match weight of shape {weight.shape}")
    rows = x.data.reshape(-1, n_in)
    y = rows @ weight.dequantize().astype(x.dtype, copy=False)
    if bias is not None:
        y += bias.data

    def backward(g: np.ndarray) -> None:
        g_rows = g.reshape(-1, n_out)
        if x.requires_grad:
            x._accumulate((g_rows @ weight.dequantize().astype(g.dtype, copy=False).T).reshape(x.shape))
        if bias is not None and bias.requires_grad:
            bias._accumulate(np.ones(len(g_rows), g_rows.dtype) @ g_rows)

    parents = (x,) if bias is None else (x, bias)
    return Tensor._from_op(y.reshape(*x.shape[:-1], n_out), parents, backward)


def fake_quantize(weight: Tensor, scheme: Scheme) -> Tensor:
    """ŵ = dequantize(quantize(w)) by `scheme`, ranges observed on w itself; straight-through backward."""
    rounded, inside = fake_quantize_array(weight.data, scheme)
    return Tensor._from_op(rounded, (weight,), lambda g: weight._accumulate(g * inside))
