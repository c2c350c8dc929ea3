"""The merge methods, one entry each: `merge_method` in a merge config names one (minitrain/merging/spec.py).

Each entry merges one tensor: `(spec, name, base, tensors, entries) -> merged`, where `base` is base_model's
tensor (None for linear without base_model), `tensors` the other models' in the config's order and `entries`
their ModelEntry (weight, density). The math is in each method's own file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from minitrain.merging.dare import dare_linear, dare_ties
from minitrain.merging.linear import linear, task_arithmetic
from minitrain.merging.slerp import slerp
from minitrain.merging.spec import METHOD_NAMES, MergeSpec, ModelEntry
from minitrain.merging.ties import ties

TensorMerge = Callable[[MergeSpec, str, np.ndarray | None, Sequence[np.ndarray], Sequence[ModelEntry]], np.ndarray]


def _weights(spec: MergeSpec, entries: Sequence[ModelEntry]) -> list[float]:
    return [spec.value(e, "weight", 1.0) for e in entries]


def _densities(spec: MergeSpec, entries: Sequence[ModelEntry]) -> list[float]:
    return [spec.value(e, "density", 1.0) for e in entries]


def _lambda(spec: MergeSpec) -> float:
    return 1.0 if spec.parameters.lambda_ is None else spec.parameters.lambda_


def _normalize(spec: MergeSpec, default: bool) -> bool:
    return default if spec.parameters.normalize is None else spec.parameters.normalize


def _linear(spec, name, base, tensors, entries):
    return linear(tensors, _weights(spec, entries), _normalize(spec, True))


def _task_arithmetic(spec, name, base, tensors, entries):
    return task_arithmetic(base, tensors, _weights(spec, entries), _lambda(spec), _normalize(spec, False))


def _ties(spec, name, base, tensors, entries):
    return ties(base, tensors, _weights(spec, entries), _densities(spec, entries), _lambda(spec))


def _dare_linear(spec, name, base, tensors, entries):
    return dare_linear(base, tensors, _weights(spec, entries), _densities(spec, entries), spec.seed, name,
                       _lambda(spec), _normalize(spec, False))


def _dare_ties(spec, name, base, tensors, entries):
    return dare_ties(base, tensors, _weights(spec, entries), _densities(spec, entries), spec.seed, name,
                     _lambda(spec))


def _slerp(spec, name, base, tensors, entries):
    return slerp(spec.t_for(name), base, tensors[0])


METHODS: dict[str, TensorMerge] = {
    "linear": _linear,
    "task_arithmetic": _task_arithmetic,
    "ties": _ties,
    "dare_linear": _dare_linear,
    "dare_ties": _dare_ties,
    "slerp": _slerp,
}
assert tuple(METHODS) == METHOD_NAMES  # spec.py's Literal and this table name the same methods
