"""The row kernels' parallel loops (prange over rows, minitrain/kernels/rows.py) give the same bytes as their
serial loops, which agree with the NumPy references (tests/test_kernels.py); and when each one runs."""

import threading

import numba
import numpy as np
import pytest

from minitrain.kernels import attention, gelu, rows
from minitrain.runtime import get_blas_threads, set_compute_threads


def normal(shape, dtype=np.float32, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


MOST = numba.config.NUMBA_NUM_THREADS  # the threads numba started with: the cores, unless NUMBA_NUM_THREADS


@pytest.fixture
def kernel_threads():
    """numba's every thread for the test (the project's machines have 2); the count it had afterwards."""
    before = numba.get_num_threads()
    numba.set_num_threads(MOST)
    yield
    numba.set_num_threads(before)


@pytest.mark.parametrize("shape", [(37, 50), (8 * 32, 256), (64, 1024)])  # (64, 1024): rows of the scaled d_ff
def test_gelu_parallel_loops_give_the_serial_bytes(shape, kernel_threads):
    x, bias, dy = normal(shape, scale=3.0), normal(shape[1], seed=1), normal(shape, seed=2)
    serial, parallel = np.empty_like(x), np.empty_like(x)
    gelu._gelu_forward_f32(x, bias, serial)
    gelu._gelu_forward_f32_parallel(x, bias, parallel)
    assert serial.tobytes() == parallel.tobytes()
    gelu._gelu_backward_f32(x, bias, dy, serial)
    gelu._gelu_backward_f32_parallel(x, bias, dy, parallel)
    assert serial.tobytes() == parallel.tobytes()


@pytest.mark.parametrize(("batch", "heads", "t"), [(5, 2, 17), (8, 4, 32), (3, 2, 128)])  # lab: (8, 4, 32)
def test_causal_softmax_parallel_loops_give_the_serial_bytes(batch, heads, t, kernel_threads):
    scores, dprobs = normal((batch, heads, t, t), seed=3), normal((batch, heads, t, t), seed=4)
    key_mask = np.random.default_rng(5).random((batch, t)) < 0.7
    key_mask[1] = False  # a line with no real token: its rows stay zero
    scale = np.float32(0.25)
    serial, parallel = scores.copy(), scores.copy()
    attention._softmax_rows(serial, scale, key_mask, np.empty((t, t), np.float32))
    attention._softmax_rows_parallel(parallel, scale, key_mask, np.empty((batch, t, t), np.float32))
    assert serial.tobytes() == parallel.tobytes()
    d_serial, d_parallel = dprobs.copy(), dprobs.copy()
    attention._softmax_backward_rows(serial, d_serial, scale)
    attention._softmax_backward_rows_parallel(serial, d_parallel, scale)
    assert d_serial.tobytes() == d_parallel.tobytes()


def test_the_public_kernels_use_the_parallel_loops_above_the_threshold(monkeypatch, kernel_threads):
    x, dy = normal((16, 24), scale=2.0), normal((16, 24), seed=1)
    scores = normal((3, 2, 8, 8), seed=2)
    key_mask = np.ones((3, 8), dtype=bool)
    serial = (gelu.gelu_forward_numba(x), gelu.gelu_backward_numba(x, dy),
              attention.causal_softmax_forward_numba(scores.copy(), 0.5, key_mask))
    called = []
    for module, name in ((gelu, "_gelu_forward_f32_parallel"), (gelu, "_gelu_backward_f32_parallel"),
                         (attention, "_softmax_rows_parallel")):
        kernel = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *args, kernel=kernel, name=name: (called.append(name),
                                                                                   kernel(*args)))
    monkeypatch.setattr(rows, "PARALLEL_MIN_ELEMENTS", 64)
    parallel = (gelu.gelu_forward_numba(x), gelu.gelu_backward_numba(x, dy),
                attention.causal_softmax_forward_numba(scores.copy(), 0.5, key_mask))
    assert called == ["_gelu_forward_f32_parallel", "_gelu_backward_f32_parallel", "_softmax_rows_parallel"]
    for a, b in zip(serial, parallel, strict=True):
        assert a.tobytes() == b.tobytes()


def test_when_the_parallel_loops_run(kernel_threads):
    big, small = rows.PARALLEL_MIN_ELEMENTS, rows.PARALLEL_MIN_ELEMENTS - 1
    assert rows.run_parallel(big) == (MOST > 1) and not rows.run_parallel(small)
    numba.set_num_threads(1)
    assert not rows.run_parallel(big)  # one thread: nothing to share
    numba.set_num_threads(MOST)
    seen = []
    worker = threading.Thread(target=lambda: seen.append(rows.run_parallel(big)))
    worker.start()
    worker.join()
    assert seen == [False]  # numba's workqueue layer must not be entered from two threads


def test_compute_threads_set_blas_and_numba_together(kernel_threads):
    before = get_blas_threads()
    try:
        assert set_compute_threads(1) and numba.get_num_threads() == 1 and get_blas_threads() == 1
        assert set_compute_threads(MOST) and numba.get_num_threads() == MOST and get_blas_threads() == MOST
    finally:
        set_compute_threads(before)
