"""SiLU (swish), y = x·σ(x): forward and backward, numba kernel beside its NumPy reference.

    σ(x) = 1/(1 + e^(−x)),   y = x·σ(x),   dy/dx = σ(x)·(1 + x·(1 − σ(x)))

σ is computed from e^(−|x|) ∈ (0, 1], which never overflows: σ(x) = 1/(1 + e) for x ≥ 0 and e/(1 + e) below.
The Llama MLP applies it to the gate projection, (B, T, d_ff): the widest activation of the model, where the
NumPy version's temporaries (five passes over the array) cost more than the fused loop.
Shapes: any; x, dy, y, dx all of one shape.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from minitrain.autograd.functional import stable_sigmoid
from minitrain.autograd.kernels.fastmath import FASTMATH, fast_exp


def silu_forward_reference(x: np.ndarray) -> np.ndarray:
    return x * stable_sigmoid(x)


def silu_backward_reference(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    s = stable_sigmoid(x)
    return (dy * s * (1 + x * (1 - s))).astype(x.dtype)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _forward(x, y):
    one = np.float32(1.0)
    for i in range(x.size):
        v = x[i]
        e = fast_exp(-abs(v))
        s = one / (one + e) if v >= 0 else e / (one + e)
        y[i] = v * s


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _backward(x, dy, dx):
    one = np.float32(1.0)
    for i in range(x.size):
        v = x[i]
        e = fast_exp(-abs(v))
        s = one / (one + e) if v >= 0 else e / (one + e)
        dx[i] = dy[i] * s * (one + v * (one - s))


def silu_forward_numba(x: np.ndarray) -> np.ndarray:
    flat = np.ascontiguousarray(x).reshape(-1)
    y = np.empty_like(flat)
    _forward(flat, y)
    return y.reshape(x.shape)


def silu_backward_numba(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    flat = np.ascontiguousarray(x).reshape(-1)
    dx = np.empty_like(flat)
    _backward(flat, np.ascontiguousarray(dy, dtype=x.dtype).reshape(-1), dx)
    return dx.reshape(x.shape)
