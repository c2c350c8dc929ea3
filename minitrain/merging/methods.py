"""The merge methods, one `MergeMethod` record each: `merge_method` in a merge config names one, and the spec's
choices and checks (minitrain/merging/spec.py) read the record.

A record's `fn` merges one tensor: `(spec, name, base, tensors, entries) -> merged`, where `spec` is the MergeSpec
(spec.py, which reads these records, so it is not imported here), `base` base_model's tensor (None for a method
that needs none), `tensors` the other models' in the config's order and `entries` their ModelEntry (weight,
density). The math is in each method's own file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from minitrain.common.registry import Registry
from minitrain.merging.dare import dare_linear, dare_ties
from minitrain.merging.linear import linear, task_arithmetic
from minitrain.merging.slerp import slerp
from minitrain.merging.ties import ties


@dataclass(frozen=True)
class MergeMethod:
    """`fn` merges one tensor (above); `reads` the parameters it reads (another is refused), `requires` those it
    must be given; `needs_base`: the task vectors are taken from base_model (else it is not read); `models`: how
    many models it merges besides the base (at least, at most or None)."""

    name: str
    fn: Callable[[Any, str, np.ndarray | None, Sequence[np.ndarray], Sequence[Any]], np.ndarray]
    reads: frozenset[str]
    needs_base: bool = True
    requires: frozenset[str] = frozenset()
    models: tuple[int, int | None] = (1, None)


def _each(spec: Any, entries: Sequence[Any], key: str) -> list[float]:
    """Each model's weight or density: its own, else the top-level parameters', else 1."""
    return [spec.value(e, key, 1.0) for e in entries]


def _top(spec: Any, key: str, default: float | bool) -> Any:
    """A top-level parameter (lambda_, normalize), else the method's default."""
    value = getattr(spec.parameters, key)
    return default if value is None else value


def _linear(spec, name, base, tensors, entries):
    return linear(tensors, _each(spec, entries, "weight"), _top(spec, "normalize", True))


def _task_arithmetic(spec, name, base, tensors, entries):
    return task_arithmetic(base, tensors, _each(spec, entries, "weight"), _top(spec, "lambda_", 1.0),
                           _top(spec, "normalize", False))


def _ties(spec, name, base, tensors, entries):
    return ties(base, tensors, _each(spec, entries, "weight"), _each(spec, entries, "density"),
                _top(spec, "lambda_", 1.0))


def _dare_linear(spec, name, base, tensors, entries):
    return dare_linear(base, tensors, _each(spec, entries, "weight"), _each(spec, entries, "density"), spec.seed,
                       name, _top(spec, "lambda_", 1.0), _top(spec, "normalize", False))


def _dare_ties(spec, name, base, tensors, entries):
    return dare_ties(base, tensors, _each(spec, entries, "weight"), _each(spec, entries, "density"), spec.seed,
                     name, _top(spec, "lambda_", 1.0))


def _slerp(spec, name, base, tensors, entries):
    return slerp(spec.t_for(name), base, tensors[0])


MERGE_METHODS: Registry[MergeMethod] = Registry("merge method", [
    MergeMethod("linear", _linear, frozenset({"weight", "normalize"}), needs_base=False),
    MergeMethod("task_arithmetic", _task_arithmetic, frozenset({"weight", "lambda_", "normalize"})),
    MergeMethod("ties", _ties, frozenset({"weight", "density", "lambda_"})),
    MergeMethod("dare_linear", _dare_linear, frozenset({"weight", "density", "lambda_", "normalize"})),
    MergeMethod("dare_ties", _dare_ties, frozenset({"weight", "density", "lambda_"})),
    MergeMethod("slerp", _slerp, frozenset({"t"}), requires=frozenset({"t"}), models=(1, 1)),
])
