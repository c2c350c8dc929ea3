"""Fused ops a transformer needs, each one tape node with its backward right below its forward.

Building these from the elementary Tensor ops would also be correct (tests check that), but would record many
nodes and temporaries per call; fusing them keeps the tape short and lets the hot ones run as numba kernels,
chosen in `minitrain.autograd.kernels` (`kernels.active`).

Shape letters: B batch, T time (sequence), C channels (d_model), H heads, D head size, V vocabulary, N rows.
"""

from __future__ import annotations

import numpy as np

from minitrain.autograd import kernels
from minitrain.autograd.ops import concat
from minitrain.autograd.tensor import Tensor


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str | None = None) -> Tensor:
    """y = x·W + b, or with activation="gelu" y = gelu(x·W + b) as one tape node (the MLP's first layer: the bias
    add and the GELU are one pass).  x (..., I), W (I, O), b (O,) -> y (..., O).

    Backward, with x and g flattened to rows (g first times gelu'): dx = g·Wᵀ, dW = xᵀ·g, db = Σ_rows g."""
    n_in, n_out = weight.shape
    if x.shape[-1] != n_in:
        raise ValueError(f"linear: input of shape {x.shape} does not match weight of shape {weight.shape}")
    if activation not in (None, "gelu"):
        raise ValueError(f"linear: unknown activation {activation!r}; use None or 'gelu'")
    rows = x.data.reshape(-1, n_in)
    b = None if bias is None else bias.data
    y = pre = rows @ weight.data  # for gelu: x·W without the bias, which the kernels add
    if activation == "gelu":
        y = kernels.active.gelu_forward(pre, b)
    elif b is not None:
        y += b

    def backward(g: np.ndarray) -> None:
        g_rows = g.reshape(-1, n_out)
        if activation == "gelu":
            g_rows = kernels.active.gelu_backward(pre, g_rows, b)
        if x.requires_grad:
            x._accumulate((g_rows @ weight.data.T).reshape(x.shape))
        if weight.requires_grad:
            weight._accumulate_product(rows.T, g_rows)
        if bias is not None and bias.requires_grad:
            bias._accumulate_product(np.ones(len(g_rows), g_rows.dtype), g_rows)  # Σ_rows g by BLAS: 3x sum()

    parents = (x, weight) if bias is None else (x, weight, bias)
    return Tensor._from_op(y.reshape(*x.shape[:-1], n_out), parents, backward)


def gelu(x: Tensor) -> Tensor:
    """GELU, tanh approximation (GPT-2's "gelu_new"); math in kernels/gelu.py."""
    return Tensor._from_op(
        kernels.active.gelu_forward(x.data), (x,), lambda g: x._accumulate(kernels.active.gelu_backward(x.data, g))
    )


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """y = (x − μ)/√(σ² + eps)·w + b over the last axis.  x (..., C), w and b (C,); math in kernels/layernorm.py."""
    channels = x.shape[-1]
    rows = np.ascontiguousarray(x.data.reshape(-1, channels))
    y, mean, rstd = kernels.active.layernorm_forward(rows, weight.data, bias.data, eps)

    def backward(g: np.ndarray) -> None:
        dx, dw, db = kernels.active.layernorm_backward(g.reshape(-1, channels), rows, weight.data, mean, rstd)
        x._accumulate(dx.reshape(x.shape))
        weight._accumulate(dw)
        bias._accumulate(db)

    return Tensor._from_op(y.reshape(x.shape), (x, weight, bias), backward)


def sigmoid(x: Tensor) -> Tensor:
    """y = 1/(1 + e^(−x)), computed as e^x/(1 + e^x) for x < 0 so that no exp overflows;  dx = g·y·(1 − y)."""
    e = np.exp(-np.abs(x.data))  # in (0, 1]: never overflows
    y = np.where(x.data >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype)
    return Tensor._from_op(y, (x,), lambda g: x._accumulate(g * y * (1 - y)))


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """y = exp(x − max) / Σ exp(x − max);  dx = y·(g − Σ g·y)."""
    e = np.exp(x.data - x.data.max(axis=axis, keepdims=True))
    y = e / e.sum(axis=axis, keepdims=True)
    return Tensor._from_op(y, (x,), lambda g: x._accumulate(y * (g - (g * y).sum(axis=axis, keepdims=True))))


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """y = x − log Σ exp(x);  dx = g − softmax(x)·Σ g."""
    peak = x.data.max(axis=axis, keepdims=True)
    lse = peak + np.log(np.exp(x.data - peak).sum(axis=axis, keepdims=True))
    y = x.data - lse
    return Tensor._from_op(y, (x,), lambda g: x._accumulate(g - np.exp(y) * g.sum(axis=axis, keepdims=True)))


