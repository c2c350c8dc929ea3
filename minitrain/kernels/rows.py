"""When a row kernel runs its rows on numba's threads (`parallel=True`, `prange`) instead of one after the other.

The kernels that use this (GELU, the causal softmax) treat every row on its own: a row's sums run over that row
only, in the same order, whichever thread computes it. So the parallel loop gives exactly the bits of the serial
one, and the choice is about speed alone. "Exactly" is checked, not assumed: the kernels compile with fast-math,
which lets LLVM reassociate a row's sum, and it may do so differently in the two compiled loops; for float32,
the training dtype, tests/test_parallel_kernels.py checks the bytes at the lab's and larger shapes (for float64 the
softmax's loops do differ, so float64 stays serial).

- below `PARALLEL_MIN_ELEMENTS` (2¹⁸ floats: the lab-01 model's largest activation has 2¹⁶) handing rows to a
  second thread costs more than it saves, so the serial loop runs;
- with one numba thread (`numba.set_num_threads(1)`, which `minitrain.runtime` does together with BLAS's count)
  there is nothing to share;
- numba's default threading layer (workqueue) must not be entered from two Python threads at once, so only the
  main thread uses it.
"""

from __future__ import annotations

import threading

import numba

PARALLEL_MIN_ELEMENTS = 2**18


def run_parallel(elements: int) -> bool:
    """True when a row kernel over `elements` floats should use its parallel loop."""
    return (elements >= PARALLEL_MIN_ELEMENTS and threading.current_thread() is threading.main_thread()
            and numba.get_num_threads() > 1)
