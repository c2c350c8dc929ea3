"""`minitrain lab start NN DIR` and `minitrain lab check NN [DIR] [--run RUN_DIR]`: a lab's workspace and its
checker (minitrain/course/)."""

from __future__ import annotations

import argparse

from minitrain import seam
from minitrain.common.errors import UserError
from minitrain.course.checks import format_checklist
from minitrain.course.labs import LABS, grade, start


def register(subparsers: argparse._SubParsersAction) -> None:
    lab = subparsers.add_parser("lab", help="start a lab's workspace, or check it")
    actions = lab.add_subparsers(dest="action", required=True, metavar="ACTION")
    begin = actions.add_parser("start", help="write the lab's files, with TODO stubs, into a new workspace")
    begin.add_argument("lab", choices=list(LABS), metavar="NN", help=f"the lab ({', '.join(LABS)})")
    begin.add_argument("dir", help="the workspace folder, e.g. labs/01")
    begin.set_defaults(handler=start_command)
    check = actions.add_parser("check", help="grade a workspace (or, without DIR, the library's own files)")
    check.add_argument("lab", choices=list(LABS), metavar="NN", help=f"the lab ({', '.join(LABS)})")
    check.add_argument("dir", nargs="?", help="the workspace; without it, the library and its reference run")
    check.add_argument("--run", metavar="RUN_DIR", help="the run folder to check (default: DIR/run)")
    check.set_defaults(handler=check_command)


def start_command(args: argparse.Namespace) -> int:
    written = start(args.lab, args.dir)
    print(f"lab {args.lab}: wrote {', '.join(str(p) for p in written)}")
    print(f"next: read {args.dir}/README.md, write the TODOs, then `minitrain lab check {args.lab} {args.dir}`")
    return 0


def check_command(args: argparse.Namespace) -> int:
    if seam.lab_dir() is not None:
        # The checker compares with the library's own pieces, and sets the variable itself for its runs.
        raise UserError(f"unset {seam.LAB_DIR_VARIABLE} before `minitrain lab check`; give the workspace as DIR", 2)
    title, outcomes = grade(args.lab, args.dir, args.run)
    print(format_checklist(title, outcomes))
    return 0 if all(o.passed for o in outcomes) else 1
