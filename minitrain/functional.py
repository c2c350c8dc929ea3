"""Fused ops a transformer needs, each one tape node with its backward right below its forward.

Building these from the elementary Tensor ops would also be correct (tests check that), but would record many
nodes and temporaries per call; fusing them keeps the tape short and lets the hot ones run as numba kernels,
chosen in `minitrain.kernels` (`kernels.active`).

Shape letters: B batch, T time (sequence), C channels (d_model), H heads, D head size, V vocabulary, N rows.
"""

from __future__ import annotations

import numpy as np

from minitrain import kernels
from minitrain.tensor import Tensor


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x·W + b.  x (..., I), W (I, O), b (O,) -> y (..., O).

    Backward, with x and g flattened to rows: dx = g·Wᵀ, dW = xᵀ·g, db = Σ_rows g."""
    n_in, n_out = weight.shape
    if x.shape[-1] != n_in:
        raise ValueError(f"linear: input of shape {x.shape} does not match weight of shape {weight.shape}")
    rows = x.data.reshape(-1, n_in)
    y = rows @ weight.data
    if bias is not None:
        y += bias.data

    def backward(g: np.ndarray) -> None:
        g_rows = g.reshape(-1, n_out)
        if x.requires_grad:
            x._accumulate((g_rows @ weight.data.T).reshape(x.shape))
        if weight.requires_grad:
            weight._accumulate(rows.T @ g_rows)
        if bias is not None and bias.requires_grad:
            bias._accumulate(g_rows.sum(axis=0))

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
    if not training or p == 0.0:
        return x
    if rng is None:
        raise ValueError("dropout: training with p > 0 needs the training rng")
    keep = (rng.random(x.shape) >= p).astype(x.dtype) * x.dtype.type(1.0 / (1.0 - p))
    return Tensor._from_op(x.data * keep, (x,), lambda g: x._accumulate(g * keep))


# --------------------------------------------------------------------- attention
def _attention_forward(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, key_mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """y = softmax(q·kᵀ/√D + causal and padding mask)·v.  q, k, v (B, H, T, D) -> y (B, H, T, D), probs (B, H, T, T)."""
    scale = 1.0 / np.sqrt(q.shape[-1])
    probs = kernels.active.causal_softmax_forward(q @ np.swapaxes(k, -1, -2), scale, key_mask)
    return probs @ v, probs


def _attention_backward(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, probs: np.ndarray, g: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dv = pᵀ·g,  dp = g·vᵀ,  ds = softmax backward of dp,  dq = ds·k,  dk = dsᵀ·q."""
    scale = 1.0 / np.sqrt(q.shape[-1])
    dv = np.swapaxes(probs, -1, -2) @ g
    dscores = kernels.active.causal_softmax_backward(probs, g @ np.swapaxes(v, -1, -2), scale)
    return dscores @ k, np.swapaxes(dscores, -1, -2) @ q, dv


def _key_mask(pad_mask: np.ndarray | None, batch: int, time: int) -> np.ndarray:
    if pad_mask is None:
        return np.ones((batch, time), dtype=bool)
    return np.ascontiguousarray(pad_mask, dtype=bool)


def attention(q: Tensor, k: Tensor, v: Tensor, pad_mask: np.ndarray | None = None) -> Tensor:
    """Causal scaled dot-product attention.  q, k, v (B, H, T, D); pad_mask (B, T), True on real tokens (keys
    that are padding are never attended to) -> (B, H, T, D)."""
    key_mask = _key_mask(pad_mask, q.shape[0], q.shape[2])
    y, probs = _attention_forward(q.data, k.data, v.data, key_mask)

    def backward(g: np.ndarray) -> None:
        dq, dk, dv = _attention_backward(q.data, k.data, v.data, probs, g)
        q._accumulate(dq)
        k._accumulate(dk)
        v._accumulate(dv)

    return Tensor._from_op(y, (q, k, v), backward)


def self_attention(qkv: Tensor, n_head: int, pad_mask: np.ndarray | None = None) -> Tensor:
    """Multi-head causal self-attention from the fused projection, as one tape node.

    qkv (B, T, 3C) holds q | k | v, and inside each, head h owns columns [h·D, (h+1)·D) (GPT-2's layout).
    Returns the heads' outputs side by side, (B, T, C), ready for the output projection."""
    batch, time, three_c = qkv.shape
    head_size = three_c // (3 * n_head)
    # (B, T, 3C) -> (3, B, H, T, D): split q|k|v, then heads.
    heads = qkv.data.reshape(batch, time, 3, n_head, head_size).transpose(2, 0, 3, 1, 4)
    q, k, v = np.ascontiguousarray(heads[0]), np.ascontiguousarray(heads[1]), np.ascontiguousarray(heads[2])
    key_mask = _key_mask(pad_mask, batch, time)
    y, probs = _attention_forward(q, k, v, key_mask)

    def backward(g: np.ndarray) -> None:
        g_heads = g.reshape(batch, time, n_head, head_size).transpose(0, 2, 1, 3)
        dq, dk, dv = _attention_backward(q, k, v, probs, g_heads)
        # (3, B, H, T, D) -> (B, T, 3, H, D) -> (B, T, 3C): the inverse of the split above.
        qkv._accumulate(np.stack((dq, dk, dv)).transpose(1, 3, 0, 2, 4).reshape(batch, time, three_c))

    return Tensor._from_op(y.transpose(0, 2, 1, 3).reshape(batch, time, n_head * head_size), (qkv,), backward)
