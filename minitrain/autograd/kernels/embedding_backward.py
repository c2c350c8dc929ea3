"""Embedding backward (scatter-add): numba kernel beside its NumPy reference.

Forward is a gather, y[n] = W[idx[n]]. Backward adds each row of dy into the row of dW it came from:
    dW[v] = Σ_{n : idx[n] = v} dy[n]
A token that occurs several times in the batch collects all its contributions (hence add, not assign).
Shapes: idx (N,) int; dy (N, D); dW (V, D).
"""

from __future__ import annotations

import numpy as np
from numba import njit


def embedding_backward_reference(idx: np.ndarray, dy: np.ndarray, vocab_size: int) -> np.ndarray:
    dw = np.zeros((vocab_size, dy.shape[1]), dtype=dy.dtype)
    np.add.at(dw, idx, dy)
    return dw


@njit(cache=True)
def _scatter_add(idx, dy, dw):
    for n in range(idx.shape[0]):
        row = idx[n]
        for d in range(dy.shape[1]):
            dw[row, d] += dy[n, d]


def embedding_backward_numba(idx: np.ndarray, dy: np.ndarray, vocab_size: int) -> np.ndarray:
    dw = np.zeros((vocab_size, dy.shape[1]), dtype=dy.dtype)
    _scatter_add(np.ascontiguousarray(idx), np.ascontiguousarray(dy), dw)
    return dw
