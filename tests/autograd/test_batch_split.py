"""The attention's batch in slices on the cores (kernels/batch_split.py): the same bytes as the batch whole, on
both sides of the threshold, both kernel backends, float32 and float64, without numba's JIT too, for the causal
attention and the grouped one (soft-capped too); the slices cover the batch, run on separate threads, and survive
a fork."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from minitrain.autograd import functional as F
from minitrain.autograd import kernels
from minitrain.autograd.kernels import batch_split
from minitrain.common.runtime import get_blas_threads, one_thread_below, set_blas_threads, stop_blas_workers


def attention_bytes(batch: int, n_head: int, time: int, head_size: int, dtype: type) -> bytes:
    """Forward output, probabilities and the qkv gradient of one random attention, as bytes."""
    rng = np.random.default_rng(batch * 1000 + time)
    width = n_head * head_size
    qkv = rng.standard_normal((batch, time, 3 * width)).astype(dtype)
    dy = rng.standard_normal((batch, time, width)).astype(dtype)
    key_mask = np.arange(time)[None, :] < rng.integers(time // 2, time + 1, size=(batch, 1))
    with one_thread_below(time * head_size * time):  # as functional runs it: a slice's products are on one thread
        out, probs = kernels.active.attention_forward(qkv, n_head, key_mask, None)
        dqkv = kernels.active.attention_backward(qkv, probs, dy, None)
    return out.tobytes() + probs.tobytes() + dqkv.tobytes()


def whole(monkeypatch: pytest.MonkeyPatch, **shape: object) -> bytes:
    with monkeypatch.context() as m:
        m.setattr(batch_split, "SPLIT_MACS", 2**62)
        return attention_bytes(**shape)


def split_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records each_slice's calls that really split: only that path sets BLAS to one thread."""
    calls: list[int] = []
    real = batch_split.blas_threads
    monkeypatch.setattr(batch_split, "blas_threads", lambda n: calls.append(n) or real(n))
    return calls


# B·H·T·T·D: 2²² (below), 2²³ (the threshold itself), 3/2 · 2²³ with an odd batch (uneven slices).
SHAPES = [dict(batch=2, n_head=4, time=128, head_size=32), dict(batch=4, n_head=4, time=128, head_size=32),
          dict(batch=3, n_head=8, time=128, head_size=32)]  # fmt: skip


