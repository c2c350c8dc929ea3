"""What the numba kernels share: the fast-math flags, an exp built from multiply-adds, a row max.

FASTMATH lets LLVM reorder sums, fuse multiply-adds and use a reciprocal for division (so results may differ
from NumPy's in the last bits). It leaves out the flags that assume no NaN or infinity
("nnan", "ninf"): -inf is a real value in the masked softmax, and a NaN in a gradient must stay a NaN so the
training loop can notice it.

`fast_exp(x)`: eˣ. For float32, `exp_f32` computes it with multiply-adds only (Cephes' `expf` scheme):

    n = round(x / ln 2),   r = x − n·ln 2  ∈ [−ln2/2, ln2/2]          (ln 2 split in two parts for exactness)
    eʳ ≈ 1 + r + r²·P(r)                                           (P of degree 5, Cephes' coefficients)
    eˣ = 2ⁿ · eʳ,  where 2ⁿ is built directly from its IEEE-754 bits: (n + 127) << 23

Relative error ≤ 3e-7 (2-3 float32 ulps) on [−87.3, 88]; below −87.3 it returns 0 (eˣ is then under float32's
smallest normal number), above 88 it is clamped. float64 arguments (gradient checks run in float64) get `np.exp`:
`fast_exp` is one name with an implementation per type, chosen when numba compiles the caller.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}

_f32 = np.float32
_LOG2E, _LN2_HI, _LN2_LO = _f32(1.44269504088896341), _f32(0.693359375), _f32(-2.12194440e-4)
_P0, _P1, _P2 = _f32(1.9875691500e-4), _f32(1.3981999507e-3), _f32(8.3334519073e-3)
_P3, _P4, _P5 = _f32(4.1665795894e-2), _f32(1.6666665459e-1), _f32(5.0000001201e-1)
EXP_LOW, EXP_HIGH = _f32(-87.33654), _f32(88.0)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy", inline="always")
def exp_f32(x: float) -> float:
    """eˣ for a float32 x, from multiply-adds and one bit pattern (see the module docstring)."""
    if x < EXP_LOW:
        return _f32(0.0)
    x = min(x, EXP_HIGH)
    n = np.floor(x * _LOG2E + _f32(0.5))
    r = x - n * _LN2_HI - n * _LN2_LO
    p = (((((_P0 * r + _P1) * r + _P2) * r + _P3) * r + _P4) * r + _P5) * (r * r) + r + _f32(1.0)
    return p * np.int32((np.int32(n) + 127) << 23).view(np.float32)


def fast_exp(x: float) -> float:
    """eˣ: `exp_f32` for float32, `np.exp` otherwise (this body runs only without the JIT)."""
    return exp_f32(x) if isinstance(x, np.float32) else np.exp(x)


@overload(fast_exp, inline="always")
def _fast_exp_by_type(x):
    return (lambda x: exp_f32(x)) if x == types.float32 else (lambda x: np.exp(x))


@njit(cache=True, fastmath=FASTMATH, error_model="numpy", inline="always")
def row_max(x: np.ndarray) -> float:
    """max(x) of a 1-D array."""
    # Eight running maxima: a single one is a chain of dependent compares, one element per ~4 cycles, and LLVM
    # does not vectorise a float max reduction unless it may assume there are no NaNs.
    n = x.shape[0]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = x[0]
    for j in range(0, n - 7, 8):
        m0, m1, m2, m3 = max(m0, x[j]), max(m1, x[j + 1]), max(m2, x[j + 2]), max(m3, x[j + 3])
        m4, m5, m6, m7 = max(m4, x[j + 4]), max(m5, x[j + 5]), max(m6, x[j + 6]), max(m7, x[j + 7])
    peak = max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))
    for j in range(n - n % 8, n):
        peak = max(peak, x[j])
    return peak
