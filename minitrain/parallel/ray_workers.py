"""The Ray backend: data-parallel workers as Ray actors, on this machine or a cluster (`runtime.data_parallel.address`).

    workers = RayWorkers(spec, n, micro_batches, address)    ray.init(address), then n actors building a Replica
    loss, grad_norm = workers.gradients(model, batches, clip_norm)
    workers.close()                                           the actors killed; a Ray this started shut down

Per step the parameters go into Ray's object store once (`ray.put`), each actor gets a reference to them and its
micro-batches, and returns one (loss, gradient) per micro-batch; `ray.get` of the actors' results in worker order
gives the gradients in micro-batch order, summed by reduce.py as the local backend sums them. Bytes per step and
worker: the parameters in, the gradients out (docs/distributed.md). An actor that dies (its node lost, the process
killed) is one error naming the worker; the run's last checkpoint resumes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minitrain.common.errors import UserError
from minitrain.common.extras import require
from minitrain.data.batch import Batch
from minitrain.parallel.reduce import combine, split_step
from minitrain.parallel.replica import Replica, ReplicaSpec


class _Actor:
    """What runs in a Ray actor: a Replica and a step over its micro-batches."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from minitrain.common.runtime import set_blas_threads

        set_blas_threads(1)
        self.replica = Replica(spec)

    def pid(self) -> int:
        import os

        return os.getpid()

    def gradients(self, params: Any, batches: list, weights: list[float], alone: bool) -> list[tuple[float, Any]]:
        out = []
        for batch, weight in zip(batches, weights, strict=True):
            loss = self.replica.gradient(params, Batch(*batch), weight, alone)
            out.append((loss, self.replica.model.buffer.grad.copy()))
        return out


class RayWorkers:
    """`n` Ray actors, each computing micro_batches / n micro-batches of every step (n divides it: the config's
    rule, minitrain/config/parallel_rules.py)."""

    def __init__(self, spec: ReplicaSpec, n: int, micro_batches: int, address: str | None) -> None:
        ray = self.ray = require("ray", "ray", "runtime.data_parallel.backend ray")
        self.started = not ray.is_initialized()
        if self.started:
            local = {"num_cpus": n, "include_dashboard": False} if address is None else {}
            ray.init(address=address, log_to_driver=False, configure_logging=False, **local)
        self.per = micro_batches // n
        actor = ray.remote(num_cpus=1, max_restarts=0)(_Actor)
        self.actors = [actor.remote(spec.to_dict()) for _ in range(n)]
        self.pids = self._get([a.pid.remote() for a in self.actors], "while starting")

    def gradients(self, model: Any, batches: Sequence[Any], clip_norm: float | None,
                  step: int | None = None) -> tuple[float, float]:
        step = split_step(batches)
        params = self.ray.put(model.buffer.data)
        per = self.per
        futures = [a.gradients.remote(params, [tuple(b) for b in step.batches[w * per:(w + 1) * per]],
                                      step.weights[w * per:(w + 1) * per], step.alone)
                   for w, a in enumerate(self.actors)]
        answers = self._get(futures, "during a step (its update was not applied)")
        results = [pair for worker in answers for pair in worker]
        return combine(model, [g for _, g in results], [loss for loss, _ in results], step, clip_norm)

    def _get(self, futures: list, during: str) -> list:
        """ray.get of each worker's future in worker order; an actor that died or raised is one UserError."""
        out = []
        for w, future in enumerate(futures):
            try:
                out.append(self.ray.get(future))
            except self.ray.exceptions.RayActorError as e:
                raise UserError(f"data-parallel worker {w} (Ray actor) died {during}: "
                                f"{str(e).splitlines()[0]}") from None
            except self.ray.exceptions.RayTaskError as e:
                raise UserError(f"data-parallel worker {w} (Ray actor) failed {during}: "
                                f"{str(e).splitlines()[-1]}") from None
        return out

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors = []
        if self.started:
            self.ray.shutdown()
