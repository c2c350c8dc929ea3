"""The embedded backend: trials in a pool of worker processes on this machine (`--workers N`).

Workers are started fresh (spawn, not fork: the parent may hold threads and numba state) and each trains one
trial at a time with `trials.run_job`. Ctrl-C stops the sweep cleanly: the workers ignore SIGINT themselves and
the driver sends each a SIGTERM, which the training loop answers like Ctrl-C (finish the step, save a checkpoint,
stop); running the sweep again resumes those trials.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from minitrain.sweep.trials import TrialJob, run_job


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_local(jobs: Sequence[TrialJob], workers: int, on_done: Callable[[TrialJob, str | None], None]) -> None:
    """Run every job, at most `workers` at a time; `on_done(job, error)` hears each as it ends."""
    if not jobs:
        return
    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), initializer=_ignore_sigint,
                               mp_context=multiprocessing.get_context("spawn"))
    futures = {pool.submit(run_job, job): job for job in jobs}
    try:
        for future in as_completed(futures):
            try:
                error = future.result()
            except BrokenProcessPool as exc:
                error = f"its worker process died ({exc})"
            on_done(futures[future], error)
    except KeyboardInterrupt:
        for process in multiprocessing.active_children():  # the pool's workers
            if process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
