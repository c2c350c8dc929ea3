"""The student's code, called from the checker across a pipe: what travels is data, never a verdict.

A check marked `here` (checks.py) runs in the checker's own process, which the student's code never enters.
Each call into that code goes to the child process (worker.py), which runs it and sends back what it returned,
as data:

    None, bool, int, float, str, list      JSON as they are
    tuple, dict, bytes, a NumPy array      {"tuple": [...]}, {"dict": [[k, v], ...]}, {"bytes": base64},
                                           {"array": base64 of np.save(allow_pickle=False)}
    anything else (a class, an instance)   {"ref": n, "type": name}: it stays in the child; here it is a
                                           `Remote`, whose attributes, calls, items, next
                                           item and length are asked for

Decoding builds only these types, so nothing the student wrote (a list subclass whose `==` says yes, a patched
`Outcome`) runs here: the check compares plain values with the library's own results and decides. A value that
is not data is sent back by its number when it came from the child; anything else the checker cannot send.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from typing import Any

import numpy as np


class StudentError(Exception):
    """An exception the student's code raised in the child: `kind` its type's name, `classes` the
    "module.name" of each class it is an instance of, `code` a SystemExit's code, `str()` the line the
    checklist shows ("IndexError: list index out of range at labs/06/minitrain/data/bpe.py:80")."""

    def __init__(self, kind: str, text: str, classes: tuple[str, ...] = (), code: Any = None) -> None:
        super().__init__(text)
        self.kind, self.classes, self.code = kind, classes, code


def class_names(kind: type) -> tuple[str, ...]:
    """"module.name" of `kind` and of each class it derives from: what a StudentError is matched by."""
    return tuple(f"{c.__module__}.{c.__qualname__}" for c in kind.__mro__)


class Lost(BaseException):
    """The child ran past the item's limits, or ended, during a call: the item fails with `outcome`. A
    BaseException, so that a check's own `except Exception` never swallows it."""

    def __init__(self, outcome: Any) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


def encode(value: Any, keep: Callable[[Any], dict]) -> Any:
    """`value` as JSON-ready data (the table in the module docstring); `keep(value)` for what is not data."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [encode(v, keep) for v in value]
    if kind is tuple:
        return {"tuple": [encode(v, keep) for v in value]}
    if kind is dict:
        return {"dict": [[encode(k, keep), encode(v, keep)] for k, v in value.items()]}
    if kind is bytes:
        return {"bytes": base64.b64encode(value).decode("ascii")}
    if kind is np.ndarray and value.dtype != object:
        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=False)
        return {"array": base64.b64encode(buffer.getvalue()).decode("ascii")}
    if isinstance(value, np.generic) and not isinstance(value, np.object_):
        return encode(value.item(), keep)
    return keep(value)


def decode(data: Any, ref: Callable[[dict], Any]) -> Any:
    """The value `encode` made `data` from; `ref(data)` for a {"ref": ...}."""
    if type(data) is list:
        return [decode(v, ref) for v in data]
    if type(data) is not dict:
        return data
    if "tuple" in data:
        return tuple(decode(v, ref) for v in data["tuple"])
    if "dict" in data:
        return {decode(k, ref): decode(v, ref) for k, v in data["dict"]}
    if "bytes" in data:
        return base64.b64decode(data["bytes"])
    if "array" in data:
        return np.load(io.BytesIO(base64.b64decode(data["array"])), allow_pickle=False)
    return ref(data)


class Remote:
    """An object of the student's that lives in the child: `ask(op, ref, *values)` fetches what it is asked."""

    def __init__(self, ask: Callable[..., Any], ref: int, kind: str) -> None:
        object.__setattr__(self, "_ask", ask)
        object.__setattr__(self, "_ref", ref)
        object.__setattr__(self, "_kind", kind)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # NumPy and copy probe for protocols: this object has none of them here
            raise AttributeError(name)
        return self._ask("getattr", self._ref, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._ask("call", self._ref, list(args), kwargs)

    def __iter__(self):  # a generator, say, that the student's function returned
        return iter(self._ask("list", self._ref))

    def __next__(self) -> Any:  # the student's batcher: one batch per call
        return self._ask("getattr", self._ref, "__next__")()

    def __len__(self) -> int:
        return self._ask("getattr", self._ref, "__len__")()

    def __float__(self) -> float:  # float(x) on what the student's code returned (a Tensor, say): not a number
        raise StudentError("TypeError", f"your code returned an object of type {self._kind}, where a number was "
                           "expected")

    __int__ = __float__

    def __repr__(self) -> str:
        return f"<your {self._kind}>"
