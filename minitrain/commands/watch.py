"""`minitrain watch RUN [--once] [--refresh-ms MS]`: the live dashboard of a run folder, while it trains or after
(minitrain/monitor/dashboard.py; minitrain[tui]). Exit 0 when the run is no longer written (or after one frame
with --once, or at Ctrl-C); 2 for a folder that holds no run or a damaged log."""

from __future__ import annotations

import argparse
from contextlib import suppress

from minitrain.commands.common import positive_int


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN", help="a run folder")
    parser.add_argument("--once", action="store_true", help="draw one frame and exit")
    parser.add_argument("--refresh-ms", type=positive_int, metavar="MS",
                        help="milliseconds between redraws (default: the run's monitoring.dashboard.refresh_ms)")
    parser.set_defaults(handler=watch_command)


def watch_command(args: argparse.Namespace) -> int:
    from minitrain.monitor.dashboard import watch

    with suppress(KeyboardInterrupt):  # the way to stop watching a run that goes on
        watch(args.run_dir, once=args.once, refresh_ms=args.refresh_ms)
    return 0
