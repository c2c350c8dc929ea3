"""What a rule between keys is, and the helpers rules share.

A rule is `check(sections, raw)`, yielding problems; `needs` names the sections it reads, and it runs only when
those passed the schema, so one broken section does not hide the problems of another. A rule with `needs=()`
reads the raw YAML mapping (the rules about a setting given in two homes, which are about presence, not values).
Each rules module collects its own in a `RuleBook`; minitrain/config/rules.py lists the books in order.

    TABLE_RULES = RuleBook()

    @TABLE_RULES.rule("task", "model")
    def _task_fits_model(sections, raw): ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from minitrain.config.problems import Problem
from minitrain.config.section import HIGHER_IS_BETTER
from minitrain.nn.module import module_matches

Check = Callable[[Mapping[str, Any], Mapping[str, Any]], Iterator[Problem]]


@dataclass(frozen=True)
class Rule:
    name: str
    needs: tuple[str, ...]
    doc: str  # the check's docstring's first line: the rule as users read it (docs/yaml-mode.md lists them)
    check: Check


class RuleBook(list[Rule]):
    """The rules of one module, in the order they are defined."""

    def rule(self, *needs: str) -> Callable[[Check], Check]:
        """Add `check(sections, raw)` to this book; its docstring's first line is the rule as users read it."""

        def add(check: Check) -> Check:
            doc = (check.__doc__ or "").strip().splitlines()[0]
            self.append(Rule(check.__name__.lstrip("_"), needs, doc, check))
            return check

        return add


# The keys that say how long a run is; a config gives exactly one (scheduler.total_steps is lab 01's home).
RUN_LENGTHS = (("training", "total_steps"), ("scheduler", "total_steps"), ("training", "epochs"),
               ("training", "duration"))


def given(raw: Mapping[str, Any], section: str, key: str) -> bool:
    """A key counts as given when it is in the YAML (or --set) with a non-null value."""
    part = raw.get(section)
    return isinstance(part, Mapping) and part.get(key) is not None


def one_home(raw: Mapping[str, Any], key: str, homes: tuple[str, str]) -> Iterator[Problem]:
    """A problem when `key` is given in both sections of `homes`."""
    first, second = homes
    if given(raw, first, key) and given(raw, second, key):
        yield Problem((second, key), f"also given as {first}.{key}; give it in one place only")


def unknown_layers(path: tuple, names: list[str], paths: list[str], note: str = "") -> Iterator[Problem]:
    """A problem at `path`[i] for each of `names` (an `exclude` list) that names none of the linear layers `paths`."""
    for i, name in enumerate(names):
        if not any(module_matches(p, name) for p in paths):
            yield Problem((*path, i), f"{name!r} names no linear layer (they are {', '.join(paths[:4])}"
                                      f"{', ...' if len(paths) > 4 else ''}{note})")


def mode_fits(path: tuple, metric: str, mode: str) -> Iterator[Problem]:
    """A problem at `path`.mode unless `mode` fits `metric`: max for accuracy-like metrics, min for loss-like."""
    wanted = "max" if metric in HIGHER_IS_BETTER else "min"
    if mode != wanted:
        better = "higher" if wanted == "max" else "lower"
        yield Problem((*path, "mode"), f"{metric} is {better}-is-better, so mode must be {wanted} (got {mode})")
