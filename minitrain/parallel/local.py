"""The local backend: data-parallel workers on this machine, the training process and worker processes started
once per run.

    workers = LocalWorkers(model, micro_batches, rows, cols, n)   worker 0 is this process; n − 1 more start
    loss, grad_norm = workers.gradients(model, batches, clip_norm)    one step (reduce.py's sum and clip)
    workers.close()                                 stop them, remove the shared block

Worker w computes micro-batches w·m .. w·m + m − 1 (m = micro-batches / n) into their gradient slots of the shared
block (shared.py). Worker 0 is the training process itself, on its own model, as rank 0 is in PyTorch's DDP: it
would otherwise sit idle while the others compute, and its share needs no parameters copied in and no wake-up (the
lab step on 2 workers: 2.35–2.38 ms against 2.57 ms with two worker processes, docs/distributed.md). Per step the
training process writes the parameters once and the other workers' micro-batches into their slots, sends each worker
process b"go", computes its own micro-batches, then reads each b"ok" in worker order. Nothing is pickled.

Every worker runs 1 BLAS thread (n workers on n cores; more threads would only contend); worker 0 computes at this
process's count, which start_workers (workers.py) and the measured choice's switch set to 1. A worker process
ignores SIGINT and SIGTERM (Ctrl-C reaches the whole process group: the training process finishes the step, saves a
checkpoint and then stops its workers), and dies with the training process however that ends, `kill -9` included
(common/lifeline.py die_with). A worker that dies stops the run with one error naming it; the run's last checkpoint
resumes bit for bit, since a step's update is applied only after every gradient came back.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection
from typing import Any

from minitrain.common.errors import UserError
from minitrain.common.lifeline import die_with
from minitrain.common.runtime import keep_freed_memory, set_blas_threads
from minitrain.parallel.reduce import combine, split_step
from minitrain.parallel.replica import Replica, ReplicaSpec, micro_batch_gradient
from minitrain.parallel.shared import Layout, SharedBlock

_GO, _OK, _QUIT, _READY, _FAILED = b"go", b"ok", b"quit", b"ready", b"failed: "
STOP_SECONDS = 5.0  # how long close() waits for a worker to leave, and a step for its workers after Ctrl-C
TIMEOUT_SECONDS = 120.0  # runtime.data_parallel.timeout's default: a worker silent this long is stalled
_SLICE = 0.1  # the wait for an answer wakes this often, to see a Ctrl-C (the loop's handler only records it)
_DURING_A_STEP = "during a step (its update was not applied)"


# The environment while workers start: a spawned worker reads it before it imports NumPy, so its BLAS, OpenMP and
# numba never start thread pools that would only contend (restored once they are started).
_ONE_THREAD = dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"), "1")


@contextlib.contextmanager
def _one_thread_environment() -> Iterator[None]:
    """`_ONE_THREAD` set, then each name restored: only these names change (`mock.patch.dict` clears the whole
    environment on the way out, which another thread could read meanwhile)."""
    saved = {name: os.environ.get(name) for name in _ONE_THREAD}
    os.environ.update(_ONE_THREAD)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _worker_main(name: str, layout: dict[str, Any], spec: dict[str, Any], slots: list[int],
                 conn: Connection, parent: int) -> None:
    """A worker's life: build the replica, then compute its micro-batches each time it hears "go"."""
    die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    set_blas_threads(1)  # and in case NumPy was imported before the environment said so
    # As runtime.configure does in the training process: glibc then keeps each step's large temporaries for reuse.
    # Without it a worker's micro-batch after the warm-up ran 2.4 -> 3.4 ms (benchmarks/bench_data_parallel.py).
    keep_freed_memory()
    block, code = SharedBlock.attach(name, layout), 0
    try:
        replica = Replica(spec)
        replica.warm_up(block.layout.cols)
        conn.send_bytes(_READY)
        while (message := conn.recv_bytes()) != _QUIT:
            alone = message == _GO + b"1"
            for j in slots:
                batch, weight = block.read_batch(j)
                block.losses[j][0] = replica.gradient(block.params, batch, weight, alone)
                block.grads[j][...] = replica.model.buffer.grad
                del batch
            conn.send_bytes(_OK)
    except (EOFError, BrokenPipeError):  # the training process is gone: nothing to report to
        pass
    except Exception as e:  # a bug: said once, in the training process's error line
        conn.send_bytes(_FAILED + f"{type(e).__name__}: {e}".encode())
        code = 1
    finally:
        block.close()
    # Now, without the interpreter's teardown (numba's and LLVM's take seconds on a busy machine): nothing is
    # left to flush, and the training process is waiting for this worker to be gone.
    os._exit(code)


