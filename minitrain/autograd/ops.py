"""Ops over several tensors, or that select from one: concat, split, where, masked_fill.

Each records one tape node, like the methods of `Tensor` (see tensor.py for how the tape works); the backward
of a selection scatters the gradient back to where the values came from.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from minitrain.autograd.tensor import Tensor, unbroadcast


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """y = [x₀ | x₁ | …] along `axis`; each xᵢ gets its slice of g."""
    tensors = list(tensors)
    sizes = np.cumsum([t.shape[axis] for t in tensors])[:-1]

    def backward(g: np.ndarray) -> None:
        for t, piece in zip(tensors, np.split(g, sizes, axis=axis), strict=True):
            t._accumulate(piece)

    return Tensor._from_op(np.concatenate([t.data for t in tensors], axis=axis), tuple(tensors), backward)


def split(x: Tensor, sections: int | Sequence[int], axis: int = 0) -> tuple[Tensor, ...]:
    """Split along `axis` into `sections` equal parts (an int) or parts of the given sizes (a list)."""
    length = x.shape[axis]
    if isinstance(sections, int):
        if length % sections:
            raise ValueError(f"split: axis {axis} of shape {x.shape} does not divide into {sections} parts")
        sizes = [length // sections] * sections
    else:
        sizes = list(sections)
        if sum(sizes) != length:
            raise ValueError(f"split: sizes {sizes} do not add up to {length} (axis {axis} of shape {x.shape})")
    starts = np.cumsum([0, *sizes])
    return tuple(_slice_along(x, axis, int(s), int(s + n)) for s, n in zip(starts, sizes, strict=False))


def _slice_along(x: Tensor, axis: int, start: int, stop: int) -> Tensor:
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, stop)
    index = tuple(index)

    def backward(g: np.ndarray) -> None:
        dx = np.zeros_like(x.data)
        dx[index] = g
        x._accumulate(dx)

    return Tensor._from_op(x.data[index], (x,), backward)


def where(condition: np.ndarray, a: Tensor | float, b: Tensor | float) -> Tensor:
    """y = a where condition else b (condition is a boolean array, broadcast with a and b)."""
    condition = np.asarray(condition, dtype=bool)
    dtype = next((t.data.dtype for t in (a, b) if isinstance(t, Tensor)), np.dtype(np.float32))
    a = a if isinstance(a, Tensor) else Tensor(a, dtype=dtype)
    b = b if isinstance(b, Tensor) else Tensor(b, dtype=dtype)

    def backward(g: np.ndarray) -> None:
        a._accumulate(unbroadcast(np.where(condition, g, 0).astype(g.dtype), a.shape))
        b._accumulate(unbroadcast(np.where(condition, 0, g).astype(g.dtype), b.shape))

    return Tensor._from_op(np.where(condition, a.data, b.data), (a, b), backward)


def masked_fill(x: Tensor, mask: np.ndarray, value: float) -> Tensor:
    """y = value where mask else x."""
    return where(mask, Tensor(np.full((), value, dtype=x.dtype)), x)
