"""minitrain.common.runtime: the BLAS thread count and the allocator setting take effect and leave results unchanged."""

import os

import numpy as np
import pytest

from minitrain.common.runtime import (
    blas_threads,
    blas_threads_for,
    configure,
    get_blas_threads,
    keep_freed_memory,
    one_thread_below,
    set_blas_threads,
)


def test_blas_threads_can_be_set_and_read_back():
    before = get_blas_threads()
    assert before is not None and before >= 1  # NumPy's wheels ship OpenBLAS, and we found it
    try:
        assert set_blas_threads(1) and get_blas_threads() == 1
        a = np.random.default_rng(0).standard_normal((300, 200)).astype(np.float32)
        one_thread = a @ a.T
        assert set_blas_threads(2) and get_blas_threads() == 2
        np.testing.assert_allclose(a @ a.T, one_thread, rtol=1e-5, atol=1e-4)
    finally:
        set_blas_threads(before)
    with pytest.raises(ValueError, match="at least 1"):
        set_blas_threads(0)


def test_small_products_run_on_one_thread_and_the_count_comes_back():
    before = get_blas_threads()
    try:
        set_blas_threads(2)
        with one_thread_below(2**20):
            assert get_blas_threads() == 1
        assert get_blas_threads() == 2
        with one_thread_below(2**24):  # a big product keeps every thread
            assert get_blas_threads() == 2
    finally:
        set_blas_threads(before)


def test_thread_rule_single_for_the_lab_size_all_cores_when_large():
    assert blas_threads_for(d_model=64, rows=8 * 32) == 1
    assert blas_threads_for(d_model=256, rows=16 * 128) == (os.cpu_count() or 1)


def test_configure_reports_what_it_set():
    before = get_blas_threads()
    try:
        assert configure(d_model=64, rows=256) == {"blas_threads": 1, "keep_freed_memory": True}
        assert keep_freed_memory()  # glibc accepts it again (idempotent)
    finally:
        set_blas_threads(before)


def test_blas_threads_block_restores_the_previous_count():
    before = get_blas_threads()
    try:
        set_blas_threads(1)
        with blas_threads(2):
            assert get_blas_threads() == 2
        assert get_blas_threads() == 1
        with pytest.raises(RuntimeError), blas_threads(2):
            raise RuntimeError("a failing evaluation still restores the count")
        assert get_blas_threads() == 1
    finally:
        set_blas_threads(before)