class LocalWorkers:
    """`n` workers, this process and n − 1 processes, over one shared block; `gradients` runs a step, `close`
    ends them. `n` divides `micro_batches`: the config says so (minitrain/config/parallel_rules.py)."""

    def __init__(self, model: Any, micro_batches: int, rows: int, cols: int, n: int,
                 timeout: float = TIMEOUT_SECONDS) -> None:
        if micro_batches % n:  # a config is checked for it (parallel_rules.py); a direct caller is told here
            raise ValueError(f"{n} workers do not divide {micro_batches} micro-batches")
        buffer, spec = model.buffer, ReplicaSpec.of(model)  # micro-batches of at most rows × cols
        layout = Layout(micro_batches, rows, cols, buffer.data.size, buffer.grad.size, buffer.data.dtype.name)
        self.n, self.per, self.timeout = n, layout.slots // n, timeout
        self.block = SharedBlock.create(layout)
        self.processes: list[Any] = []  # worker w ≥ 1 is processes[w − 1]
        self.seconds: dict[str, float] = {}  # the last step's: handoff, own (worker 0's share), wait, reduce
        self.conns: list[Connection] = []
        context = multiprocessing.get_context("spawn")  # not fork: the parent may hold threads and numba state
        per = self.per
        try:
            with _one_thread_environment():
                for w in range(1, n):
                    ours, theirs = context.Pipe()
                    process = context.Process(
                        target=_worker_main, name=f"minitrain-dp-worker-{w}", daemon=True,
                        args=(self.block.name, layout.to_dict(), spec.to_dict(),
                              list(range(w * per, (w + 1) * per)), theirs, os.getpid()))
                    process.start()
                    theirs.close()  # only the worker holds its end: its death is an end-of-file here
                    self.processes.append(process)
                    self.conns.append(ours)
            # The start (imports, numba's warm-up: seconds on a busy machine) is never given less than the default.
            self._collect(_READY, "while starting", max(timeout, TIMEOUT_SECONDS))
            self.block.unlink()  # every worker has it mapped: now no death, kill -9 included, can leave it behind
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        """The worker processes' (workers 1 .. n − 1)."""
        return [p.pid for p in self.processes]

    def gradients(self, model: Any, batches: Sequence[Any], clip_norm: float | None,
                  step: int | None = None) -> tuple[float, float]:
        """Step `step`'s (loss, grad_norm), the summed (and clipped) gradient in model.buffer.grad."""
        start = time.perf_counter()
        number, step = step, split_step(batches)
        block, per = self.block, self.per
        if self.processes:
            block.params[...] = model.buffer.data
        for j in range(per, len(step.batches)):
            block.write_batch(j, step.batches[j], step.weights[j])
        go = _GO + (b"1" if step.alone else b"")
        during = _DURING_A_STEP if number is None else _DURING_A_STEP.replace("a step", f"step {number}")
        for w, (process, conn) in enumerate(zip(self.processes, self.conns, strict=True), start=1):
            try:
                conn.send_bytes(go)
            except (BrokenPipeError, ConnectionResetError):  # it died since the last step
                raise self._died(w, process, during) from None
        sent = time.perf_counter()
        for j in range(per):  # worker 0's share, here, while the others compute theirs
            block.losses[j][0] = micro_batch_gradient(model, step.batches[j], step.weights[j], step.alone)
            block.grads[j][...] = model.buffer.grad
        own = time.perf_counter()
        self._collect(_OK, during, self.timeout)
        answered = time.perf_counter()
        out = combine(model, block.grads, [loss[0] for loss in block.losses], step, clip_norm)
        self.seconds = {"handoff": sent - start, "own": own - sent, "wait": answered - own,
                        "reduce": time.perf_counter() - answered}
        return out

    def _collect(self, expected: bytes, during: str, seconds: float) -> None:
        """Read every worker's answer, in worker order; a worker that died, failed or stays silent for `seconds`
        (stopped, stuck) is one UserError. After a Ctrl-C or SIGTERM (recorded by the loop, which stops
        after this step) the workers get STOP_SECONDS more, then the step is abandoned as a second Ctrl-C would."""
        deadline, stopping = time.monotonic() + seconds, False
        for w, (process, conn) in enumerate(zip(self.processes, self.conns, strict=True), start=1):
            while not conn.poll(_SLICE):
                if not stopping and getattr(signal.getsignal(signal.SIGINT), "signum", None) is not None:
                    deadline, stopping = min(deadline, time.monotonic() + STOP_SECONDS), True
                if time.monotonic() > deadline:
                    if stopping:
                        raise KeyboardInterrupt
                    raise UserError(f"data-parallel worker {w} (pid {process.pid}) gave no answer within "
                                    f"runtime.data_parallel.timeout ({seconds:g} s) {during}: stopped or stuck")
            try:
                answer = conn.recv_bytes()
            except (EOFError, ConnectionResetError):
                raise self._died(w, process, during) from None
            if answer != expected:
                raise UserError(f"data-parallel worker {w} (pid {process.pid}) failed {during}: "
                                f"{answer.removeprefix(_FAILED).decode(errors='replace')}")

    @staticmethod
    def _died(w: int, process: Any, during: str) -> UserError:
        """The error for worker `w`, found dead: how it ended, when its exit status comes within STOP_SECONDS."""
        process.join(timeout=STOP_SECONDS)
        code, how = process.exitcode, ""
        if code is not None:
            how = f" (killed by {signal.Signals(-code).name})" if code < 0 else f" (exit code {code})"
        return UserError(f"data-parallel worker {w} (pid {process.pid}) died {during}{how}")

    def close(self) -> None:
        """Ask every worker process to leave, wait a little, kill any that stays; remove the shared block."""
        for conn in self.conns:
            with contextlib.suppress(OSError):  # already gone
                conn.send_bytes(_QUIT)
        for process in self.processes:
            process.join(timeout=STOP_SECONDS)
            if process.is_alive():
                process.kill()
                process.join()
        for conn in self.conns:
            conn.close()
        self.processes, self.conns = [], []
        if self.block is not None:
            self.block.close()
            self.block = None
