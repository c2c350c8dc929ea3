"""A `custom` callback: a Python function named by its entry point, never code written in the config.

    # my_callbacks.py, beside where you run minitrain (or in any installed package)
    def log_embedding_norm(ctx, every=1):
        norm = float((ctx.parameters()["transformer.wte.weight"] ** 2).sum() ** 0.5)
        ctx.log({"wte_norm": norm})

    callbacks:
      - {type: custom, entry_point: "my_callbacks:log_embedding_norm", trigger: step, interval: 100}

The function is called as `function(ctx, **args)` at the trigger (base.Context: read-only numbers and arrays,
and ctx.log / ctx.save_checkpoint / ctx.request_stop). The module is imported like any other Python module,
with the directory minitrain runs from on the path. An exception in the function does not end the run: it is
reported once, with the step, and that callback is switched off.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

from minitrain.callbacks.callback import Context, Triggered
from minitrain.common.errors import UserError
from minitrain.config.problems import Problem
from minitrain.config.schema import Config


def load_entry_point(entry_point: str) -> Callable[..., Any]:
    """The function `module.path:name` names; a UserError (exit 2) saying what is wrong when it cannot be had."""
    module_name, _, name = entry_point.partition(":")
    added = "" not in sys.path  # "" is the current directory, where a student's module usually lives
    if added:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or an error inside the module's own code
        raise UserError(f"callback entry point {entry_point}: cannot import {module_name} "
                        f"({type(exc).__name__}: {exc})", 2) from None
    finally:
        if added:
            sys.path.remove("")
    function = getattr(module, name, None)
    if not callable(function):
        raise UserError(f"callback entry point {entry_point}: {module_name} has no function {name}", 2)
    return function


def entry_point_problems(cfg: Config) -> list[Problem]:
    """Each custom callback's entry point imported, as `validate` checks it: a problem for each that fails."""
    problems = []
    for i, entry in enumerate(cfg.callbacks):
        if entry.type == "custom":
            try:
                load_entry_point(entry.entry_point)
            except UserError as exc:
                problems.append(Problem(("callbacks", i, "entry_point"), str(exc).split(": ", 1)[-1]))
    return problems


class CustomCallback(Triggered):
    """Calls `function(ctx, **args)` at its trigger."""

    def __init__(self, function: Callable[..., Any], name: str, trigger: str = "step", interval: int = 1,
                 args: Mapping[str, Any] | None = None) -> None:
        super().__init__(trigger, interval)
        self.function, self.name, self.args = function, name, dict(args or {})
        self.failed = False

    def act(self, ctx: Context) -> None:
        if self.failed:
            return
        try:
            self.function(ctx, **self.args)
        except Exception as exc:
            self.failed = True
            print(f"warning: callback {self.name} raised {type(exc).__name__}: {exc} at step {ctx.step}; it is "
                  "switched off for the rest of the run", file=sys.stderr, flush=True)
