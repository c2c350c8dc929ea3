"""The child's side of bench_step.py's out-of-process contestants (JAX pinned to some cores, minitrain from another
checkout): after warming up, say "ready <first loss>", then for each line "<n>" on stdin run n steps and answer
their wall times in seconds as one JSON list; stop at the end of input. bench_step.py's `child_contestants` is the
other side.

Only the protocol may reach stdout, so a child calls `protocol_stdout()` before anything else runs: whatever the
code under test prints goes to stderr instead."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TextIO


def protocol_stdout() -> TextIO:
    """Point sys.stdout at stderr, and return the real stdout for `serve`."""
    stdout, sys.stdout = sys.stdout, sys.stderr
    return stdout


def serve(step: Callable[[], object], first_loss: float, out: TextIO) -> None:
    print(f"ready {first_loss!r}", file=out, flush=True)
    for line in sys.stdin:
        times = []
        for _ in range(int(line)):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        print(json.dumps(times), file=out, flush=True)
