"""Grouped-query attention under an arbitrary mask: forward and backward in NumPy, the softmax a numba kernel.

Queries come in H heads, keys and values in H_kv heads (H_kv divides H; H_kv = H is ordinary multi-head
attention, H_kv = 1 multi-query). Query head h reads key/value head h // G, G = H / H_kv, as transformers'
`repeat_kv` arranges it. For batch b, query head h, query i and key j:

    s_ij = scale · q_i·k_j,   scale = 1/√D unless given
    p_ij = exp(s_ij − m_i) / Σ_allowed exp(s_ik − m_i)   where allowed[b, i, j], else 0   (m_i: the row maximum)
    y_i  = Σ_j p_ij · v_j

`allowed` (B, Tq, Tk) is the whole mask (causal, padding keys, document boundaries, a sliding window: see
`functional.attention_mask`). A row with no allowed key gets p = 0 and y = 0. With a `softcap` c (Gemma 2's
attention logit soft-capping) the scaled scores are squashed into (−c, c) before the mask, s_ij = c·tanh(s_ij/c),
and the backward multiplies ds by its derivative 1 − tanh² (the tanh recomputed from q·k, not saved).

The G query heads that share a key/value head are stacked as G·Tq rows of one matrix, so every product is one
batched BLAS call over (B, H_kv) and the key/value heads are never copied G times: their gradients,
dv_j = Σ_rows p_ij·dy_i and dk_j = Σ_rows ds_ij·q_i, sum over the G heads by the product itself. Backward:

    dv = pᵀ·dy,   dp = dy·vᵀ,   ds_ij = scale · p_ij · (dp_ij − Σ_k p_ik·dp_ik),   dq = ds·k,   dk = dsᵀ·q

From SPLIT_MACS multiply-adds of one-thread products (SmolLM2's 4 × 256 tokens) the batch is split (batch_split.py).
Shapes: q (B, Tq, H, D); k, v (B, Tk, H_kv, D); out, dy (B, Tq, H·D); scores, probs (B, H_kv, G·Tq, Tk).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
from numba import njit

from minitrain.autograd.kernels.attention_softmax import softmax_backward_numba, softmax_backward_reference, softmax_row
from minitrain.autograd.kernels.batch_split import each_slice
from minitrain.autograd.kernels.fastmath import FASTMATH
from minitrain.common.runtime import SINGLE_THREAD_MACS


# ------------------------------------------------------------------------------------------- the layouts
def stack_groups(x: np.ndarray, n_kv_head: int) -> np.ndarray:
    """(B, T, H, D) -> (B, H_kv, G·T, D): the G query heads of each key/value head as one block of rows."""
    batch, time, n_head, head_size = x.shape
    grouped = x.reshape(batch, time, n_kv_head, n_head // n_kv_head, head_size).transpose(0, 2, 3, 1, 4)
    return grouped.reshape(batch, n_kv_head, -1, head_size)


def unstack_groups(x: np.ndarray, time: int) -> np.ndarray:
    """(B, H_kv, G·T, D) -> (B, T, H·D), head h = kv head · G + g, ready for the output projection."""
    batch, n_kv_head, rows, head_size = x.shape
    grouped = x.reshape(batch, n_kv_head, rows // time, time, head_size).transpose(0, 3, 1, 2, 4)
    return grouped.reshape(batch, time, -1)


def _heads_first(x: np.ndarray) -> np.ndarray:
    """(B, T, H_kv, D) -> (B, H_kv, T, D)."""
    return x.transpose(0, 2, 1, 3)


def additive_mask(allowed: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """(B, Tq, Tk): 0 where allowed, −∞ where not; added to the scaled scores."""
    return np.where(allowed, 0.0, -np.inf).astype(dtype)


def _capped(scores: np.ndarray, scale: float, softcap: float) -> np.ndarray:
    """tanh(scale·s/c), the soft-capped scores over c."""
    return np.tanh(scores * (scale / softcap)).astype(scores.dtype)


def grouped_attention_forward(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, allowed: np.ndarray, scale: float | None = None,
    softcap: float | None = None, *, softmax: Callable,
) -> tuple[np.ndarray, np.ndarray]:
    """y = softmax(scale·q·kᵀ (soft-capped), allowed)·v per head -> out (B, Tq, H·D), probs (B, H_kv, G·Tq, Tk)."""
    n_kv_head, head_size = k.shape[2], q.shape[3]
    scale = 1.0 / np.sqrt(head_size) if scale is None else scale
    qs, keys, values = stack_groups(q, n_kv_head), np.ascontiguousarray(k.transpose(0, 2, 3, 1)), _heads_first(v)
    probs, y = np.empty((*qs.shape[:3], keys.shape[3]), dtype=q.dtype), np.empty_like(qs)  # (B, H_kv, G·Tq, ·)

    def part(s: slice) -> None:
        scores = np.matmul(qs[s], keys[s], out=probs[s])
        if softcap:
            scores[...] = softcap * _capped(scores, scale, softcap)
        p = softmax(scores, 1.0 if softcap else scale, additive_mask(allowed[s], q.dtype))
        if p is not scores:  # the NumPy softmax returns a new array; numba's works in place
            scores[...] = p
        np.matmul(scores, values[s], out=y[s])

    each_slice(part, len(qs), split_macs(qs, keys))
    return unstack_groups(y, q.shape[1]), probs


def grouped_attention_backward(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, probs: np.ndarray, dy: np.ndarray, scale: float | None = None,
    softcap: float | None = None, *, softmax_backward: Callable,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dq (B, Tq, H, D), dk, dv (B, Tk, H_kv, D)) from dy (B, Tq, H·D) and the saved probabilities."""
    batch, time_q, n_head, head_size = q.shape
    n_kv_head = k.shape[2]
    scale = 1.0 / np.sqrt(head_size) if scale is None else scale
    g = stack_groups(dy.reshape(batch, time_q, n_head, head_size), n_kv_head)  # (B, H_kv, G·Tq, D)
    qs, keys, values_t = stack_groups(q, n_kv_head), _heads_first(k), np.ascontiguousarray(v.transpose(0, 2, 3, 1))
    dq, dk, dv = np.empty_like(g), np.empty_like(keys), np.empty_like(keys)

    def part(s: slice) -> None:
        np.matmul(np.swapaxes(probs[s], -1, -2), g[s], out=dv[s])
        dscores = softmax_backward(probs[s], g[s] @ values_t[s], 1.0 if softcap else scale)
        if softcap:  # d(c·tanh(scale·s/c))/ds = scale·(1 − tanh²)
            t = _capped(qs[s] @ np.ascontiguousarray(k[s].transpose(0, 2, 3, 1)), scale, softcap)
            dscores *= scale * (1 - t * t)
        np.matmul(dscores, keys[s], out=dq[s])
        np.matmul(np.swapaxes(dscores, -1, -2), qs[s], out=dk[s])

    each_slice(part, len(qs), split_macs(qs, values_t))
    return unstack_groups(dq, time_q).reshape(q.shape), _heads_first(dk), _heads_first(dv)


