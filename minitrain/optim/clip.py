"""Gradient clipping: by global norm (PyTorch's rule) and by value.

All gradients together form one long vector g = (g_1, ..., g_n) over every parameter. Its norm

    ‖g‖ = sqrt(Σ_i (g_i · g_i).sum())

is computed in float64 (the sum of ~10⁵ float32 squares loses digits when accumulated in float32).
Clipping by norm rescales the whole vector, keeping its direction, when it is longer than `max_norm`:

    coef = max_norm / (‖g‖ + 1e-6);   if coef < 1:  g ← coef · g

so after clipping ‖g‖ ≤ max_norm. The norm *before* clipping is returned: it is what the training log
records as `grad_norm`. Called between `loss.backward()` and `optimizer.step()`.

Both functions accept a `ParameterBuffer` (one pass over its flat gradient) or parameters: tensors or
`(name, tensor)` pairs as `model.named_parameters()` gives them; parameters without a gradient are skipped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from minitrain.autograd import kernels
from minitrain.autograd.parameters import ParameterBuffer

Params = ParameterBuffer | Iterable[Any]


def _grads(params: Params) -> list[np.ndarray]:
    """The gradient arrays to clip, in place: the flat one of a buffer, or each parameter's `.grad`."""
    if isinstance(params, ParameterBuffer):
        return [params.grad]
    tensors = (item[1] if isinstance(item, tuple) else item for item in params)
    return [t.grad for t in tensors if t.grad is not None]


def global_grad_norm(grads: Iterable[np.ndarray]) -> float:
    """sqrt(Σ (g·g).sum()) over all arrays, squared and summed in float64 (kernels/grad_norm.py)."""
    return math.sqrt(sum(kernels.active.sum_of_squares(g) for g in grads))


def clip_grad_norm_(params: Params, max_norm: float) -> float:
    """Rescale all gradients in place so their global norm is at most `max_norm`; return the norm before.

    A non-finite norm (NaN/inf gradients) is returned as is and the gradients are left untouched: the
    caller decides (the training loop halts on it).
    """
    if max_norm <= 0:
        raise ValueError(f"clip_grad_norm_: max_norm must be > 0, got {max_norm}")
    grads = _grads(params)
    norm = global_grad_norm(grads)
    coef = max_norm / (norm + 1e-6)
    if math.isfinite(norm) and coef < 1.0:
        for g in grads:
            g *= coef
    return norm


def clip_grad_value_(params: Params, clip_value: float) -> None:
    """Clamp every gradient element to [-clip_value, clip_value], in place."""
    if clip_value <= 0:
        raise ValueError(f"clip_grad_value_: clip_value must be > 0, got {clip_value}")
    for g in _grads(params):
        np.clip(g, -clip_value, clip_value, out=g)
