"""The Llama family's MLP: SwiGLU (Shazeer 2020), a gated feed-forward layer.

    LlamaMLP(x) = down_proj(silu(gate_proj(x)) · up_proj(x)),     silu(z) = z·σ(z)   (or another `activation`)

Against GPT-2's MLP (transformer.py: c_proj(gelu(c_fc(x)))): two input projections instead of one, and the
product silu(gate)·up lets each hidden unit scale its own input, a gate the network learns; no biases. With three
matrices instead of two, d_ff is usually about 8/3·d_model rather than 4·d_model, for the same parameters.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.nn.dropout import Dropout
from minitrain.nn.linear import Linear
from minitrain.nn.llama_shared import LLAMA_INIT_STD
from minitrain.nn.module import Module


class LlamaMLP(Module):
    """y = dropout(down_proj(silu(gate_proj(x)) · up_proj(x))), SwiGLU.  x (B, T, C) -> y (B, T, C).

    Children, in this order (Hugging Face's names; the init draws from `rng` in this order):
    gate_proj = Linear(C, d_ff), up_proj = Linear(C, d_ff), down_proj = Linear(d_ff, C), all bias=False,
    std=LLAMA_INIT_STD, dtype=dtype; then dropout = Dropout(dropout, rng=rng). `activation` (kept as
    self.activation) is applied to gate_proj's output: functional.silu by default, which is z·sigmoid(z)."""

    def __init__(
        self, d_model: int, d_ff: int, dropout: float = 0.0, *, rng: np.random.Generator | None = None,
        dtype: type = np.float32, activation: Callable[[Tensor], Tensor] = F.silu,
    ) -> None:
        """The three projections and the dropout, as the class docstring lists them, and the activation."""
        super().__init__()
        self.activation = activation
        linear = dict(bias=False, rng=rng, std=LLAMA_INIT_STD, dtype=dtype)
        self.gate_proj = Linear(d_model, d_ff, **linear)
        self.up_proj = Linear(d_model, d_ff, **linear)
        self.down_proj = Linear(d_ff, d_model, **linear)
        self.dropout = Dropout(dropout, rng=rng)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, C) -> down_proj(activation(gate_proj(x)) · up_proj(x)), through dropout (B, T, C)."""
        return self.dropout(self.down_proj(self.activation(self.gate_proj(x)) * self.up_proj(x)))