def split_macs(qs: np.ndarray, keys: np.ndarray) -> int:
    """The batched (G·Tq, D)·(D, Tk) products' multiply-adds, or 0 (not split) when a block's is big enough for BLAS's
    threads: split or whole, each runs on one thread (functional's `one_thread_below`), the same bytes."""
    product = qs.shape[2] * qs.shape[3] * keys.shape[-1]
    return qs.shape[0] * qs.shape[1] * product if product < SINGLE_THREAD_MACS else 0


# ------------------------------------------------------------------------------------------- the softmax
def masked_softmax_forward_reference(scores: np.ndarray, scale: float, bias: np.ndarray) -> np.ndarray:
    """scores (B, H_kv, G·Tq, Tk), bias (B, Tq, Tk) additive -> probs; row r of a block is query r mod Tq."""
    batch, n_kv_head, rows, time_k = scores.shape
    time_q = bias.shape[1]
    logits = (scores * scale).reshape(batch, n_kv_head, rows // time_q, time_q, time_k) + bias[:, None, None]
    peak = logits.max(axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)  # a row with no allowed key: exp(−∞) = 0 everywhere
    e = np.exp(logits - peak)
    total = e.sum(axis=-1, keepdims=True)
    return (e / np.where(total > 0, total, 1)).astype(scores.dtype).reshape(scores.shape)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy", nogil=True)  # nogil: attention.py's batch slices
def _softmax_rows(scores, scale, bias):
    """In place: scores (B, H_kv, R, Tk) becomes probs; row r reads the mask row bias[b, r % Tq]."""
    n_batch, n_kv_head, n_rows, _ = scores.shape
    time_q = bias.shape[1]
    for b in range(n_batch):
        for h in range(n_kv_head):
            for r in range(n_rows):
                softmax_row(scores[b, h, r], scale, bias[b, r % time_q])


def masked_softmax_forward_numba(scores: np.ndarray, scale: float, bias: np.ndarray) -> np.ndarray:
    """Overwrites `scores` with the probabilities (the forward hands over its temporary)."""
    probs = np.ascontiguousarray(scores)
    _softmax_rows(probs, probs.dtype.type(scale), np.ascontiguousarray(bias, dtype=probs.dtype))
    return probs


# The two implementations: the same products, the softmax of each (functional.py calls them through `kernels`).
grouped_attention_forward_reference = partial(grouped_attention_forward, softmax=masked_softmax_forward_reference)
grouped_attention_backward_reference = partial(grouped_attention_backward, softmax_backward=softmax_backward_reference)
grouped_attention_forward_numba = partial(grouped_attention_forward, softmax=masked_softmax_forward_numba)
grouped_attention_backward_numba = partial(grouped_attention_backward, softmax_backward=softmax_backward_numba)
