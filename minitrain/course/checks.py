"""What a lab's checker is made of: named checks, each passing or failing with a reason and a hint.

    @check("evaluate counts exactly the loss_mask positions", hint="sum −log p over loss_mask only ...")
    def _evaluate_counts(lab: LabUnderTest) -> None:
        ...
        raise Failed("your evaluate() counted padding positions: expected 1,299 tokens, got 4,608")

A check that returns passed (a text it returns is shown under its ✓: what it measured). `Failed(reason)` fails
it with that reason (`Failed(reason, hint=...)` with another item's hint, when that item's mistake is the cause);
a `NotImplementedError` (a starter's TODO stub) fails it with "not written yet"; any other exception fails it
with the exception, since a student's code may break in any way. A check may depend on earlier ones
(`needs=(their functions)`): when one of those failed, it is not run and fails with "not run: fix first: ...",
which keeps a fresh starter from starting a training run for nothing.

`lab check` runs the student's code in a child process (sandbox.py), under a time and a memory limit, so that
a student's code that never returns, fills the memory, exits or crashes is a ✗ with its reason; a MemoryError
and a SystemExit are left to that runner (worker.py), which knows the limit. A check marked `here`
(`Checklist(here=True)`, or `check(..., here=True)`) itself runs in the checker's process and only calls into
the child (remote.py), so its verdict is out of the student's reach; the others still run whole in the child.

An exception that no frame of the student's files raised is the checker's own bug: its item fails with one line
that says so, never a traceback, and never a hint that blames the student.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from minitrain.course.blame import innermost_in_traceback
from minitrain.course.remote import StudentError, class_names

CHECKER_HINT = "this item says nothing about your code; the other items still grade it"


class Failed(Exception):
    """A check's verdict: `reason` says what was found, in words a student can act on.

    `hint` replaces the check's own hint when the check recognises a mistake that another item is about (an
    item's numbers can be off because of a bug the item does not teach): the hint under the first ✗ must name
    the cause, not the item.
    """

    def __init__(self, reason: str, hint: str | None = None) -> None:
        super().__init__(reason)
        self.hint = hint


@dataclass
class Check:
    """One item of a lab's checklist."""

    name: str
    function: Callable[[Any], None]
    hint: str
    needs: tuple[str, ...] = ()
    here: bool = False  # runs in the checker's process, calling into the child (see the module docstring)


@dataclass
class Outcome:
    name: str
    passed: bool
    reason: str = ""
    hint: str = ""


@dataclass
class Checklist:
    """A lab's checks in the order they are listed and run."""

    checks: list[Check] = field(default_factory=list)
    here: bool = False  # the checks' default

    def check(self, name: str, hint: str, needs: Sequence[Callable] = (), here: bool | None = None) -> Callable:
        """Decorator: register the function as the check `name`; `needs` are earlier checks' functions; `here`
        (default: the checklist's) runs it in the checker's process."""
        names = {c.function: c.name for c in self.checks}
        if any(f not in names for f in needs):
            raise ValueError(f"check {name!r} needs a check that is not registered before it")

        def register(function: Callable[[Any], None]) -> Callable[[Any], None]:
            self.checks.append(Check(name, function, hint, tuple(names[f] for f in needs),
                                     self.here if here is None else here))
            return function

        return register

    def run(self, subject: Any, only: Callable[[str], bool] = lambda name: True,
            runner: Callable[[Check], Outcome] | None = None,
            report: Callable[[Outcome], None] = lambda outcome: None) -> list[Outcome]:
        """Run every check (or those `only` accepts) on `subject`, in this process unless `runner` runs each
        one (the sandbox's child process); one Outcome each, in order, each also given to `report` as soon as
        it is known (`lab check` prints it). On Ctrl-C, the `Interrupted` raised carries the outcomes so far."""
        runner = runner or (lambda item: run_one(item, subject))
        outcomes: dict[str, Outcome] = {}
        for item in self.checks:
            if not only(item.name):
                continue
            blocked = [n for n in item.needs if n in outcomes and not outcomes[n].passed]
            if blocked:
                outcomes[item.name] = Outcome(item.name, False, "not run: fix first: " + "; ".join(blocked), item.hint)
            else:
                try:
                    outcomes[item.name] = runner(item)
                except Interrupted as stop:
                    stop.done = list(outcomes.values())
                    raise
            report(outcomes[item.name])
        return list(outcomes.values())


