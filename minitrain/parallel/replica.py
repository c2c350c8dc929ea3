"""What a data-parallel worker computes: the gradient of one micro-batch, on its own copy of the model.

    spec = ReplicaSpec.of(model)              in the training process: what rebuilds the model (plain data)
    replica = Replica(spec)                   in the worker: the same architecture, dtype, frozen names, layout
    loss = replica.gradient(params, batch, weight, alone)   the weights given, then g = ∂(weight·loss)/∂θ
    loss = micro_batch_gradient(model, batch, weight, alone)  the same on a model's own weights (worker 0's)

The worker's model never trains: before each step it takes the training process's parameters (the whole flat
buffer, frozen ones included), so its initial weights do not matter. `micro_batch_gradient` is train_step's
(minitrain/loop.py) for one micro-batch: the gradient from zero, backward seeded with weight = n_i / N (the
micro-batch's share of the step's counted tokens), or unseeded when the step has one micro-batch (`alone`), which
is what train_step does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from minitrain.data.batch import Batch
from minitrain.models.registry import build_model


@dataclass(frozen=True)
class ReplicaSpec:
    """The model's config (its constructor keys), dtype name, frozen parameter names and gradient checkpointing:
    all a worker needs to build a model with the same flat parameter layout."""

    config: dict[str, Any]
    dtype: str
    frozen: tuple[str, ...] = ()
    gradient_checkpointing: bool = False
    names: tuple[str, ...] = ()  # the trainable names in layout order, to check the rebuilt layout against

    @classmethod
    def of(cls, model: Any) -> ReplicaSpec:
        buffer = model.buffer
        return cls(dict(model.config), buffer.data.dtype.name, tuple(buffer.frozen_names),
                   bool(getattr(model, "gradient_checkpointing", False)), tuple(buffer.names))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Replica:
    """A model rebuilt from a ReplicaSpec, in train mode, its parameters packed in the same layout."""

    def __init__(self, spec: ReplicaSpec | dict[str, Any]) -> None:
        spec = spec if isinstance(spec, ReplicaSpec) else ReplicaSpec(**spec)
        model = build_model(spec.config, rng=0, dtype=np.dtype(spec.dtype).type)
        if spec.gradient_checkpointing:
            model.gradient_checkpointing = True
        if spec.frozen:
            model.freeze(list(spec.frozen))
        model.pack_parameters()
        if spec.names and tuple(model.buffer.names) != tuple(spec.names):
            raise RuntimeError("data-parallel worker: the rebuilt model's parameter layout differs from the run's")
        self.model = model

    def warm_up(self, cols: int) -> None:
        """One line of `cols` tokens through forward and backward, the result thrown away: numba loads its kernels
        now, while the pool starts, instead of inside the first step this worker computes (measured: 0.2–0.3 s,
        paid by a measured run's first block on workers, benchmarks/bench_choice.py). The next `gradient` starts
        from the parameters it is given and a zero gradient, so this changes no bytes."""
        ids, mask = np.zeros((1, cols), dtype=np.int64), np.ones((1, cols), dtype=np.bool_)
        micro_batch_gradient(self.model, Batch(ids, ids, mask, mask), 1.0, alone=True)

    def gradient(self, params: np.ndarray, batch: Batch, weight: float, alone: bool) -> float:
        """micro_batch_gradient on the parameters `params` (the training process's flat buffer)."""
        np.copyto(self.model.buffer.data, params)
        return micro_batch_gradient(self.model, batch, weight, alone)


def micro_batch_gradient(model: Any, batch: Batch, weight: float, alone: bool) -> float:
    """The micro-batch's loss (a float); its gradient from zero, seeded with `weight` unless `alone`, in
    `model.buffer.grad`. `batch` is already trimmed (data/batch.py trim_padding), as train_step trims."""
    model.buffer.zero_grad()
    _, loss = model(batch.input, batch.target, batch.attn_pad_mask, batch.loss_mask)
    if alone:
        loss.backward()
    else:
        loss.backward(np.asarray(weight, dtype=loss.dtype))
    return loss.item()
