"""The local backend: data-parallel worker processes on this machine, started once per run.

    workers = LocalWorkers(spec, layout, n)        start n processes; each builds its Replica, says "ready"
    loss, grad_norm = workers.gradients(model, batches, clip_norm)    one step (reduce.py's sum and clip)
    workers.close()                                 stop them, remove the shared block

Per step the training process writes the parameters once and each micro-batch into its slot of the shared block
(shared.py), sends every worker b"go", and reads each worker's b"ok" in worker order; worker w computes micro-batches
w·m .. w·m + m − 1 (m = micro-batches / workers) into their gradient slots. Nothing is pickled per step.

Each worker runs 1 BLAS thread (two workers on two cores; more threads would only contend), ignores SIGINT and
SIGTERM (Ctrl-C reaches the whole process group: the training process finishes the step, saves a checkpoint and
then stops its workers), and dies with the training process however that ends, `kill -9` included
(common/lifeline.py die_with). A worker that dies stops the run with one error naming it; the run's last
checkpoint resumes bit for bit, since a step's update is applied only after every gradient came back.
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
from minitrain.parallel.reduce import combine, split_step
from minitrain.parallel.replica import Replica, ReplicaSpec
from minitrain.parallel.shared import Layout, SharedBlock

_GO, _OK, _QUIT, _READY, _FAILED = b"go", b"ok", b"quit", b"ready", b"failed: "
STOP_SECONDS = 5.0  # how long close() waits for a worker to leave before killing it


_ONE_THREAD = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


@contextlib.contextmanager
def _one_thread_environment() -> Iterator[None]:
    """This process's environment with 1 thread for BLAS, OpenMP and numba, while workers are started: a spawned
    worker reads it before it imports NumPy, so its libraries never start thread pools that would only contend."""
    saved = {name: os.environ.get(name) for name in _ONE_THREAD}
    os.environ.update(dict.fromkeys(_ONE_THREAD, "1"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _worker_main(index: int, name: str, layout: dict[str, Any], spec: dict[str, Any], slots: list[int],
                 conn: Connection, parent: int) -> None:
    """A worker's life: build the replica, then compute its micro-batches each time it hears "go"."""
    die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from minitrain.common.runtime import set_blas_threads

    set_blas_threads(1)  # and in case NumPy was imported before the environment said so
    block, code = SharedBlock.attach(name, layout), 0
    try:
        replica = Replica(spec)
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
    """`n` worker processes over one shared block; `gradients` runs a step, `close` ends them."""

    def __init__(self, spec: ReplicaSpec, layout: Layout, n: int) -> None:
        if layout.slots % n:
            raise ValueError(f"data parallel: {n} workers do not divide {layout.slots} micro-batches")
        self.block = SharedBlock.create(layout)
        self.processes: list[Any] = []
        self.seconds: dict[str, float] = {}  # the last step's: handoff (params, batches written), wait, reduce
        self.conns: list[Connection] = []
        context = multiprocessing.get_context("spawn")  # not fork: the parent may hold threads and numba state
        per = layout.slots // n
        try:
            with _one_thread_environment():
                for w in range(n):
                    ours, theirs = context.Pipe()
                    process = context.Process(
                        target=_worker_main, name=f"minitrain-dp-worker-{w}", daemon=True,
                        args=(w, self.block.name, layout.to_dict(), spec.to_dict(),
                              list(range(w * per, (w + 1) * per)), theirs, os.getpid()))
                    process.start()
                    theirs.close()  # only the worker holds its end: its death is an end-of-file here
                    self.processes.append(process)
                    self.conns.append(ours)
            self._collect(_READY, "while starting")
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def gradients(self, model: Any, batches: Sequence[Any], clip_norm: float | None) -> tuple[float, float]:
        """One step's (loss, grad_norm), the summed (and clipped) gradient in model.buffer.grad."""
        start = time.perf_counter()
        step = split_step(batches)
        block = self.block
        block.params[...] = model.buffer.data
        for j, (batch, weight) in enumerate(zip(step.batches, step.weights, strict=True)):
            block.write_batch(j, batch, weight)
        go = _GO + (b"1" if step.alone else b"")
        for conn in self.conns:
            conn.send_bytes(go)
        sent = time.perf_counter()
        self._collect(_OK, "during a step (its update was not applied)")
        answered = time.perf_counter()
        out = combine(model, block.grads, [loss[0] for loss in block.losses], step, clip_norm)
        self.seconds = {"handoff": sent - start, "wait": answered - sent, "reduce": time.perf_counter() - answered}
        return out

    def _collect(self, expected: bytes, during: str) -> None:
        """Read every worker's answer, in worker order; a worker that died or failed is one UserError."""
        for w, conn in enumerate(self.conns):
            try:
                answer = conn.recv_bytes()
            except (EOFError, ConnectionResetError):
                raise UserError(f"data-parallel worker {w} (pid {self.processes[w].pid}) died {during}"
                                f"{self._how(w)}") from None
            if answer != expected:
                raise UserError(f"data-parallel worker {w} (pid {self.processes[w].pid}) failed {during}: "
                                f"{answer.removeprefix(_FAILED).decode(errors='replace')}")

    def _how(self, w: int) -> str:
        process = self.processes[w]
        process.join(timeout=STOP_SECONDS)
        code = process.exitcode
        if code is None:
            return ""
        if code < 0:
            return f" (killed by {signal.Signals(-code).name})"
        return f" (exit code {code})"

    def close(self) -> None:
        """Ask every worker to leave, wait a little, kill any that stays; remove the shared block."""
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
