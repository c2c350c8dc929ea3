"""Registries: one `Registry` of records per plug-in kind (families, optimizers, merge methods, trackers, ...).
A config's `type` names a record, and where the record is a class its other keys are that class's constructor
arguments, read from its signature, so no second list of keys has to be kept in step with the code.

    keyword_defaults(SGD, skip=("named_params",))      # {"lr": 0.001, "momentum": 0.0, ..., "buffer": None}
    check_choice("optimizer", OPTIMIZERS, "sgd", {"lr": 0.1}, skip=("named_params",))
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Iterable, Iterator, Mapping
from importlib import import_module
from typing import Any, TypeVar

from minitrain.common.errors import UserError

R = TypeVar("R")


def load(path: str) -> Any:
    """The object a dotted `path` names, "package.module.Name", imported only now: how a record names what a
    higher floor builds (a tracker's class) or what would load every entry's module at once (the optimizers)."""
    module, name = path.rsplit(".", 1)
    return getattr(import_module(module), name)


def keyword_defaults(cls: type, skip: Collection[str] = ()) -> dict[str, Any]:
    """`cls.__init__`'s arguments other than `self` and `skip`, in order, each with its default
    (`inspect.Parameter.empty` for one without)."""
    params = inspect.signature(cls.__init__).parameters
    return {name: p.default for name, p in params.items() if name != "self" and name not in skip}


def check_choice(section: str, registry: Registry[type], type: str, keys: Collection[str],
                 skip: Collection[str]) -> None:
    """UserError (exit code 2) unless `registry` has `type` and its constructor takes `keys` (all but `skip`).

    An unknown type names `<section>.type`; a key the class does not take, or one it requires that is missing,
    names `<section>.<key>`.
    """
    defaults = keyword_defaults(registry.pick(type, f"{section}.type"), skip)
    for key in keys:
        if key not in defaults:
            raise UserError(f"{section}.{key}: not a key of {type} (valid: {', '.join(defaults)})", 2)
    for key, default in defaults.items():
        if default is inspect.Parameter.empty and key not in keys:
            raise UserError(f"{section}.{key}: required by {type}", 2)


class Registry(Mapping[str, R]):
    """One plug-in kind's records, by name: the one way minitrain registers anything.

        MERGE_METHODS = Registry("merge method", [MergeMethod("linear", _linear, reads={"weight"}), ...])
        MERGE_METHODS["ties"]                       # the record
        MERGE_METHODS.pick("ties", "merge_method")  # the record, or one UserError naming the key and the choices

    A record is any object with a `name`; the table keeps their order (`--help` and the docs list them in it). It
    is a read-only Mapping, so `name in REGISTRY`, `tuple(REGISTRY)` (a schema's Literal) and `.items()` work.
    Each kind's contract test (tests/test_registries.py) runs every record, so a new one is covered with nothing
    added.
    """

    def __init__(self, kind: str, records: Iterable[R]) -> None:
        self.kind = kind
        self._records: dict[str, R] = {}
        for record in records:
            name = record.name  # type: ignore[attr-defined]
            if name in self._records:
                raise ValueError(f"two {kind} records named {name!r}")
            self._records[name] = record

    def __getitem__(self, name: str) -> R:
        return self._records[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._records)})"

    def pick(self, name: str, key: str) -> R:
        """The record named `name`; UserError (exit code 2) naming the config `key` and the choices otherwise."""
        if name not in self._records:
            raise UserError(f"{key}: unknown {self.kind} {name!r} (choose one of {', '.join(self._records)})", 2)
        return self._records[name]