@pytest.mark.parametrize("backend", kernels.BACKENDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_the_threshold_splits_and_the_bytes_stay(monkeypatch, backend, shape):
    monkeypatch.setattr(batch_split, "workers", lambda: 2)
    with kernels.use_backend(backend):
        expected = whole(monkeypatch, **shape, dtype=np.float32)
        calls = split_calls(monkeypatch)
        got = attention_bytes(**shape, dtype=np.float32)
    assert got == expected
    macs = shape["batch"] * shape["n_head"] * shape["time"] ** 2 * shape["head_size"]
    assert calls == ([1, 1] if macs >= 2**23 else [])  # forward and backward split from 2²³ on, not below


@pytest.mark.parametrize("backend", kernels.BACKENDS)
@pytest.mark.parametrize("n_slices", [2, 3, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forced_slices_at_the_lab_shape_give_the_same_bytes(monkeypatch, backend, n_slices, dtype):
    lab = dict(batch=8, n_head=4, time=32, head_size=16, dtype=dtype)
    with kernels.use_backend(backend):
        expected = whole(monkeypatch, **lab)
        monkeypatch.setattr(batch_split, "SPLIT_MACS", 0)
        monkeypatch.setattr(batch_split, "workers", lambda: n_slices)
        calls = split_calls(monkeypatch)
        assert attention_bytes(**lab) == expected
    assert calls == [1, 1]  # forward and backward each went through the split


def test_the_lab_shape_is_not_split():
    assert batch_split.SPLIT_MACS > 8 * 4 * 32 * 32 * 16


def test_without_numba_jit_too():
    """NUMBA_DISABLE_JIT=1 picks the NumPy kernels; their slices must agree with the whole as well."""
    script = (
        "from minitrain.autograd.kernels import batch_split\n"
        "from minitrain.autograd import kernels\n"
        "from test_batch_split import attention_bytes\n"
        "import numpy as np\n"
        "assert kernels.active.name == 'numpy'\n"
        "batch_split.SPLIT_MACS = 2**62\n"
        "a = attention_bytes(batch=5, n_head=2, time=16, head_size=8, dtype=np.float32)\n"
        "batch_split.SPLIT_MACS, batch_split.workers = 0, lambda: 2\n"
        "b = attention_bytes(batch=5, n_head=2, time=16, head_size=8, dtype=np.float32)\n"
        "from test_batch_split import grouped_bytes\n"
        "c = grouped_bytes(batch=5, n_head=4, n_kv_head=2, time=16, head_size=8)\n"
        "batch_split.SPLIT_MACS = 2**62\n"
        "print(a == b and c == grouped_bytes(batch=5, n_head=4, n_kv_head=2, time=16, head_size=8))\n"
    )
    here = str(Path(__file__).parent)  # this file's helpers, imported by module name as the suite does
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1", "PYTHONPATH": os.pathsep.join([os.getcwd(), here])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def grouped_bytes(batch: int, n_head: int, n_kv_head: int, time: int, head_size: int, dtype: type = np.float32,
                  softcap: float | None = None) -> bytes:
    """Forward output, probabilities and dq, dk, dv of one random grouped attention (padded keys), as bytes."""
    rng = np.random.default_rng(batch * 1000 + time)
    q = rng.standard_normal((batch, time, n_head, head_size)).astype(dtype)
    k, v = (rng.standard_normal((batch, time, n_kv_head, head_size)).astype(dtype) for _ in range(2))
    dy = rng.standard_normal((batch, time, n_head * head_size)).astype(dtype)
    allowed = F.attention_mask(time, time, np.arange(time)[None, :] < rng.integers(time // 2, time + 1, (batch, 1)))
    with one_thread_below(n_head // n_kv_head * time * head_size * time):  # as functional runs it
        y, probs = kernels.active.grouped_attention_forward(q, k, v, allowed, None, softcap)
        grads = kernels.active.grouped_attention_backward(q, k, v, probs, dy, None, softcap)
    return b"".join(np.ascontiguousarray(a).tobytes() for a in (y, probs, *grads))


# (B, H_kv) blocks of (G·T, D)·(D, T): 4·2·256·128·32 = 2²³ multiply-adds in all, 2²⁰ per block (one BLAS thread).
GROUPED = dict(batch=4, n_head=4, n_kv_head=2, time=128, head_size=32)


@pytest.mark.parametrize("backend", kernels.BACKENDS)
@pytest.mark.parametrize(("dtype", "softcap"), [(np.float32, None), (np.float64, None), (np.float32, 5.0)])
def test_grouped_attention_splits_from_the_threshold_and_the_bytes_stay(monkeypatch, backend, dtype, softcap):
    monkeypatch.setattr(batch_split, "workers", lambda: 2)
    with kernels.use_backend(backend):
        with monkeypatch.context() as m:
            m.setattr(batch_split, "SPLIT_MACS", 2**62)
            expected = grouped_bytes(**GROUPED, dtype=dtype, softcap=softcap)
        calls = split_calls(monkeypatch)
        assert grouped_bytes(**GROUPED, dtype=dtype, softcap=softcap) == expected
        assert calls == [1, 1]  # forward and backward
        grouped_bytes(**{**GROUPED, "batch": 2})  # 2²² in all: below the threshold, whole
        assert calls == [1, 1]


def test_grouped_attention_keeps_big_products_whole(monkeypatch):
    """From SINGLE_THREAD_MACS per block the products keep BLAS's threads, so the batch is not split."""
    monkeypatch.setattr(batch_split, "workers", lambda: 2)
    calls = split_calls(monkeypatch)
    grouped_bytes(batch=2, n_head=2, n_kv_head=1, time=512, head_size=32)  # 1024·32·512 = 2²⁴ per block
    assert calls == []


@pytest.mark.parametrize("backend", kernels.BACKENDS)
def test_grouped_attention_forced_slices_at_a_small_shape(monkeypatch, backend):
    small = dict(batch=5, n_head=6, n_kv_head=3, time=16, head_size=8)
    with kernels.use_backend(backend):
        expected = grouped_bytes(**small)
        monkeypatch.setattr(batch_split, "SPLIT_MACS", 0)
        monkeypatch.setattr(batch_split, "workers", lambda: 3)
        calls = split_calls(monkeypatch)
        assert grouped_bytes(**small) == expected
    assert calls == [1, 1]


def test_slices_cover_the_batch_in_order():
    for batch in (1, 2, 5, 16):
        for n in (1, 2, 3, 16):
            pieces = batch_split.slices(batch, n)
            assert len(pieces) == min(batch, n)
            assert [i for s in pieces for i in range(s.start, s.stop)] == list(range(batch))
            assert max(s.stop - s.start for s in pieces) - min(s.stop - s.start for s in pieces) <= 1


def test_slices_run_on_their_own_threads_with_one_blas_thread(monkeypatch):
    monkeypatch.setattr(batch_split, "workers", lambda: 3)
    seen: dict[int, tuple[int, int | None]] = {}
    barrier = threading.Barrier(3, timeout=10)  # only passes if the three slices run at the same time

    def part(s: slice) -> None:
        barrier.wait()
        seen[s.start] = (threading.get_ident(), get_blas_threads())

    before = get_blas_threads()
    batch_split.each_slice(part, batch=6, macs=batch_split.SPLIT_MACS)
    assert sorted(seen) == [0, 2, 4]
    assert len({ident for ident, _ in seen.values()}) == 3
    assert seen[0][0] == threading.get_ident()  # the caller takes the first slice
    assert {n for _, n in seen.values()} <= {1, None}
    assert get_blas_threads() == before  # restored


def test_below_the_threshold_the_caller_does_it_all(monkeypatch):
    monkeypatch.setattr(batch_split, "workers", lambda: 2)
    seen = []
    batch_split.each_slice(lambda s: seen.append((s, threading.get_ident())), batch=4, macs=batch_split.SPLIT_MACS - 1)
    assert seen == [(slice(0, 4), threading.get_ident())]


def test_an_error_in_a_slice_reaches_the_caller(monkeypatch):
    monkeypatch.setattr(batch_split, "workers", lambda: 2)

    def part(s: slice) -> None:
        if s.start > 0:
            raise ValueError("slice failed")

    with pytest.raises(ValueError, match="slice failed"):
        batch_split.each_slice(part, batch=4, macs=batch_split.SPLIT_MACS)


def test_after_fork_the_child_makes_its_own_pool(monkeypatch):
    monkeypatch.setattr(batch_split, "workers", lambda: 2)
    batch_split.each_slice(lambda s: None, batch=2, macs=batch_split.SPLIT_MACS)  # the parent's pool exists
    assert batch_split._pools
    pid = os.fork()
    if pid == 0:  # child: a stale pool would hang on submit; the alarm turns a hang into a failure
        signal.alarm(10)
        try:
            done = []
            batch_split.each_slice(lambda s: done.append(s.start), batch=2, macs=batch_split.SPLIT_MACS)
            os._exit(0 if sorted(done) == [0, 1] else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_stopping_blas_workers_keeps_the_count():
    before = get_blas_threads()
    try:
        set_blas_threads(2)
        assert stop_blas_workers() is (get_blas_threads() is not None)
        assert get_blas_threads() == 2
        a = np.random.default_rng(0).standard_normal((300, 300))
        assert np.array_equal(a @ a, a @ a)  # BLAS works again after its workers were stopped
    finally:
        if before is not None:
            set_blas_threads(before)


def test_idle_blas_workers_are_stopped_after_the_count_is_one(monkeypatch):
    """Setting a count restarts stopped workers, so stopping them first would leave a fresh one spinning; and a count
    of one already (grouped attention's `one_thread_below`) may follow a 2-thread product whose worker still spins."""
    monkeypatch.setattr(batch_split, "workers", lambda: 2)
    counts_when_stopped: list[int | None] = []
    monkeypatch.setattr(batch_split, "stop_blas_workers", lambda: counts_when_stopped.append(get_blas_threads()))
    before = get_blas_threads()
    assert before is not None  # NumPy's wheels carry OpenBLAS (tests/common/test_runtime.py assumes it too)
    try:
        set_blas_threads(2)
        batch_split.each_slice(lambda s: None, batch=2, macs=batch_split.SPLIT_MACS)
        assert counts_when_stopped == [1]
        assert get_blas_threads() == 2
        set_blas_threads(1)
        batch_split.each_slice(lambda s: None, batch=2, macs=batch_split.SPLIT_MACS)
        assert counts_when_stopped == [1, 1]
        assert get_blas_threads() == 1
    finally:
        set_blas_threads(before)
