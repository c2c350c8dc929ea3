"""`minitrain info RUN_DIR`: a run folder summarised (status, steps, metrics, quality score)."""

from __future__ import annotations

import argparse

from minitrain.monitor.summary import run_summary


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir")
    parser.set_defaults(handler=info_command)


def info_command(args: argparse.Namespace) -> int:
    print(run_summary(args.run_dir))
    return 0
