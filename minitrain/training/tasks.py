"""What a run trains on and how it is scored: next-token prediction (lab 01's task), and the table tasks,
classification (cross-entropy) and regression (MSE or Huber).

A task is what the training loop asks of a batch (`task_train_step` below; `minitrain/training/engine.py`):

    prepare(batch)      the batch as the model reads it (the language model trims padding columns; tables: as is)
    count(batch)        how many loss terms it holds (micro-batches are weighted by it under grad_accumulation)
    loss(model, batch)  the scalar loss Tensor, a mean over those terms
    size(batch)         what the progress display counts per second (tokens; here rows)

plus `measure(model, batches)`, a whole split scored in eval mode without a tape: `{"loss": ..., metric: ...}`.
`LANGUAGE_MODELING` is lab 01's task: the engine trains it through `minitrain.loop.train_step`, the function lab 01
asks students to write, so that their own version trains every language model. The table tasks serve `model.type:
sequential`; their model outputs logits (classification) or values (regression), (B, K).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.losses import huber_loss, huber_terms, mse_loss
from minitrain.autograd.tensor import Tensor
from minitrain.data.batch import trim_padding
from minitrain.evaluation.table_metrics import classification_metrics, regression_metrics
from minitrain.nn import inference
from minitrain.optim.clip import clip_grad_norm_, global_grad_norm


class LanguageModeling:
    """Next-token prediction: the batch trimmed of padding columns, its counted target positions, the model's own
    token-mean loss."""

    name = "language_modeling"
    prepare = staticmethod(trim_padding)

    @staticmethod
    def count(batch: Any) -> int:
        return int(np.count_nonzero(batch.loss_mask))

    @staticmethod
    def loss(model: Any, batch: Any) -> Any:
        _, loss = model(batch.input, batch.target, batch.attn_pad_mask, batch.loss_mask)
        return loss

    @staticmethod
    def size(batch: Any) -> int:
        """Real tokens: what the progress display counts per second."""
        return int(np.count_nonzero(batch.attn_pad_mask))  # a bool mask or segment ids (0 = padding)


LANGUAGE_MODELING = LanguageModeling()


def task_train_step(
    model: Any, optimizer: Any, batches: Sequence[Any], clip_norm: float | None, task: Any
) -> tuple[float, float]:
    """The gradient of one optimizer step for any task, as lab 01's `train_step` computes it for the language
    model: zero the gradient, add each micro-batch's weighted by its share of the step's loss terms (so k
    micro-batches give the gradient of one batch holding them all), measure the norm, clip. Returns (loss, norm)."""
    optimizer.zero_grad()
    batches = [task.prepare(b) for b in batches]
    counts = [task.count(b) for b in batches]
    total = sum(counts)
    loss_value = 0.0
    for batch, count in zip(batches, counts, strict=True):
        loss = task.loss(model, batch)
        weight = count / total
        loss.backward(np.asarray(weight, dtype=loss.dtype))
        loss_value += weight * loss.item()
    if clip_norm is not None:
        return loss_value, clip_grad_norm_(model.buffer, clip_norm)
    return loss_value, global_grad_norm([model.buffer.grad])


class TableTask:
    """The part both table tasks share: batches of rows, scored over a whole split at once."""

    name = "table"

    @staticmethod
    def prepare(batch: Any) -> Any:
        return batch

    @staticmethod
    def count(batch: Any) -> int:
        return len(batch.target)

    size = count

    def outputs(self, model: Any, batches: Iterable) -> tuple[np.ndarray, np.ndarray]:
        """(targets, model outputs) of every row of `batches`, in eval mode without a tape."""
        targets, outputs = [], []
        with inference(model):  # no dropout
            for batch in batches:
                outputs.append(model(batch.input).data)
                targets.append(batch.target)
        return np.concatenate(targets), np.concatenate(outputs)

    def measure(self, model: Any, batches: Iterable, metrics: Sequence[str] = ()) -> dict[str, Any]:
        targets, outputs = self.outputs(model, batches)
        return self.score(targets, outputs, metrics)

    def score(self, targets: np.ndarray, outputs: np.ndarray, metrics: Sequence[str]) -> dict[str, Any]:
        raise NotImplementedError


class Classification(TableTask):
    """Cross-entropy on the logits (a softmax last layer is folded in here); the classifier's metrics."""

    name = "classification"

    @staticmethod
    def loss(model: Any, batch: Any) -> Tensor:
        return F.cross_entropy(model(batch.input), batch.target)

    def score(self, targets: np.ndarray, outputs: np.ndarray, metrics: Sequence[str]) -> dict[str, Any]:
        return classification_metrics(targets, outputs, metrics)


class Regression(TableTask):
    """MSE (or Huber, with `delta`) on the predicted values; the regressor's metrics."""

    name = "regression"

    def __init__(self, loss: str = "mse", delta: float = 1.0) -> None:
        self.loss_name, self.delta = loss, delta

    def loss(self, model: Any, batch: Any) -> Tensor:
        prediction = model(batch.input)
        if self.loss_name == "huber":
            return huber_loss(prediction, batch.target, self.delta)
        return mse_loss(prediction, batch.target)

    def score(self, targets: np.ndarray, outputs: np.ndarray, metrics: Sequence[str]) -> dict[str, Any]:
        d = outputs.astype(np.float64) - targets
        loss = np.mean(huber_terms(d, self.delta) if self.loss_name == "huber" else d * d)
        return {"loss": float(loss), **regression_metrics(targets, outputs, metrics)}


def table_task(task: str, loss: str | None = None, huber_delta: float = 1.0) -> TableTask:
    """The task object for a resolved task name and the config's training.loss."""
    if task == "classification":
        return Classification()
    return Regression(loss or "mse", huber_delta)
