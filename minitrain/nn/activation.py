"""Element-wise non-linearities as modules, for `Sequential` stacks. Each is one op of minitrain.autograd.functional or
of Tensor, with its backward beside its forward there."""

from __future__ import annotations

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.nn.module import Module


class GELU(Module):
    """y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), the tanh approximation GPT-2 uses."""

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x)


class ReLU(Module):
    """y = max(x, 0)."""

    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class Tanh(Module):
    """y = tanh(x), in (−1, 1); dy/dx = 1 − y²."""

    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    """y = 1 / (1 + e^(−x)), in (0, 1); dy/dx = y·(1 − y)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class Softmax(Module):
    """y = e^x / Σ e^x over `axis` (the last by default): scores to probabilities.

    As the last layer of a classifier, leave it out and train on the logits: `F.cross_entropy` applies it inside
    the loss, in one stable step (log-sum-exp) instead of a log of a rounded probability.
    """

    def __init__(self, axis: int = -1) -> None:
        super().__init__()
        self.axis = axis

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"
