"""LayerNorm over the last axis: forward and backward, numba kernel beside its NumPy reference.

For one row x of C features (all rows independent), with w, b of shape (C,):
    μ = mean(x),  rstd = 1/√(var(x) + eps),  x̂ = (x − μ)·rstd,  y = x̂·w + b
Backward, with dx̂ = dy·w:
    dx = rstd · (dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)),   dw = Σ_rows dy·x̂,   db = Σ_rows dy
Only μ and rstd (one number each per row) are cached for the backward pass; x̂ is recomputed.
Shapes: x, dy (N, C); mean, rstd (N,).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minitrain.autograd.kernels.fastmath import FASTMATH


def layernorm_forward_reference(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean = x.mean(axis=-1)
    centred = x - mean[:, None]
    rstd = 1.0 / np.sqrt((centred * centred).mean(axis=-1) + eps)
    return centred * rstd[:, None] * w + b, mean, rstd.astype(x.dtype)


def layernorm_backward_reference(
    dy: np.ndarray, x: np.ndarray, w: np.ndarray, mean: np.ndarray, rstd: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xhat = (x - mean[:, None]) * rstd[:, None]
    dxhat = dy * w
    dx = rstd[:, None] * (
        dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)
    )
    return dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)


# Everything stays in the data's precision: the accumulators start as float32 zeros (numba widens them to
# float64 for float64 rows), and eps and 1/C come in as that dtype. float32 sums of 64-256 terms are exact
# enough, and keeping every operand float32 lets LLVM use full-width float32 SIMD.
@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _forward_rows(x, w, b, eps, inv_c, y, mean, rstd):
    n, c = x.shape
    for i in range(n):
        s = np.float32(0.0)
        for j in range(c):
            s += x[i, j]
        m = s * inv_c
        s2 = np.float32(0.0)
        for j in range(c):
            d = x[i, j] - m
            s2 += d * d
        r = np.float32(1.0) / np.sqrt(s2 * inv_c + eps)
        for j in range(c):
            y[i, j] = (x[i, j] - m) * r * w[j] + b[j]
        mean[i] = m
        rstd[i] = r


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _backward_rows(dy, x, w, mean, rstd, inv_c, dx, dw, db):
    n, c = x.shape
    for i in range(n):
        m, r = mean[i], rstd[i]
        sum_dxhat = np.float32(0.0)
        sum_dxhat_xhat = np.float32(0.0)
        for j in range(c):
            xhat = (x[i, j] - m) * r
            dxhat = dy[i, j] * w[j]
            sum_dxhat += dxhat
            sum_dxhat_xhat += dxhat * xhat
            dw[j] += dy[i, j] * xhat
            db[j] += dy[i, j]
        mean_dxhat = sum_dxhat * inv_c
        mean_dxhat_xhat = sum_dxhat_xhat * inv_c
        for j in range(c):
            xhat = (x[i, j] - m) * r
            dx[i, j] = r * (dy[i, j] * w[j] - mean_dxhat - xhat * mean_dxhat_xhat)


def layernorm_forward_numba(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.ascontiguousarray(x)
    y = np.empty_like(x)
    mean = np.empty(x.shape[0], dtype=x.dtype)
    rstd = np.empty(x.shape[0], dtype=x.dtype)
    scalar = x.dtype.type
    _forward_rows(x, w, b, scalar(eps), scalar(1.0 / x.shape[1]), y, mean, rstd)
    return y, mean, rstd


def layernorm_backward_numba(
    dy: np.ndarray, x: np.ndarray, w: np.ndarray, mean: np.ndarray, rstd: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    dy = np.ascontiguousarray(dy)
    dx = np.empty_like(x)
    dw = np.zeros_like(w)
    db = np.zeros_like(w)
    _backward_rows(dy, x, w, mean, rstd, x.dtype.type(1.0 / x.shape[1]), dx, dw, db)
    return dx, dw, db
