"""The training process's side of a data-parallel step: the micro-batches' weights before the workers compute,
the ordered sum and the clip after, exactly as `minitrain/loop.py`'s train_step forms them.

    step = split_step(batches)                         trimmed micro-batches, their weights n_i / N, alone?
    loss, grad_norm = combine(model, grads, losses, step, clip_norm)   Σ g_i in order into model.buffer.grad

train_step's loss is Σ_i w_i·loss_i summed in order from 0.0 (one micro-batch: its loss), its gradient
((g_0 + g_1) + g_2) + ..., then the global norm measured (and the gradient clipped to `clip_norm`): the same
float operations in the same order here give the same bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from minitrain.data.batch import Batch, trim_padding
from minitrain.optim.clip import clip_grad_norm_, global_grad_norm


@dataclass(frozen=True)
class Step:
    """One step's micro-batches, trimmed, with their loss weights (counted tokens / the step's counted tokens)."""

    batches: list[Batch]
    weights: list[float]

    @property
    def alone(self) -> bool:
        """One micro-batch: train_step then seeds no weight and takes its loss as it is."""
        return len(self.batches) == 1


def split_step(batches: Sequence[Batch]) -> Step:
    """The step's micro-batches trimmed (trim_padding), each weighted n_i / N as train_step weights it."""
    trimmed = [trim_padding(b) for b in batches]
    counts = [int(np.count_nonzero(b.loss_mask)) for b in trimmed]
    total = sum(counts)
    return Step(trimmed, [count / total for count in counts])


def combine(model: Any, grads: Sequence[np.ndarray], losses: Sequence[float], step: Step,
            clip_norm: float | None) -> tuple[float, float]:
    """Sum `grads` (micro-batch order) into model.buffer.grad and return (loss, grad_norm) as train_step does."""
    grad = model.buffer.grad
    np.copyto(grad, grads[0])
    for g in grads[1:]:
        np.add(grad, g, out=grad)
    if step.alone:
        loss_value = losses[0]
    else:
        loss_value = 0.0
        for weight, loss in zip(step.weights, losses, strict=True):
            loss_value += weight * loss
    if clip_norm is not None:
        return loss_value, clip_grad_norm_(model.buffer, clip_norm)
    return loss_value, global_grad_norm([grad])
