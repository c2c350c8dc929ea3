"""Process settings that suit small-model training: BLAS threads and the memory allocator, in one place.

    from minitrain.common.runtime import configure
    settings = configure(d_model=64, rows=8 * 32)     # before the first step; returns what it set

Both settings make the lab-01 step faster (measurements in docs/performance.md). The allocator setting changes
no number; the BLAS thread count can change the last bits of a product (OpenBLAS splits the sum differently),
so by default a run's thread count follows from its config alone and the same config gives the same bytes;
`runtime.threads: measure` (minitrain/callbacks/thread_choice.py) trades that for speed on a busy machine:

- **BLAS threads.** At the course's sizes one matrix product takes a few microseconds, less than it costs to wake
  a second thread and hand it half the work, and on a shared machine the second core is often busy anyway: the
  lab-01 step is faster with single-threaded BLAS. Bigger models (d_model ≥ 256, thousands of rows per product)
  gain from every core. `blas_threads_for(d_model, rows)` encodes that rule; `set_blas_threads(n)` applies it.
  The usual way, OPENBLAS_NUM_THREADS=1, works only if it is set before NumPy is first imported, which a library
  cannot guarantee; so we call the already-loaded OpenBLAS's `openblas_set_num_threads` (what threadpoolctl
  does), found among the shared libraries mapped into this process. If there is none (NumPy on another BLAS,
  or not Linux) nothing changes and the function returns False: set the environment variable instead.

- **Keeping freed memory.** A training step allocates and frees the same hundred arrays of 64 KB-1 MB every
  time. glibc's malloc hands large blocks back to the operating system when they are freed (it trims the top of
  its heap, or unmaps them) and asks for them again on the next step: thousands of `brk` system calls a second,
  and every page comes back zeroed by the kernel. `keep_freed_memory()` raises glibc's trim and mmap thresholds
  (`mallopt`) so freed blocks stay in the process for reuse. Peak memory is unchanged; memory is simply not
  returned to the OS below the threshold. Other C libraries: nothing happens, the function returns False.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import numpy as np  # noqa: F401  (loads NumPy's BLAS, so it is mapped when we look for it)

# OpenBLAS builds prefix and suffix their symbols differently (NumPy's wheels: scipy_openblas…64_).
_SETTERS = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_")
_GETTERS = ("openblas_get_num_threads", "scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_")
_SHUTDOWN = ("blas_thread_shutdown_",)  # what OpenBLAS itself calls before a fork; it restarts them when needed

# Below this many multiply-adds per typical matrix product, one thread beats several.
SINGLE_THREAD_MACS = 2**24
# glibc mallopt parameters (malloc.h), and how much freed memory we keep.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
KEEP_BYTES = 256 * 2**20


@cache
def _openblas() -> ctypes.CDLL | None:
    """The OpenBLAS library NumPy loaded, found in /proc/self/maps (Linux), or None."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and ".so" in line}
    except OSError:
        return None
    for path in sorted(paths):
        library = ctypes.CDLL(path)  # already loaded: dlopen hands back the same handle
        if any(hasattr(library, name) for name in _SETTERS):
            return library
    return None


def _call(names: tuple[str, ...], *args: object) -> int | None:
    library = _openblas()
    for name in names if library is not None else ():
        if hasattr(library, name):
            return getattr(library, name)(*args)
    return None


def set_blas_threads(n: int) -> bool:
    """Let BLAS use at most `n` threads from now on (this process). True if the setting took effect."""
    if n < 1:
        raise ValueError(f"set_blas_threads: need at least 1 thread, got {n}")
    _call(_SETTERS, ctypes.c_int(n))
    return get_blas_threads() == n


def get_blas_threads() -> int | None:
    """The number of threads BLAS may use now, or None if the BLAS library cannot be asked."""
    return _call(_GETTERS)


def stop_blas_workers() -> bool:
    """End OpenBLAS's worker threads now instead of letting them spin idle for ≈ 0.1 s after the last product
    (holding a core other threads of ours want); setting a count or a threaded product starts them again. The
    count is kept. True if the BLAS library could be asked."""
    return _call(_SHUTDOWN) is not None


@contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """Run a block with `n` BLAS threads, then restore the previous count: e.g. an evaluation pass over batches
    of 256 lines, `with blas_threads(blas_threads_for(d_model, 256 * seq_len)):` (2 threads: ~20 % faster)."""
    previous = get_blas_threads()
    set_blas_threads(n)
    try:
        yield
    finally:
        if previous is not None:
            set_blas_threads(previous)


def blas_threads_for(d_model: int, rows: int) -> int:
    """1 when the model's typical product, (rows × d_model)·(d_model × d_model), is small (the lab-01 config:
    256·64·64 ≈ 10⁶ multiply-adds), else every core."""
    return 1 if rows * d_model * d_model < SINGLE_THREAD_MACS else (os.cpu_count() or 1)


@contextmanager
def one_thread_below(macs: int) -> Iterator[None]:
    """Run a block of matrix products of about `macs` multiply-adds each on one BLAS thread when that is below
    SINGLE_THREAD_MACS; else as they are. The count depends on the shapes only, so the bits do too.

    Why: at a few million multiply-adds, waking a second thread costs more than it saves, and on a shared machine
    the second core is often busy; then each product waits for a descheduled thread. Measured at SmolLM2's shape
    (docs/performance.md, "The 135M shape"): a 768×64·64×256 product takes 0.3 ms on one thread and 12-16 ms on
    two with the other core loaded. Grouped attention and the LoRA update run their small products under it."""
    if macs >= SINGLE_THREAD_MACS or get_blas_threads() in (None, 1):
        yield
        return
    with blas_threads(1):
        yield


def keep_freed_memory(limit: int = KEEP_BYTES) -> bool:
    """Ask glibc to keep up to `limit` bytes of freed memory for reuse. True if it did (glibc only)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_TRIM_THRESHOLD, limit)) and bool(mallopt(_M_MMAP_THRESHOLD, limit))


def configure(d_model: int, rows: int) -> dict[str, object]:
    """Apply both settings for a model of width `d_model` trained on `rows` = batch × sequence positions per
    step. Returns what is now in force, for a run's log: {"blas_threads": n or None, "keep_freed_memory": bool}."""
    set_blas_threads(blas_threads_for(d_model, rows))
    return {"blas_threads": get_blas_threads(), "keep_freed_memory": keep_freed_memory()}
