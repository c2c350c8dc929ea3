"""The loss registry: every loss of minitrain by name, with the tasks a config may choose it for.

`training.loss` names a record whose `tasks` hold the run's task (cross-entropy for classification and language
models, MSE or Huber for regression; the config's Literal and its task rule read `CONFIG_LOSSES` and `tasks`). The
embedding losses have no task: no run trains embeddings from a config yet, so code calls them (experiment 29).
Each record's `fn` returns a scalar Tensor, its inputs' gradients checked in float64 by tests/test_registries.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from minitrain.autograd.embedding_losses import nt_xent_loss, triplet_margin_loss
from minitrain.autograd.functional import cross_entropy
from minitrain.autograd.losses import huber_loss, mse_loss
from minitrain.autograd.tensor import Tensor
from minitrain.common.registry import Registry


@dataclass(frozen=True)
class LossKind:
    """A loss: its `training.loss` name, the function, what it compares, the tasks a config may pick it for."""

    name: str
    fn: Callable[..., Tensor]
    inputs: str  # "logits, classes" | "prediction, target" | "embeddings": the contract test's tiny inputs
    tasks: tuple[str, ...] = ()


LOSSES: Registry[LossKind] = Registry("loss", [
    LossKind("cross_entropy", cross_entropy, "logits, classes", ("classification", "language_modeling")),
    LossKind("mse", mse_loss, "prediction, target", ("regression",)),
    LossKind("huber", huber_loss, "prediction, target", ("regression",)),
    LossKind("triplet_margin", triplet_margin_loss, "embeddings"),
    LossKind("nt_xent", nt_xent_loss, "embeddings"),
])
CONFIG_LOSSES = tuple(name for name, kind in LOSSES.items() if kind.tasks)  # what training.loss may name
