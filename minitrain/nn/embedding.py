"""`Embedding`: a learned vector per id (a token, a position)."""

from __future__ import annotations

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.random import or_default
from minitrain.autograd.tensor import Tensor
from minitrain.nn.module import Module, Parameter


class Embedding(Module):
    """y[...] = W[idx[...]]: row idx of a (num_embeddings, dim) table.  idx (...) int -> y (..., dim).

    Looking up row i is the same as multiplying a one-hot vector by W, so W is trained like any weight; its
    gradient is a scatter-add of the output gradient into the rows that were used. Init: W ~ N(0, std²), std = 1
    unless given (torch's default), drawn from `rng`, the training RNG (the default generator when not given).
    """

    def __init__(self, num_embeddings: int, dim: int, *, rng: np.random.Generator | None = None, std: float = 1.0,
                 dtype: type = np.float32) -> None:
        super().__init__()
        self.num_embeddings, self.dim = num_embeddings, dim
        self.weight = Parameter(or_default(rng).normal(0.0, std, size=(num_embeddings, dim)), dtype=dtype)

    def forward(self, idx: np.ndarray) -> Tensor:
        return F.embedding(self.weight, idx)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.dim}"
