"""Registries: a config's `type` names a class (`OPTIMIZERS`, `SCHEDULES`), and its other keys are that class's
constructor arguments, read from its signature, so no second list of keys has to be kept in step with the code.

    keyword_defaults(SGD, skip=("named_params",))      # {"lr": 0.001, "momentum": 0.0, ..., "buffer": None}
    check_choice("optimizer", "optimizer", OPTIMIZERS, "sgd", {"lr": 0.1}, skip=("named_params",))
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping
from typing import Any

from minitrain.common.errors import UserError


def keyword_defaults(cls: type, skip: Collection[str] = ()) -> dict[str, Any]:
    """`cls.__init__`'s arguments other than `self` and `skip`, in order, each with its default
    (`inspect.Parameter.empty` for one without)."""
    params = inspect.signature(cls.__init__).parameters
    return {name: p.default for name, p in params.items() if name != "self" and name not in skip}


def check_choice(
    section: str,
    kind: str,
    registry: Mapping[str, type],
    type: str,
    keys: Collection[str],
    skip: Collection[str],
) -> None:
    """UserError (exit code 2) unless `registry` has `type` and its constructor takes `keys` (all but `skip`).

    An unknown type names `<section>.type`; a key the class does not take, or one it requires that is missing,
    names `<section>.<key>`.
    """
    if type not in registry:
        raise UserError(f"{section}.type: unknown {kind} '{type}' (choose one of {', '.join(registry)})", 2)
    defaults = keyword_defaults(registry[type], skip)
    for key in keys:
        if key not in defaults:
            raise UserError(f"{section}.{key}: not a key of {type} (valid: {', '.join(defaults)})", 2)
    for key, default in defaults.items():
        if default is inspect.Parameter.empty and key not in keys:
            raise UserError(f"{section}.{key}: required by {type}", 2)
