"""The embedded backend: trials in a pool of worker processes on this machine (`--workers N`).

Workers are started fresh (spawn, not fork: the parent may hold threads and numba state) and each trains one
trial at a time with `trials.run_job`. Ctrl-C stops the sweep cleanly: a training loop catches SIGINT itself (it
finishes the step, saves a checkpoint and stops), the workers otherwise ignore it, and the driver raises a flag
that keeps queued trials from starting and sends each worker a SIGTERM, which the loop answers like Ctrl-C.
Running the sweep again resumes those trials.

The driver waits for its trials in steps of at most WAKE_SECONDS: Python runs a signal's handler in the main
thread, and the kernel may hand a SIGINT to another of the driver's threads (OpenBLAS's, the pool's), which would
leave the main thread asleep until the next trial ends.

A worker dies with its driver, however the driver ends (`kill -9` included): a watchdog thread in each worker
(common/lifeline.py) polls its parent's pid and ends the worker at once when the parent is gone. Otherwise an
orphan would go on training, and then wait for its next trial forever (the pool's queue never reaches
end-of-file: every worker holds its write end), with the caller's stdout and stderr still open, so a caller
waiting for them to close would hang. The killed trial resumes from its last checkpoint when the sweep runs again.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from minitrain.common.lifeline import die_with
from minitrain.sweep.trials import TrialJob, run_job

NOT_STARTED = "not started: the sweep was interrupted"
WAKE_SECONDS = 0.1  # the longest the driver sleeps before it looks for a Ctrl-C (module docstring)
_stop: Any = None  # in a worker: the driver's "stop" flag (a multiprocessing Event)


def _start_worker(stop: Any, driver: int) -> None:
    global _stop
    _stop = stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with(driver)


def _run_in_worker(job: TrialJob) -> str | None:
    return NOT_STARTED if _stop.is_set() else run_job(job)


def run_local(jobs: Sequence[TrialJob], workers: int, on_done: Callable[[TrialJob, str | None], None]) -> None:
    """Run every job, at most `workers` at a time; `on_done(job, error)` hears each as it ends."""
    if not jobs:
        return
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context,
                               initializer=_start_worker, initargs=(stop, os.getpid()))
    futures = {pool.submit(_run_in_worker, job): job for job in jobs}
    running = set(futures)
    try:
        while running:
            done, running = wait(running, timeout=WAKE_SECONDS, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=list(futures).index):  # trials that end together: in the sweep's order
                try:
                    error = future.result()
                except BrokenProcessPool as exc:
                    error = f"its worker process died ({exc})"
                on_done(futures[future], error)
    except KeyboardInterrupt:
        stop.set()
        for process in multiprocessing.active_children():  # the pool's workers
            if process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
