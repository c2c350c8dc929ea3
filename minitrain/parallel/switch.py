"""The measured choice's hands: a compute setting (minitrain/common/compute.py) put in force in the middle of a run.

    switch = WorkerSwitch(model, micro_batches, rows, cols)    nothing started yet
    switch.start(workers)                the pool started before the first step, not in force
    switch.attach(data)                  the loop's LoopData: its `workers` follow the setting in force
    switch.apply(setting, final)         BLAS threads here; the local worker pool started or stopped
    switch.close()                       the pool stopped, its shared memory removed (also after an error)

`runtime.threads: measure` with `runtime.data_parallel` (backend local) makes the workers a candidate instead of a
command: the run starts in one process and the chooser (minitrain/callbacks/thread_choice.py) applies each setting
it tries. The run starts the pool before its first step (LocalWorkers: spawned processes, about a second); a
setting with workers points `data.workers` at it (starting it again if a decision had stopped it: that step is the
block's first, which the chooser does not count); a one-process setting points it back at None, so the engine
computes the step itself. Between a trial's blocks the idle pool is kept (its workers wait on a pipe, using no
CPU), so a trial starts it at most once; a decision for one process stops it, so a run that settles there holds no
worker processes and no shared memory.
"""

from __future__ import annotations

from typing import Any

from minitrain.common.compute import Setting
from minitrain.common.runtime import set_blas_threads
from minitrain.parallel.local import TIMEOUT_SECONDS, LocalWorkers


class WorkerSwitch:
    """Applies settings to one run: the training process's BLAS threads and, for N workers, a pool of N."""

    def __init__(self, model: Any, micro_batches: int, rows: int, cols: int, stop_after: int = 3,
                 timeout: float = TIMEOUT_SECONDS) -> None:
        self.model, self.micro_batches, self.rows, self.cols = model, micro_batches, rows, cols
        self.timeout = timeout  # runtime.data_parallel.timeout, for every pool it starts
        self.stop_after = stop_after  # one-process decisions in a row that stop the pool
        self.pool: LocalWorkers | None = None
        self.started: list[tuple[list[int], str]] = []  # each pool's worker pids and shared block, for the tests
        self._data: Any = None
        self._in_force: LocalWorkers | None = None
        self._one_process_wins = 0  # one-process decisions since the pool started or the workers won

    def attach(self, data: Any) -> None:
        """From now on `data.workers` is the pool in force (None: one process)."""
        self._data = data
        data.workers = self._in_force

    def start(self, workers: int) -> None:
        """Start a pool of `workers` now, not in force yet: the run calls it before its first step, so the pool's
        start (about a second) is paid in the run's setup, as a fixed runtime.data_parallel pays it."""
        if self.pool is not None and self.pool.n != workers:
            self._stop()
        if self.pool is None:
            self.pool = LocalWorkers(self.model, self.micro_batches, self.rows, self.cols, workers, self.timeout)
            self.started.append((self.pool.pids, self.pool.block.name))
            self._one_process_wins = 0  # a new pool is kept for `stop_after` one-process decisions again

    def apply(self, setting: Setting, final: bool) -> None:
        # With workers the training process is worker 0, at 1 thread as every worker is (setting.threads).
        set_blas_threads(setting.threads)
        if setting.workers > 1:
            self.start(setting.workers)
            self._in_force = self.pool
            if final:
                self._one_process_wins = 0
        else:
            self._in_force = None
            self._one_process_wins += final
            if self._one_process_wins >= self.stop_after:
                self._stop()
        if self._data is not None:
            self._data.workers = self._in_force

    def _stop(self) -> None:
        if self.pool is not None:
            pool, self.pool = self.pool, None
            pool.close()

    def close(self) -> None:
        """Stop the pool (if any); the loop's data computes in one process again."""
        self._in_force = None
        if self._data is not None:
            self._data.workers = None
        self._stop()
