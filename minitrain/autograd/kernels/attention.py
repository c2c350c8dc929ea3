"""Causal multi-head self-attention: forward and backward in NumPy, with the softmax as a numba kernel.

Input is the fused projection qkv (B, T, 3C): q | k | v side by side, and inside each, head h owns the columns
[h·D, (h+1)·D) with D = C/H (GPT-2's layout). For batch b, head h, query position i and key position j:

    allowed(i, j) = j ≤ i  and  key_mask[b, j]               (causal, and never a padding key)
    s_ij = scale · q_i·k_j,   scale = 1/√D unless given (the variance of q·k grows with D; the scale undoes it)
    p_ij = exp(s_ij − m_i) / Σ_allowed exp(s_ik − m_i)        for allowed j, else 0   (m_i: the row maximum)
    y_i  = Σ_j p_ij · v_j                                     written to out[b, i, h·D:(h+1)·D]

A row with no allowed key (impossible once position 0 is a real token) gets p = 0 and y = 0. Backward, given
dy (B, T, C) and the saved p:

    dv_j += p_ij · dy_i,   dp_ij = dy_i·v_j,   ds_ij = scale · p_ij · (dp_ij − Σ_k p_ik·dp_ik)
    dq_i = Σ_j ds_ij · k_j,   dk_j += ds_ij · q_i

Both implementations do the four matrix products as batched products on views of qkv and write straight into
the (B, T, C) output and the (B, T, 3C) gradient. They differ in the softmax: NumPy in the reference, the numba
kernel in the other, both grouped_attention.py's masked softmax under the causal mask `causal_bias` (its rows,
and the backward, are attention_softmax.py's).
From 2²³ multiply-adds per product (B·H·T·T·D: the scaled config, not the lab's) the batch is cut into one slice
per core, each computed on its own thread (batch_split.py): the same bytes, both cores busy.
Shapes: qkv (B, T, 3C); key_mask (B, T) bool; out, dy (B, T, C); scores, probs (B, H, T, T).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from minitrain.autograd.kernels.attention_softmax import softmax_backward_numba, softmax_backward_reference
from minitrain.autograd.kernels.batch_split import each_slice
from minitrain.autograd.kernels.grouped_attention import (
    additive_mask,
    masked_softmax_forward_numba,
    masked_softmax_forward_reference,
)


# ------------------------------------------------------------------------------------------- the products
def heads(x: np.ndarray, n_head: int, parts: int) -> np.ndarray:
    """(B, T, parts·H·D) -> (parts, B, H, T, D), a strided view: e.g. q, k, v = heads(qkv, H, 3)."""
    batch, time, width = x.shape
    return x.reshape(batch, time, parts, n_head, width // (parts * n_head)).transpose(2, 0, 3, 1, 4)


def _transposed(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.swapaxes(x, -1, -2))


def default_scale(head_size: int) -> float:
    """1/√D: makes s = q·k/√D unit-variance when q and k have unit-variance entries."""
    return 1.0 / np.sqrt(head_size)


def attention_forward(
    qkv: np.ndarray, n_head: int, key_mask: np.ndarray, scale: float | None = None, *, softmax: Callable
) -> tuple[np.ndarray, np.ndarray]:
    """y = softmax(q·kᵀ, scale, mask)·v per head -> out (B, T, C), probs (B, H, T, T); big batches in slices."""
    q, k, v = heads(qkv, n_head, 3)
    scale = default_scale(q.shape[-1]) if scale is None else scale
    batch, time, three_c = qkv.shape
    out = np.empty((batch, time, three_c // 3), dtype=qkv.dtype)
    probs = np.empty((batch, n_head, time, time), dtype=qkv.dtype)
    y = heads(out, n_head, 1)[0]

    def part(s: slice) -> None:
        scores = np.matmul(q[s], _transposed(k[s]), out=probs[s])
        p = softmax(scores, scale, causal_bias(key_mask[s], time, scores.dtype))
        if p is not scores:  # the NumPy softmax returns a new array; numba's works in place
            scores[...] = p
        np.matmul(scores, v[s], out=y[s])

    each_slice(part, batch, products_macs(q))
    return out, probs


def attention_backward(
    qkv: np.ndarray, probs: np.ndarray, dy: np.ndarray, scale: float | None = None, *, softmax_backward: Callable
) -> np.ndarray:
    """dv = pᵀ·dy,  dp = dy·vᵀ,  ds = softmax backward of dp,  dq = ds·k,  dk = dsᵀ·q  -> dqkv (B, T, 3C)."""
    n_head = probs.shape[1]
    q, k, v = heads(qkv, n_head, 3)
    g = heads(dy, n_head, 1)[0]
    dqkv = np.empty_like(qkv)
    dq, dk, dv = heads(dqkv, n_head, 3)
    scale = default_scale(q.shape[-1]) if scale is None else scale

    def part(s: slice) -> None:
        np.matmul(np.swapaxes(probs[s], -1, -2), g[s], out=dv[s])
        dscores = softmax_backward(probs[s], g[s] @ _transposed(v[s]), scale)
        np.matmul(dscores, k[s], out=dq[s])
        np.matmul(np.swapaxes(dscores, -1, -2), q[s], out=dk[s])

    each_slice(part, qkv.shape[0], products_macs(q))
    return dqkv


def products_macs(q: np.ndarray) -> int:
    """Multiply-adds of one of the batched products, q·kᵀ: B·H·T·T·D (what decides whether to split the batch)."""
    batch, n_head, time, head_size = q.shape
    return batch * n_head * time * time * head_size


# ------------------------------------------------------------------------------------------- the softmax
def causal_bias(key_mask: np.ndarray, time: int, dtype: np.dtype) -> np.ndarray:
    """(B, T, T) additive mask: 0 where j ≤ i and key j is a real token, −∞ elsewhere. The causal softmax is
    grouped_attention.py's masked one under it (one row of scores per query: G = 1)."""
    return additive_mask(np.tril(np.ones((time, time), dtype=bool))[None] & key_mask[:, None, :], dtype)


# The two implementations: the same products, the softmax of each (functional.py calls them through `kernels`).
attention_forward_reference = partial(attention_forward, softmax=masked_softmax_forward_reference)
attention_backward_reference = partial(attention_backward, softmax_backward=softmax_backward_reference)
attention_forward_numba = partial(attention_forward, softmax=masked_softmax_forward_numba)
attention_backward_numba = partial(attention_backward, softmax_backward=softmax_backward_numba)