class Interrupted(Exception):
    """Ctrl-C while the check `item` ran: `where` says what the student's code was doing (or ""), and `done`
    holds the outcomes of the items before it."""

    def __init__(self, item: str, where: str) -> None:
        super().__init__(f"interrupted while checking {item!r}: {where} was running" if where else
                         f"interrupted while checking {item!r}")
        self.item, self.where = item, where
        self.done: list[Outcome] = []


def raised(kind: type[BaseException] | tuple[type[BaseException], ...], call: Callable, *args: Any,
           **keys: Any) -> BaseException | None:
    """The `kind` exception that `call(*args, **keys)` raised, or None when it returned: a check that a bad input
    is refused. Any other exception goes up (run_one reports it)."""
    try:
        call(*args, **keys)
    except StudentError as error:  # raised in the child (remote.py): told apart by its classes' names
        if not is_a(error, kind):
            raise
        return error
    except kind as error:
        return error
    return None


def is_a(error: BaseException | None, kind: type[BaseException] | tuple[type[BaseException], ...]) -> bool:
    """isinstance(error, kind), also for an exception raised in the child (a StudentError)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(error, StudentError):
        return any(class_names(k)[0] in error.classes for k in kinds)
    return isinstance(error, kinds)


def run_one(item: Check, subject: Any) -> Outcome:
    """One check's outcome; MemoryError and SystemExit go up to the caller (see the module docstring)."""
    try:
        note = item.function(subject)
    except Failed as failed:
        return Outcome(item.name, False, str(failed), failed.hint or item.hint)
    except NotImplementedError as stub:
        where = f" ({stub})" if str(stub) else ""
        return Outcome(item.name, False, f"not written yet: it raises NotImplementedError{where}", item.hint)
    except MemoryError:
        raise
    except StudentError as error:  # raised in the child, by the student's code (remote.py)
        return Outcome(item.name, False, str(error), item.hint)
    except Exception as error:  # a student's code may fail in any way: say how, never crash
        frame = traceback.extract_tb(error.__traceback__)[-1]
        line = f"{type(error).__name__}: {error} at {frame.filename}:{frame.lineno}"
        files = getattr(subject, "files", None)
        if files is not None and innermost_in_traceback(error, files) is None:
            return Outcome(item.name, False, f"the checker itself failed on this item, not your code (please "
                           f"report it): {line}", CHECKER_HINT)
        return Outcome(item.name, False, line, item.hint)
    return Outcome(item.name, True, note if isinstance(note, str) else "")


def format_outcome(outcome: Outcome, tr: Callable[[str], str] = str) -> str:
    """One item of the checklist: its ✓ line (with what it measured under it, if anything), or its ✗ line with
    the reason and the hint under it."""
    lines = [f"  {'✓' if outcome.passed else '✗'} {tr(outcome.name)}"]
    if not outcome.passed:
        lines += [f"      {tr(outcome.reason)}", f"      {tr('hint')}: {tr(outcome.hint)}"]
    else:
        lines += [f"      {tr(line)}" for line in outcome.reason.splitlines()]
    return "\n".join(lines)


def format_count(outcomes: Sequence[Outcome], tr: Callable[[str], str] = str) -> str:
    passed, total = sum(o.passed for o in outcomes), len(outcomes)
    return tr(f"{passed} of {total} passed: done.") if passed == total else tr(f"{passed} of {total} passed.")
