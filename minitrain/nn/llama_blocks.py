"""The pieces of a Llama decoder (also Qwen2's and Mistral's): grouped-query attention with rotary positions, the
SwiGLU MLP, and the pre-RMSNorm layer around them. Names are Hugging Face's (`self_attn.q_proj`, `mlp.gate_proj`,
`input_layernorm`...), so LoRA targets and state dicts use them as written.

    LlamaDecoderLayer(x):  h = x + self_attn(input_layernorm(x))            every position reads the ones before it
                           y = h + mlp(post_attention_layernorm(h))         every position on its own

    self_attn(x) = o_proj(attention(rope(q_proj(x)), rope(k_proj(x)), v_proj(x)))
    mlp(x)       = down_proj(silu(gate_proj(x)) · up_proj(x))

Against GPT-2's block (transformer.py): RMSNorm instead of LayerNorm, rotary positions applied to queries and keys
instead of a learned position table, no biases (Qwen2 has them on q, k and v), H_kv ≤ H key/value heads shared by
groups of query heads (a smaller KV cache), and a gated MLP: silu(gate)·up lets each hidden unit scale its
own input. Linear weights are stored [in, out] (the transpose of Hugging Face's [out, in]).

Init (transformers' for these models): every linear weight N(0, std²), std = 0.02 (initializer_range), biases 0,
norms 1; drawn from `rng`, q, k, v, o, gate, up, down in that order.
Shapes: B batch, T time, C = d_model, H query heads, H_kv key/value heads, D = head_dim.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import ArgumentError
from minitrain.nn.dropout import Dropout
from minitrain.nn.linear import Linear
from minitrain.nn.module import Module
from minitrain.nn.normalization import RMSNorm

LLAMA_INIT_STD = 0.02


class KeyValueStore(Protocol):
    """One layer's KV cache (minitrain/models/kv_cache.py): stores the new keys and values, returns all so far."""

    def update(self, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


class LlamaAttention(Module):
    """y = dropout(o_proj(grouped_attention(rope(q), rope(k), v, allowed))).  x (B, T, C) -> y (B, T, C).

    q_proj gives H heads of D, k_proj and v_proj H_kv heads each (query head h reads key/value head h // (H/H_kv));
    scores are scaled by 1/√D. `allowed` (B, T, T_k) is the attention mask (`functional.attention_mask`); with a
    `cache`, the new keys and values are appended to it and the queries attend to every cached position too."""

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
        batch, time, _ = x.shape
        q = F.rope(self.q_proj(x).reshape(batch, time, self.n_head, self.head_dim), cos, sin)
        k = F.rope(self.k_proj(x).reshape(batch, time, self.n_kv_head, self.head_dim), cos, sin)
        v = self.v_proj(x).reshape(batch, time, self.n_kv_head, self.head_dim)
        if cache is not None:  # generation: no tape, the keys and values of every position so far
            keys, values = cache.update(k.data, v.data)
            k, v = Tensor(keys, dtype=keys.dtype), Tensor(values, dtype=values.dtype)
        return self.resid_dropout(self.o_proj(F.grouped_attention(q, k, v, allowed)))

    def extra_repr(self) -> str:
        return f"n_head={self.n_head}, n_kv_head={self.n_kv_head}, head_dim={self.head_dim}"


class LlamaMLP(Module):
    """y = dropout(down_proj(silu(gate_proj(x)) · up_proj(x))), SwiGLU (Shazeer 2020).  (B, T, C) -> (B, T, C)."""

    def __init__(
        self, d_model: int, d_ff: int, dropout: float = 0.0, *, rng: np.random.Generator | None = None,
        dtype: type = np.float32,
    ) -> None:
        super().__init__()
        linear = dict(bias=False, rng=rng, std=LLAMA_INIT_STD, dtype=dtype)
        self.gate_proj = Linear(d_model, d_ff, **linear)
        self.up_proj = Linear(d_model, d_ff, **linear)
        self.down_proj = Linear(d_ff, d_model, **linear)
        self.dropout = Dropout(dropout, rng=rng)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x)))


class LlamaDecoderLayer(Module):
    """h = x + self_attn(input_layernorm(x));  y = h + mlp(post_attention_layernorm(h)).  (B, T, C) -> (B, T, C).

    Registered in transformers' order (self_attn, mlp, then the two norms), so the state dict lists the tensors as
    a Hugging Face checkpoint does."""

    def __init__(
        self,
        d_model: int,
        n_head: int,
        n_kv_head: int,
        head_dim: int,
        d_ff: int,
        rms_norm_eps: float = 1e-5,
        attention_bias: bool = False,
        dropout: float = 0.0,
        *,
        rng: np.random.Generator | None = None,
        dtype: type = np.float32,
    ) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(d_model, n_head, n_kv_head, head_dim, attention_bias, dropout, rng=rng,
                                        dtype=dtype)  # fmt: skip
        self.mlp = LlamaMLP(d_model, d_ff, dropout, rng=rng, dtype=dtype)
        self.input_layernorm = RMSNorm(d_model, rms_norm_eps, dtype=dtype)
        self.post_attention_layernorm = RMSNorm(d_model, rms_norm_eps, dtype=dtype)

    def forward(
        self, x: Tensor, cos: np.ndarray, sin: np.ndarray, allowed: np.ndarray, cache: KeyValueStore | None = None
    ) -> Tensor:
        h = x + self.self_attn(self.input_layernorm(x), cos, sin, allowed, cache)
        return h + self.mlp(self.post_attention_layernorm(h))
