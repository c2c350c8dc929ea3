"""The Llama family's attention: grouped-query attention with rotary positions, and the KV cache of generation.

    LlamaAttention(x) = o_proj(attend(rope(q_proj(x)), rope(k_proj(x)), v_proj(x)))

Against GPT-2's (transformer.py): no learned position table, since queries and keys are rotated by their position
(apply_rotary.py) and the scores see only relative positions; H_kv ≤ H key/value heads, each shared by a group of
H/H_kv query heads (query head h reads key/value head h // (H/H_kv)), so a KV cache holds H_kv heads, not H; no
biases (Qwen2 has them on q, k and v). With a cache (generation), the new keys and values are appended to the
cached ones and the new queries attend to every position so far: token n + 1 costs n scores, not a new pass over
the whole prefix.
Shapes: B batch, T time (new tokens), T_k keys (T, or the cached positions plus T), C = d_model, H query heads,
H_kv key/value heads, D = head_dim.
"""

from __future__ import annotations

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import ArgumentError
from minitrain.nn.apply_rotary import apply_rotary
from minitrain.nn.dropout import Dropout
from minitrain.nn.linear import Linear
from minitrain.nn.llama_shared import LLAMA_INIT_STD, KeyValueStore
from minitrain.nn.module import Module


class LlamaAttention(Module):
    """y = dropout(o_proj(attention(rope(q), rope(k), v, allowed))).  x (B, T, C) -> y (B, T, C).

    Children, in this order (Hugging Face's names; the init draws from `rng` in this order): q_proj = Linear(C, H·D),
    k_proj and v_proj = Linear(C, H_kv·D), each with `bias`; o_proj = Linear(H·D, C, bias=False); all
    std=LLAMA_INIT_STD, dtype=dtype; then resid_dropout = Dropout(dropout, rng=rng). n_head must be a multiple of
    n_kv_head (an ArgumentError otherwise).

    forward: q (B, T, H, D), k and v (B, T, H_kv, D), q and k rotated by apply_rotary(·, cos, sin). With a `cache`,
    `keys, values = cache.update(k.data, v.data)` appends them and returns every position so far (B, T_k, H_kv, D),
    plain arrays (generation records no tape). Query head h attends with key/value head h // (H/H_kv): scores
    q·k/√D (B, H, T, T_k), −inf where `allowed` (B or 1, T, T_k) is False (functional.attention_mask: causal,
    padding, packed documents), softmax over the keys (a row with no allowed key gets weights 0), times v; the heads
    side by side (B, T, H·D) into o_proj.
    The library's attention is one fused tape node (functional.grouped_attention); the same math from Tensor ops
    (reshape, transpose, @, where, softmax) gives the same values and gradients."""

    def __init__(
        self,
        d_model: int,
        n_head: int,
        n_kv_head: int,
        head_dim: int,
        bias: bool = False,
        dropout: float = 0.0,
        *,
        rng: np.random.Generator | None = None,
        dtype: type = np.float32,
    ) -> None:
        """The four projections and the dropout, as the class docstring lists them; checks n_head % n_kv_head."""
        super().__init__()
        if n_head % n_kv_head:
            raise ArgumentError(f"model: n_head ({n_head}) must be a multiple of n_kv_head ({n_kv_head})")
        self.n_head, self.n_kv_head, self.head_dim = n_head, n_kv_head, head_dim
        linear = dict(rng=rng, std=LLAMA_INIT_STD, dtype=dtype)
        self.q_proj = Linear(d_model, n_head * head_dim, bias=bias, **linear)
        self.k_proj = Linear(d_model, n_kv_head * head_dim, bias=bias, **linear)
        self.v_proj = Linear(d_model, n_kv_head * head_dim, bias=bias, **linear)
        self.o_proj = Linear(n_head * head_dim, d_model, bias=False, **linear)
        self.resid_dropout = Dropout(dropout, rng=rng)

    def forward(
        self, x: Tensor, cos: np.ndarray, sin: np.ndarray, allowed: np.ndarray, cache: KeyValueStore | None = None
    ) -> Tensor:
        """x (B, T, C), cos and sin (B, T, 1, D), allowed (B or 1, T, T_k), an optional one-layer cache -> (B, T, C);
        see the class docstring."""
        batch, time, _ = x.shape
        q = apply_rotary(self.q_proj(x).reshape(batch, time, self.n_head, self.head_dim), cos, sin)
        k = apply_rotary(self.k_proj(x).reshape(batch, time, self.n_kv_head, self.head_dim), cos, sin)
        v = self.v_proj(x).reshape(batch, time, self.n_kv_head, self.head_dim)
        if cache is not None:  # generation: no tape, the keys and values of every position so far
            keys, values = cache.update(k.data, v.data)
            k, v = Tensor(keys, dtype=keys.dtype), Tensor(values, dtype=values.dtype)
        return self.resid_dropout(self.o_proj(F.grouped_attention(q, k, v, allowed)))

    def extra_repr(self) -> str:
        """What repr(module) shows inside the parentheses: `n_head=4, n_kv_head=2, head_dim=16`."""
        return f"n_head={self.n_head}, n_kv_head={self.n_kv_head}, head_dim={self.head_dim}"
