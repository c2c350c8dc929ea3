"""Spreading a batched computation over the cores: the batch cut into slices, one thread per slice.

    each_slice(part, batch, macs)      # part(slice(b0, b1)) for slices covering range(batch), then returns

Used by the causal and the grouped attention, whose per-head products are small matrices ((128 × 32)·(32 × 128) at
the scaled config, (768 × 64)·(64 × 256) at SmolLM2's): OpenBLAS computes each on one thread, one after another,
so a multi-threaded BLAS leaves the second core idle for the whole attention. Below SPLIT_MACS multiply-adds (the
lab-01 config: 2¹⁹) the work is done whole, on the calling thread, exactly as before: a hand-off costs ≈ 40 µs.

Same bytes: a slice of the batch computes exactly what the whole batch computes for those rows (each (b, h)
matrix is its own BLAS call and its own softmax rows either way), and BLAS runs on one thread inside, as it does
for the whole batch (functional runs both attentions under `one_thread_below`: a product's last bits may depend
on BLAS's thread count, and with the OpenBLAS of some machines they do). The slices are a function of the batch
size and the core count only, never of timing.

Why BLAS goes to one thread and its workers are shut down: with two Python threads calling OpenBLAS at once its
own threaded path would serialise them; and after the step's last big product OpenBLAS's idle worker keeps
spinning on the second core for a while (≈ 0.1 s), the core the second slice needs. `blas_thread_shutdown_`
ends the worker now (≈ 0.2 ms). It must come after the count is set to one: setting a count starts stopped
workers again, which is also what restoring the count does at the end.

Fork-safe: the pool is dropped in a forked child (its threads do not exist there) and made again on first use.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from minitrain.common.runtime import blas_threads, stop_blas_workers

# From this many multiply-adds in the batched products, the batch is spread over the cores.
SPLIT_MACS = 2**23

_pools: dict[int, ThreadPoolExecutor] = {}  # by size: the threads beside the caller's


os.register_at_fork(after_in_child=_pools.clear)


def slices(batch: int, n: int) -> list[slice]:
    """range(batch) cut into min(n, batch) contiguous slices in order, their lengths at most one apart."""
    n = max(1, min(n, batch))
    cuts = [batch * i // n for i in range(n + 1)]
    return [slice(a, b) for a, b in itertools.pairwise(cuts)]


def workers() -> int:
    """How many slices a big batch is cut into: the cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def each_slice(part: Callable[[slice], None], batch: int, macs: int) -> None:
    """Run part(s) for slices s covering range(batch): all at once when `macs` < SPLIT_MACS or one core, else one
    slice per core (the caller's thread takes the first), BLAS on one thread meanwhile. Exceptions propagate."""
    pieces = slices(batch, workers())
    if macs < SPLIT_MACS or len(pieces) == 1:
        part(slice(0, batch))
        return
    size = len(pieces) - 1
    if size not in _pools:
        _pools[size] = ThreadPoolExecutor(max_workers=size, thread_name_prefix="minitrain-split")
    with blas_threads(1):  # then stop the workers (setting a count restarts them), even if the count was one already:
        stop_blas_workers()  # a worker of an earlier product on more threads may still be spinning
        futures = [_pools[size].submit(part, s) for s in pieces[1:]]
        try:
            part(pieces[0])
        finally:  # never leave a slice running behind the caller's back, even when the first one failed
            for future in futures:
                future.result()
