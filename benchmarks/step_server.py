"""The child's side of bench_step.py's out-of-process contestants (JAX pinned to some cores, minitrain from another
checkout): after warming up, say "ready <first loss>", then for each line "<n>" on stdin run n steps and answer
their wall times in seconds as one JSON list; stop at "quit" or end of input. bench_step.py's `child_contestants`
is the other side."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable


def serve(step: Callable[[], object], first_loss: float) -> None:
    print(f"ready {first_loss!r}", flush=True)
    for line in sys.stdin:
        if line.strip() == "quit":
            return
        times = []
        for _ in range(int(line)):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        print(json.dumps(times), flush=True)
