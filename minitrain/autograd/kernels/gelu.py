"""GELU, tanh approximation (as GPT-2): numba kernel beside its NumPy reference.

    u  = √(2/π) · (x + 0.044715·x³)
    y  = ½ · x · (1 + tanh u)
    dy/dx = ½ · (1 + tanh u) + ½ · x · (1 − tanh² u) · √(2/π) · (1 + 3·0.044715·x²)

An optional bias is added first, gelu(x + b), so a linear layer's bias add and its activation are one pass
(`F.linear(..., activation="gelu")`). The backward pass recomputes tanh u from x rather than saving dy/dx in the
forward pass. Shapes: x, dy (..., C), bias (C,); the kernels work on rows of C. Outputs are new arrays.

The numba kernels compute tanh with `tanh_f32` below, a rational minimax approximation p(x)/q(x) (the
13/6-degree one Eigen uses for float), accurate to about 3e-7 absolute, built only from multiply-adds and one
divide. Beyond |x| ≈ 7.9, tanh rounds to ±1 in float32, and that is what it returns. float64 inputs (gradcheck)
take the exact NumPy path.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from minitrain.autograd.kernels.fastmath import FASTMATH

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
CUBIC = 0.044715
_C1, _C2, _C3 = np.float32(SQRT_2_OVER_PI), np.float32(CUBIC), np.float32(3.0 * CUBIC)
_HALF, _ONE = np.float32(0.5), np.float32(1.0)


def gelu_forward_reference(x: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """y = gelu(x + bias)."""
    if bias is not None:
        x = x + bias
    # x*x*x, not x**3: NumPy's float32 power is several times slower than two multiplies.
    return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + CUBIC * (x * x * x))))


def gelu_backward_reference(x: np.ndarray, dy: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """dx = dy · gelu'(x + bias)."""
    if bias is not None:
        x = x + bias
    t = np.tanh(SQRT_2_OVER_PI * (x + CUBIC * (x * x * x)))
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * CUBIC * x * x))


_f32 = np.float32
_CLAMP = _f32(7.90531110763549805)
_A1, _A3, _A5 = _f32(4.89352455891786e-03), _f32(6.37261928875436e-04), _f32(1.48572235717979e-05)
_A7, _A9 = _f32(5.12229709037114e-08), _f32(-8.60467152213735e-11)
_A11, _A13 = _f32(2.00018790482477e-13), _f32(-2.76076847742355e-16)
_B0, _B2 = _f32(4.89352518554385e-03), _f32(2.26843463243900e-03)
_B4, _B6 = _f32(1.18534705686654e-04), _f32(1.19825839466702e-06)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy", inline="always")
def tanh_f32(x: float) -> float:
    if x >= _CLAMP:  # exactly ±1, so 1 − tanh² is exactly 0 in the derivative
        return _ONE
    if x <= -_CLAMP:
        return -_ONE
    x2 = x * x
    p = ((((((x2 * _A13 + _A11) * x2 + _A9) * x2 + _A7) * x2 + _A5) * x2 + _A3) * x2 + _A1) * x
    q = ((x2 * _B6 + _B4) * x2 + _B2) * x2 + _B0
    return p / q


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _gelu_forward_f32(x: np.ndarray, bias: np.ndarray, y: np.ndarray) -> None:
    n, c = x.shape
    for i in range(n):
        for j in range(c):
            v = x[i, j] + bias[j]
            y[i, j] = _HALF * v * (_ONE + tanh_f32(_C1 * (v + _C2 * v * v * v)))


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _gelu_backward_f32(x: np.ndarray, bias: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> None:
    n, c = x.shape
    for i in range(n):
        for j in range(c):
            v = x[i, j] + bias[j]
            t = tanh_f32(_C1 * (v + _C2 * v * v * v))
            dx[i, j] = dy[i, j] * (_HALF * (_ONE + t) + _HALF * v * (_ONE - t * t) * _C1 * (_ONE + _C3 * v * v))


def _rows(x: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """x as contiguous float32 rows of C, and the bias (zeros when there is none)."""
    c = x.shape[-1]
    rows = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, c)
    return rows, np.zeros(c, np.float32) if bias is None else np.ascontiguousarray(bias, dtype=np.float32)


def gelu_forward_numba(x: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    if x.dtype != np.float32:  # the fast tanh is a float32 approximation; float64 takes the exact path
        return gelu_forward_reference(x, bias)
    rows, b = _rows(x, bias)
    y = np.empty_like(rows)
    _gelu_forward_f32(rows, b, y)
    return y.reshape(x.shape)


def gelu_backward_numba(x: np.ndarray, dy: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    if x.dtype != np.float32:
        return gelu_backward_reference(x, dy, bias)
    rows, b = _rows(x, bias)
    dx = np.empty_like(rows)
    _gelu_backward_f32(rows, b, np.ascontiguousarray(dy, dtype=np.float32).reshape(rows.shape), dx)
    return dx.reshape(x.shape)
