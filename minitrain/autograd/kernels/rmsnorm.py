"""RMSNorm over the last axis: forward and backward, numba kernel beside its NumPy reference.

For one row x of C features (all rows independent), with w of shape (C,):
    rstd = 1/√(mean(x²) + eps),   x̂ = x·rstd,   y = x̂·w
Backward, with dx̂ = dy·w:
    dx = rstd · (dx̂ − x̂·mean(dx̂·x̂)),   dw = Σ_rows dy·x̂
(LayerNorm without the centring: no mean is subtracted, so no mean(dx̂) term either.) Only rstd, one number per
row, is kept for the backward pass; x̂ is recomputed. The product is taken in the order x·rstd, then ·w, as
transformers' LlamaRMSNorm does.
Shapes: x, dy (N, C); rstd (N,).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minitrain.autograd.kernels.fastmath import FASTMATH


def rmsnorm_forward_reference(x: np.ndarray, w: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    rstd = (1.0 / np.sqrt((x * x).mean(axis=-1) + eps)).astype(x.dtype)
    return (x * rstd[:, None]) * w, rstd


def rmsnorm_backward_reference(
    dy: np.ndarray, x: np.ndarray, w: np.ndarray, rstd: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    xhat = x * rstd[:, None]
    dxhat = dy * w
    dx = rstd[:, None] * (dxhat - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return dx.astype(x.dtype), (dy * xhat).sum(axis=0).astype(x.dtype)


# As in layernorm.py: accumulators start as float32 zeros and numba widens them for float64 rows, so float32
# data stays in float32 SIMD.
@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _forward_rows(x, w, eps, inv_c, y, rstd):
    n, c = x.shape
    for i in range(n):
        s2 = np.float32(0.0)
        for j in range(c):
            s2 += x[i, j] * x[i, j]
        r = np.float32(1.0) / np.sqrt(s2 * inv_c + eps)
        for j in range(c):
            y[i, j] = (x[i, j] * r) * w[j]
        rstd[i] = r


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _backward_rows(dy, x, w, rstd, inv_c, dx, dw):
    n, c = x.shape
    for i in range(n):
        r = rstd[i]
        sum_dxhat_xhat = np.float32(0.0)
        for j in range(c):
            xhat = x[i, j] * r
            sum_dxhat_xhat += dy[i, j] * w[j] * xhat
            dw[j] += dy[i, j] * xhat
        mean_dxhat_xhat = sum_dxhat_xhat * inv_c
        for j in range(c):
            dx[i, j] = r * (dy[i, j] * w[j] - x[i, j] * r * mean_dxhat_xhat)


def rmsnorm_forward_numba(x: np.ndarray, w: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    x = np.ascontiguousarray(x)
    y = np.empty_like(x)
    rstd = np.empty(x.shape[0], dtype=x.dtype)
    scalar = x.dtype.type
    _forward_rows(x, np.ascontiguousarray(w, dtype=x.dtype), scalar(eps), scalar(1.0 / x.shape[1]), y, rstd)
    return y, rstd


def rmsnorm_backward_numba(
    dy: np.ndarray, x: np.ndarray, w: np.ndarray, rstd: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    dy = np.ascontiguousarray(dy, dtype=x.dtype)
    dx = np.empty_like(x)
    dw = np.zeros_like(w)
    _backward_rows(dy, x, w, rstd, x.dtype.type(1.0 / x.shape[1]), dx, dw)
    return dx, dw