def cross_entropy(logits: Tensor, targets: np.ndarray, mask: np.ndarray | None = None) -> Tensor:
    """Mean of −log softmax(logits)[target] over the positions where mask is True (all positions if None).

    logits (..., V); targets (...) int; mask (...) bool. Fused softmax + NLL; math in kernels/cross_entropy.py."""
    vocab = logits.shape[-1]
    rows = np.ascontiguousarray(logits.data.reshape(-1, vocab))
    targets = np.asarray(targets).reshape(-1)
    if targets.shape[0] != rows.shape[0]:
        raise ValueError(f"cross_entropy: logits of shape {logits.shape} and targets of shape {targets.shape} differ")
    if targets.size and not 0 <= targets.min() <= targets.max() < vocab:  # the numba kernel does not bounds-check
        raise ValueError(f"cross_entropy: target ids must be in [0, {vocab}), got {targets.min()}..{targets.max()}")
    mask = np.ones(rows.shape[0], dtype=bool) if mask is None else np.asarray(mask, dtype=bool).reshape(-1)
    count = int(mask.sum())
    if count == 0:
        raise ValueError("cross_entropy: the mask selects no position, so the mean is undefined")
    nll, lse = kernels.active.cross_entropy_forward(rows, targets, mask)
    loss = np.asarray(nll.sum(dtype=np.float64) / count, dtype=logits.dtype)

    def backward(g: np.ndarray) -> None:
        dnll = mask * (g / count).astype(logits.dtype)
        logits._accumulate(kernels.active.cross_entropy_backward(rows, targets, lse, dnll).reshape(logits.shape))

    return Tensor._from_op(loss, (logits,), backward)


def embedding(weight: Tensor, idx: np.ndarray) -> Tensor:
    """y[...] = W[idx[...]].  W (V, C), idx (...) int -> y (..., C); backward is a scatter-add into dW."""
    idx = np.asarray(idx)
    vocab, channels = weight.shape

    def backward(g: np.ndarray) -> None:
        weight._accumulate(kernels.active.embedding_backward(idx.reshape(-1), g.reshape(-1, channels), vocab))

    return Tensor._from_op(weight.data[idx], (weight,), backward)


def dropout(x: Tensor, p: float, training: bool, rng: np.random.Generator | None = None) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1 − p); the identity when not training.

    The mask is drawn from `rng`, the training RNG, so a resumed run draws the same masks."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0.0:
        return x
    if rng is None:
        raise ValueError("dropout: training with p > 0 needs the training rng")
    keep = (rng.random(x.shape) >= p).astype(x.dtype) * x.dtype.type(1.0 / (1.0 - p))
    return Tensor._from_op(x.data * keep, (x,), lambda g: x._accumulate(g * keep))


# --------------------------------------------------------------------- attention
def self_attention(
    qkv: Tensor,
    n_head: int,
    pad_mask: np.ndarray | None = None,
    scale: float | None = None,
    return_probs: bool = False,
) -> Tensor | tuple[Tensor, np.ndarray]:
    """Multi-head causal self-attention from the fused projection, as one tape node; math in kernels/attention.py.

    qkv (B, T, 3C) holds q | k | v, and inside each, head h owns columns [h·D, (h+1)·D) (GPT-2's layout);
    pad_mask (B, T) is True on real tokens (padding keys are never attended to); scores are q·k·scale with
    scale = 1/√D unless given. Returns the heads' outputs side by side, (B, T, C), ready for the output
    projection; with return_probs also the attention probabilities (B, H, T, T) as a plain array."""
    batch, time, width = qkv.shape
    if width % (3 * n_head):
        raise ValueError(f"self_attention: qkv of shape {qkv.shape} does not split into q, k, v of {n_head} heads")
    key_mask = np.ones((batch, time), dtype=bool) if pad_mask is None else np.asarray(pad_mask, dtype=bool)
    if key_mask.shape != (batch, time):  # the numba kernel does not bounds-check
        raise ValueError(f"self_attention: pad_mask of shape {key_mask.shape} does not match (B, T) = {(batch, time)}")
    y, probs = kernels.active.attention_forward(qkv.data, n_head, key_mask, scale)

    def backward(g: np.ndarray) -> None:
        qkv._accumulate(kernels.active.attention_backward(qkv.data, probs, g, scale))

    out = Tensor._from_op(y, (qkv,), backward)
    return (out, probs) if return_probs else out


def attention(
    q: Tensor, k: Tensor, v: Tensor, pad_mask: np.ndarray | None = None, scale: float | None = None
) -> Tensor:
    """Causal scaled dot-product attention.  q, k, v (B, H, T, D); pad_mask (B, T), True on real tokens (keys
    that are padding are never attended to); scale 1/√D unless given -> (B, H, T, D). Packs the heads into
    `self_attention`'s layout."""
    batch, n_head, time, head_size = q.shape
    qkv = concat([t.transpose(0, 2, 1, 3).reshape(batch, time, n_head * head_size) for t in (q, k, v)], axis=-1)
    y = self_attention(qkv, n_head, pad_mask, scale)
    return y.reshape(batch, time, n_head, head_size).transpose(0, 2, 1, 3)
