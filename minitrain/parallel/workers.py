"""The one door to data parallelism: the workers `runtime.data_parallel` names, for the length of a run.

    with start_workers(settings, model, micro_batches, rows, cols) as workers:   None: no data parallelism
        loss, grad_norm = workers.gradients(model, batches, clip_norm)

`settings` is the config's runtime.data_parallel (workers, backend, address) or None; the model is the run's,
packed; each step has `micro_batches` batches of at most `rows` × `cols`. However the block ends (an error, Ctrl-C),
the workers are stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from minitrain.common.runtime import blas_threads
from minitrain.parallel.replica import ReplicaSpec


@contextmanager
def start_workers(settings: Any, model: Any, micro_batches: int, rows: int, cols: int) -> Iterator[Any]:
    """The backend's workers, started now and closed when the block ends; None when `settings` is None."""
    if settings is None:
        yield None
        return
    with ExitStack() as stack:
        if settings.backend == "ray":
            from minitrain.parallel.ray_workers import RayWorkers

            workers: Any = RayWorkers(ReplicaSpec.of(model), settings.workers, micro_batches, settings.address)
        else:
            from minitrain.parallel.local import LocalWorkers

            stack.enter_context(blas_threads(1))  # this process is worker 0, at 1 BLAS thread as every worker is
            workers = LocalWorkers(model, micro_batches, rows, cols, settings.workers, settings.timeout)
        stack.callback(workers.close)
        yield workers
