"""Causal attention softmax, forward and backward: numba kernel beside its NumPy reference.

For batch b, head h, query position i, over key positions j:
    allowed(i, j) = j ≤ i  and  key_mask[b, j]            (causal, and never a padding key)
    p_ij = exp(scale·s_ij − m_i) / Σ_allowed exp(scale·s_ik − m_i)   for allowed j, else 0
where m_i is the row maximum (for stability). A row with no allowed key (impossible once position 0 is a real
token) gets all zeros. Backward, given dp:
    ds_ij = scale · p_ij · (dp_ij − Σ_k p_ik·dp_ik)
Shapes: scores, probs, dprobs (B, H, T, T); key_mask (B, T) bool.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def causal_softmax_forward_reference(scores: np.ndarray, scale: float, key_mask: np.ndarray) -> np.ndarray:
    t = scores.shape[-1]
    allowed = np.tril(np.ones((t, t), dtype=bool))[None, None] & key_mask[:, None, None, :]
    logits = np.where(allowed, scores * scale, -np.inf)
    peak = logits.max(axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    e = np.where(allowed, np.exp(logits - peak), 0)
    total = e.sum(axis=-1, keepdims=True)
    return (e / np.where(total > 0, total, 1)).astype(scores.dtype)


def causal_softmax_backward_reference(probs: np.ndarray, dprobs: np.ndarray, scale: float) -> np.ndarray:
    inner = (probs * dprobs).sum(axis=-1, keepdims=True)
    return (scale * probs * (dprobs - inner)).astype(probs.dtype)


@njit(cache=True, error_model="numpy")
def _forward_rows(scores, scale, key_mask, probs):
    n_batch, n_head, t, _ = scores.shape
    for b in range(n_batch):
        for h in range(n_head):
            for i in range(t):
                peak = -np.inf
                for j in range(i + 1):
                    if key_mask[b, j]:
                        peak = max(peak, scores[b, h, i, j] * scale)
                total = 0.0
                for j in range(t):
                    if j <= i and key_mask[b, j]:
                        e = np.exp(scores[b, h, i, j] * scale - peak)
                        probs[b, h, i, j] = e
                        total += e
                    else:
                        probs[b, h, i, j] = 0.0
                if total > 0.0:
                    inv = 1.0 / total
                    for j in range(i + 1):
                        probs[b, h, i, j] *= inv


@njit(cache=True, error_model="numpy")
def _backward_rows(probs, dprobs, scale, dscores):
    n_batch, n_head, t, _ = probs.shape
    for b in range(n_batch):
        for h in range(n_head):
            for i in range(t):
                inner = 0.0
                for j in range(i + 1):
                    inner += probs[b, h, i, j] * dprobs[b, h, i, j]
                for j in range(t):
                    dscores[b, h, i, j] = scale * probs[b, h, i, j] * (dprobs[b, h, i, j] - inner)


def causal_softmax_forward_numba(scores: np.ndarray, scale: float, key_mask: np.ndarray) -> np.ndarray:
    scores = np.ascontiguousarray(scores)
    probs = np.empty_like(scores)
    _forward_rows(scores, scores.dtype.type(scale), key_mask, probs)
    return probs


def causal_softmax_backward_numba(probs: np.ndarray, dprobs: np.ndarray, scale: float) -> np.ndarray:
    dscores = np.empty_like(probs)
    _backward_rows(probs, np.ascontiguousarray(dprobs), probs.dtype.type(scale), dscores)
    return dscores
