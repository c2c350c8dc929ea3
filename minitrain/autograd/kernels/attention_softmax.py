"""The attention softmax, one row at a time: what both attention kernels share (attention.py, GPT-2's causal
one on a fused qkv; grouped_attention.py, Llama's grouped-query one under any mask). They differ only in which
mask row a row of scores reads; the softmax of that row, and its backward, are the same:

    forward (in place):  p_j = exp(scale·s_j + m_j − M) / Σ_k exp(scale·s_k + m_k − M)
                         m: the additive mask row (0 allowed, −∞ not), M = max_j (scale·s_j + m_j)
                         a row with no allowed key (M = −∞) becomes all zeros
    backward:            ds_j = scale · p_j · (dp_j − Σ_k p_k·dp_k)

Scalars start as np.float32 constants; for float64 data numba widens them to float64 (gradcheck), for float32
data nothing is widened, so every loop runs in float32 SIMD.
Shapes: probs, dprobs (B, heads, rows, T_k), a row per query (or per query of each head of a group).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minitrain.autograd.kernels.fastmath import FASTMATH, fast_exp, row_max


@njit(cache=True, fastmath=FASTMATH, error_model="numpy", inline="always")
def softmax_row(p: np.ndarray, scale: float, mask_row: np.ndarray) -> None:
    """In place: the scores row p (T_k,) becomes its probabilities under the additive mask row (T_k,)."""
    time_k = p.shape[0]
    for j in range(time_k):
        p[j] = p[j] * scale + mask_row[j]
    peak = row_max(p)
    if peak == -np.inf:  # no key allowed: the row stays all zeros
        p[:] = 0.0
        return
    total = np.float32(0.0)
    for j in range(time_k):
        e = fast_exp(p[j] - peak)
        p[j] = e
        total += e
    inv = np.float32(1.0) / total
    for j in range(time_k):
        p[j] *= inv


def softmax_backward_reference(probs: np.ndarray, dprobs: np.ndarray, scale: float) -> np.ndarray:
    """ds = scale · p · (dp − Σ p·dp) over the last axis, in NumPy."""
    inner = (probs * dprobs).sum(axis=-1, keepdims=True)
    return (scale * probs * (dprobs - inner)).astype(probs.dtype)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy", nogil=True)  # nogil: batch slices run side by side
def _softmax_backward_rows(probs, dprobs, scale):
    """In place: dprobs becomes dscores."""
    n_batch, n_head, n_rows, time_k = probs.shape
    for b in range(n_batch):
        for h in range(n_head):
            for r in range(n_rows):
                p, dp = probs[b, h, r], dprobs[b, h, r]
                inner = np.float32(0.0)
                for j in range(time_k):
                    inner += p[j] * dp[j]
                for j in range(time_k):
                    dp[j] = scale * p[j] * (dp[j] - inner)


def softmax_backward_numba(probs: np.ndarray, dprobs: np.ndarray, scale: float) -> np.ndarray:
    """Overwrites `dprobs` with the score gradient (the attention backward hands over its temporary)."""
    dscores = np.ascontiguousarray(dprobs, dtype=probs.dtype)
    _softmax_backward_rows(probs, dscores, probs.dtype.type(scale))
    return dscores
