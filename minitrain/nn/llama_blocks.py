"""The Llama decoder layer (also Qwen2's and Mistral's): the pre-RMSNorm residual layer around grouped-query
attention with rotary positions (llama_attention.py) and the SwiGLU MLP (llama_mlp.py). Names are Hugging Face's
(`self_attn.q_proj`, `mlp.gate_proj`, `input_layernorm`...), so LoRA targets and state dicts use them as written.

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

import numpy as np

from minitrain.autograd.tensor import Tensor
from minitrain.nn.llama_attention import LlamaAttention
from minitrain.nn.llama_mlp import LlamaMLP
from minitrain.nn.llama_shared import KeyValueStore
from minitrain.nn.module import Module
from minitrain.nn.rms_norm import RMSNorm


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
