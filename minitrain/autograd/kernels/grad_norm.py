"""Sum of squares of a float array, accumulated in float64: the inside of the global gradient norm.

    s = Σ_i x_i²          (clip.global_grad_norm takes √ of the total over all gradient arrays)

float32 gradients are squared and summed in float64: a float32 running sum over ~10⁵ terms would lose digits.
The NumPy reference makes a float64 copy of the whole array first; the numba loop converts one element at a
time. fastmath lets LLVM reorder the sum, so the result differs from the reference only in the last bits of a
float64.
Shapes: any; both work on the flattened array.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def sum_of_squares_reference(x: np.ndarray) -> float:
    return float(np.square(x, dtype=np.float64).sum())


@njit(cache=True, fastmath=True)
def _sum_of_squares(x: np.ndarray) -> float:
    total = 0.0
    for i in range(x.size):
        v = np.float64(x[i])
        total += v * v
    return total


def sum_of_squares_numba(x: np.ndarray) -> float:
    return float(_sum_of_squares(np.ascontiguousarray(x).reshape(-1)))
