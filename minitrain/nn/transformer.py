"""The pieces of a GPT-2 transformer: causal self-attention, the MLP, and the pre-LayerNorm block around them.

    Block(x):  x = x + attn(ln_1(x))        every position reads the positions before it
               x = x + mlp(ln_2(x))         every position is transformed on its own

Each sub-layer reads a normalised copy of the residual stream x and adds its result back, so the stream carries
the input to every depth and gradients reach the first layers undiminished. Names are Hugging Face GPT-2's.

Init (GPT-2's): linear weights N(0, 0.02²), except the two projections that write into the residual stream
(attn.c_proj, mlp.c_proj), whose std `residual_std` the model sets to 0.02/√(2·n_layer) so the stream's variance
does not grow with depth; drawn from `rng` (the default generator when not given).
Shapes: B batch, T time, C = d_model, H heads, D = C/H.
"""

from __future__ import annotations

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.nn.dropout import Dropout
from minitrain.nn.linear import Linear
from minitrain.nn.module import Module
from minitrain.nn.normalization import LayerNorm

GPT2_INIT_STD = 0.02


class CausalSelfAttention(Module):
    """y = resid_dropout(c_proj(attention(c_attn(x)))).  x (B, T, C) -> y (B, T, C).

    c_attn computes q | k | v for all H heads in one product (B, T, 3C; H divides C, or functional.self_attention
    refuses it); head h attends with softmax(scale · q·kᵀ) over the positions j ≤ i that are not padding,
    scale = 1/√D unless `scale` is given (theory/03's exercise removes it with scale = 1). With `keep_probs` set,
    each forward pass keeps the attention probabilities (B, H, T, T) in `probs` (MiniGPT.attention_probs uses it).
    """

    def __init__(self, d_model: int, n_head: int, dropout: float = 0.0, *, rng: np.random.Generator | None = None,
                 residual_std: float = GPT2_INIT_STD, scale: float | None = None, dtype: type = np.float32) -> None:
        super().__init__()
        self.n_head, self.scale = n_head, scale
        self.c_attn = Linear(d_model, 3 * d_model, rng=rng, std=GPT2_INIT_STD, dtype=dtype)
        self.c_proj = Linear(d_model, d_model, rng=rng, std=residual_std, dtype=dtype)
        self.resid_dropout = Dropout(dropout, rng=rng)
        self.keep_probs = False
        self.probs: np.ndarray | None = None

    def forward(self, x: Tensor, attn_pad_mask: np.ndarray | None = None) -> Tensor:
        heads, probs = F.self_attention(self.c_attn(x), self.n_head, attn_pad_mask, self.scale, return_probs=True)
        if self.keep_probs:
            self.probs = probs
        return self.resid_dropout(self.c_proj(heads))

    def extra_repr(self) -> str:
        return f"n_head={self.n_head}" + ("" if self.scale is None else f", scale={self.scale:g}")


class MLP(Module):
    """y = dropout(c_proj(gelu(c_fc(x)))): widen each position to d_ff, GELU, back to C.  (B, T, C) -> (B, T, C).

    The GELU is fused into c_fc (one pass for the bias add and the activation)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, *, rng: np.random.Generator | None = None,
                 residual_std: float = GPT2_INIT_STD, dtype: type = np.float32) -> None:
        super().__init__()
        self.c_fc = Linear(d_model, d_ff, activation="gelu", rng=rng, std=GPT2_INIT_STD, dtype=dtype)
        self.c_proj = Linear(d_ff, d_model, rng=rng, std=residual_std, dtype=dtype)
        self.dropout = Dropout(dropout, rng=rng)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.c_fc(x)))


class Block(Module):
    """x = x + attn(ln_1(x));  x = x + mlp(ln_2(x)).  (B, T, C) -> (B, T, C); pre-LayerNorm, eps 1e-5."""

    def __init__(self, d_model: int, n_head: int, d_ff: int, dropout: float = 0.0, *,
                 rng: np.random.Generator | None = None, residual_std: float = GPT2_INIT_STD,
                 attn_scale: float | None = None, dtype: type = np.float32) -> None:
        super().__init__()
        self.ln_1 = LayerNorm(d_model, dtype=dtype)
        self.attn = CausalSelfAttention(d_model, n_head, dropout, rng=rng, residual_std=residual_std,
                                        scale=attn_scale, dtype=dtype)  # fmt: skip
        self.ln_2 = LayerNorm(d_model, dtype=dtype)
        self.mlp = MLP(d_model, d_ff, dropout, rng=rng, residual_std=residual_std, dtype=dtype)

    def forward(self, x: Tensor, attn_pad_mask: np.ndarray | None = None) -> Tensor:
        x = x + self.attn(self.ln_1(x), attn_pad_mask)
        return x + self.mlp(self.ln_2(x))
