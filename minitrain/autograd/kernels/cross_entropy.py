"""Fused softmax + cross-entropy over the last axis, with a row mask: numba kernel beside its NumPy reference.

For one row of logits z (V classes), target t:
    lse = log Σ_j exp(z_j)          (computed as max + log Σ exp(z − max), so it never overflows)
    nll = lse − z_t                  (= −log softmax(z)_t)
Backward, given dnll for the row:
    dz_j = dnll · (exp(z_j − lse) − [j = t])
Rows where mask is False are skipped: their nll is 0 and their gradient 0. Only lse (one number per row) is kept
for the backward pass; the probabilities are recomputed from the logits. The backward also takes a block of columns
of the logits with targets counted from the block's first column: a target outside [0, V) subtracts nothing (the
chunked head loss, functional.linear_cross_entropy, walks the vocabulary so).
Shapes: logits (N, V); targets (N,) int; mask (N,) bool; nll, lse, dnll (N,).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minitrain.autograd.kernels.fastmath import FASTMATH, fast_exp, row_max


def cross_entropy_forward_reference(
    logits: np.ndarray, targets: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    peak = logits.max(axis=-1, keepdims=True)
    lse = (peak + np.log(np.exp(logits - peak).sum(axis=-1, keepdims=True)))[:, 0]
    nll = lse - logits[np.arange(len(targets)), targets]
    return np.where(mask, nll, 0).astype(logits.dtype), np.where(mask, lse, 0).astype(logits.dtype)


def cross_entropy_backward_reference(
    logits: np.ndarray, targets: np.ndarray, lse: np.ndarray, dnll: np.ndarray
) -> np.ndarray:
    live = dnll != 0  # rows without a gradient are skipped, as the kernel skips them: exp(z − lse) may overflow there
    dlogits = np.zeros_like(logits)
    dlogits[live] = np.exp(logits[live] - lse[live, None])
    inside = np.flatnonzero(live & (targets >= 0) & (targets < logits.shape[1]))
    dlogits[inside, targets[inside]] -= 1
    return (dlogits * dnll[:, None]).astype(logits.dtype)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _forward_rows(logits, targets, mask, nll, lse):
    n, v = logits.shape
    for i in range(n):
        if not mask[i]:
            nll[i] = 0.0
            lse[i] = 0.0
            continue
        z = logits[i]
        peak = row_max(z)
        s = np.float32(0.0)  # float32 sum for float32 logits (numba widens it for float64)
        for j in range(v):
            s += fast_exp(z[j] - peak)
        row_lse = peak + np.log(s)
        lse[i] = row_lse
        nll[i] = row_lse - z[targets[i]]


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _backward_rows(logits, targets, lse, dnll, dlogits):
    n, v = logits.shape
    for i in range(n):
        g = dnll[i]
        if g == 0.0:
            dlogits[i, :] = 0.0
            continue
        for j in range(v):
            dlogits[i, j] = g * fast_exp(logits[i, j] - lse[i])
        if 0 <= targets[i] < v:
            dlogits[i, targets[i]] -= g


def cross_entropy_forward_numba(
    logits: np.ndarray, targets: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    logits = np.ascontiguousarray(logits)
    nll = np.empty(logits.shape[0], dtype=logits.dtype)
    lse = np.empty(logits.shape[0], dtype=logits.dtype)
    _forward_rows(logits, targets, mask, nll, lse)
    return nll, lse


def cross_entropy_backward_numba(
    logits: np.ndarray, targets: np.ndarray, lse: np.ndarray, dnll: np.ndarray
) -> np.ndarray:
    dlogits = np.empty_like(logits)
    _backward_rows(np.ascontiguousarray(logits), targets, lse, dnll, dlogits)
    return dlogits
