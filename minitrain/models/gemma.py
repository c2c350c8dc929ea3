"""Gemma 2 and Gemma 3 (text): the composed decoder (minitrain/models/decoder.py) with Gemma's pieces, one family
(`model.type: gemma`) whose `qk_norm` tells the two apart (Gemma 3: true). Parameter names are transformers'
Gemma2ForCausalLM / Gemma3ForCausalLM's; linear weights are stored [in, out] (nn.Linear), the head is tied.

    x₀      = embed_tokens[idx] · √d_model                   (the scale rounded to the model's dtype, as transformers)
    norm(x) = x/√(mean(x²) + eps) · (1 + w)                  GemmaRMSNorm: the gain stored as its offset (w = 0 at init)
    layer:  h = x + post_attention_layernorm(self_attn(input_layernorm(x)))        a norm before AND after each
            y = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))  sub-layer (`sandwich_norms`)
    mlp(x)  = down_proj(gelu_tanh(gate_proj(x)) · up_proj(x))  GeGLU
    attention: q, k = q_norm(q), k_norm(k) over head_dim (Gemma 3, before RoPE); scores q·k · s^(−1/2),
            s = `query_pre_attn_scalar` (default head_dim); Gemma 2 soft-caps them, c·tanh(score/c), c =
            `attn_logit_softcapping`, before the mask, and the logits by `final_logit_softcapping`
    layers: `layer_types` local ("sliding_attention", a window of `sliding_window` positions, RoPE base
            `rope_local_theta` on Gemma 3) and global ("full_attention", base `rope_theta`, optional linear
            `rope_scaling`); transformers' default patterns (formats/hf_config.py): Gemma 2 alternates local/global,
            Gemma 3 has 5 local layers to each global one.

Init, from the training RNG: every linear weight and the embedding N(0, 0.02²), norms 0 (transformers' _init_weights).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any, Literal

import numpy as np
from pydantic import Field

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.common.strict import PositiveInt, Section
from minitrain.models import llama
from minitrain.models.decoder import Decoder, decoder_rules
from minitrain.models.family import ModelFamily, Shapes, file_schema_of
from minitrain.nn import LlamaAttention, LlamaMLP, RMSNorm
from minitrain.nn.apply_rotary import apply_rotary
from minitrain.nn.llama_shared import KeyValueStore


class GemmaRMSNorm(RMSNorm):
    """y = x/√(mean(x²) + eps) · (1 + weight), weight 0 at init.  x (..., C) -> y (..., C)."""

    def __init__(self, dim: int, eps: float = 1e-6, *, dtype: type = np.float32) -> None:
        super().__init__(dim, eps, dtype=dtype)
        self.weight.data[...] = 0.0

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.weight + 1.0, self.eps)


class GemmaAttention(LlamaAttention):
    """LlamaAttention with Gemma's three changes: q_norm and k_norm (GemmaRMSNorm over head_dim, eps `qk_norm_eps`;
    none when it is None), registered after o_proj as transformers does; scores times `scale` (None: 1/√D); and
    soft-capping `softcap` (None: none). x (B, T, C) -> (B, T, C); see LlamaAttention for the rest."""

    def __init__(self, d_model: int, n_head: int, n_kv_head: int, head_dim: int, bias: bool = False,
                 dropout: float = 0.0, *, rng: np.random.Generator | None = None, dtype: type = np.float32,
                 qk_norm_eps: float | None = None, scale: float | None = None, softcap: float | None = None) -> None:
        super().__init__(d_model, n_head, n_kv_head, head_dim, bias, dropout, rng=rng, dtype=dtype)
        self.scale, self.softcap, self.qk_norm = scale, softcap, qk_norm_eps is not None
        if self.qk_norm:
            self.q_norm = GemmaRMSNorm(head_dim, qk_norm_eps, dtype=dtype)
            self.k_norm = GemmaRMSNorm(head_dim, qk_norm_eps, dtype=dtype)

    def forward(self, x: Tensor, cos: np.ndarray, sin: np.ndarray, allowed: np.ndarray,
                cache: KeyValueStore | None = None) -> Tensor:
        batch, time, _ = x.shape
        q = self.q_proj(x).reshape(batch, time, self.n_head, self.head_dim)
        k = self.k_proj(x).reshape(batch, time, self.n_kv_head, self.head_dim)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        v = self.v_proj(x).reshape(batch, time, self.n_kv_head, self.head_dim)
        if cache is not None:  # generation: no tape
            keys, values = cache.update(k.data, v.data)
            k, v = Tensor(keys, dtype=keys.dtype), Tensor(values, dtype=values.dtype)
        return self.resid_dropout(self.o_proj(F.grouped_attention(q, k, v, allowed, self.scale, self.softcap)))


class Gemma(Decoder):
    """Gemma-family language model (Gemma 2, Gemma 3).
    `model(idx, targets, attn_pad_mask, loss_mask, segment_ids)` -> (None, loss); generate() with a KV cache."""

    def __init__(
        self, *, n_layer: int, n_head: int, n_kv_head: int | None = None, d_model: int, d_ff: int, vocab_size: int,
        max_seq_len: int, head_dim: int | None = None, rope_theta: float = 10000.0,
        rope_scaling: Mapping[str, Any] | None = None, rope_local_theta: float | None = None,
        rms_norm_eps: float = 1e-6, query_pre_attn_scalar: float | None = None, qk_norm: bool = True,
        attn_logit_softcapping: float | None = None, final_logit_softcapping: float | None = None,
        sliding_window: int | None = None, layer_types: list[str] | None = None, dropout: float = 0.0,
        rng: np.random.Generator | int = 0, dtype: type = np.float32,
    ) -> None:
        """The keys of the module docstring; n_kv_head defaults to n_head, head_dim to d_model // n_head. With
        `rope_scaling` the local layers rotate unscaled, by `rope_local_theta` or else `rope_theta` (transformers
        scales only Gemma's global layers), and the config records that base."""
        if rope_scaling is not None and rope_local_theta is None:
            rope_local_theta = float(rope_theta)
        attn_logit_softcapping, final_logit_softcapping = (None if cap is None else float(cap) for cap in (
            attn_logit_softcapping, final_logit_softcapping))  # a GGUF stores them as float32
        config = dict(type="gemma", n_layer=n_layer, n_head=n_head, n_kv_head=n_kv_head, d_model=d_model, d_ff=d_ff,
                      vocab_size=vocab_size, max_seq_len=max_seq_len, head_dim=head_dim, rope_theta=float(rope_theta),
                      rope_scaling=None if rope_scaling is None else dict(rope_scaling),
                      rope_local_theta=rope_local_theta, rms_norm_eps=float(rms_norm_eps),
                      query_pre_attn_scalar=query_pre_attn_scalar, qk_norm=bool(qk_norm),
                      attn_logit_softcapping=attn_logit_softcapping, final_logit_softcapping=final_logit_softcapping,
                      sliding_window=sliding_window, layer_types=None if layer_types is None else list(layer_types),
                      dropout=float(dropout))  # fmt: skip
        scale = None if query_pre_attn_scalar is None else float(query_pre_attn_scalar) ** -0.5
        attention = partial(GemmaAttention, qk_norm_eps=float(rms_norm_eps) if qk_norm else None, scale=scale,
                            softcap=attn_logit_softcapping)
        super().__init__(config, norm=GemmaRMSNorm, mlp=partial(LlamaMLP, activation=F.gelu), attention=attention,
                         embed_scale=float(np.dtype(dtype).type(np.sqrt(d_model))), sandwich_norms=True, rng=rng,
                         dtype=dtype)


def parameter_shapes(config: Mapping[str, Any]) -> Shapes:
    """Llama's list (tied, no biases) with Gemma's extra norms: q_norm, k_norm (head_dim,) after o_proj when qk_norm,
    pre_ and post_feedforward_layernorm (d_model,) after post_attention_layernorm: the model's order."""
    head_dim = config.get("head_dim") or config["d_model"] // config["n_head"]
    shapes: Shapes = []
    for name, shape in llama.parameter_shapes({**config, "tie_embeddings": True, "attention_bias": False}):
        shapes.append((name, shape))
        if name.endswith("o_proj.weight") and config.get("qk_norm", True):
            shapes += [(name.replace("o_proj", norm), (head_dim,)) for norm in ("q_norm", "k_norm")]
        if name.endswith("post_attention_layernorm.weight"):
            shapes += [(name.replace("post_attention", f"{kind}_feedforward"), shape) for kind in ("pre", "post")]
    return shapes


def hf_layout(config: Mapping[str, Any]) -> str:
    """The GGUF architecture (llama.cpp's name) a Gemma config exports as; its transformers model_type is
    `gemma2` or `gemma3_text` (formats/hf_config.py)."""
    return "gemma3" if config.get("qk_norm", True) else "gemma2"


# --- the family record (minitrain/models/family.py) ------------------------------------------------------------


class LinearRopeScaling(Section):
    """transformers' linear RoPE scaling (Gemma 3's global layers): every frequency divided by `factor`."""

    rope_type: Literal["linear"]
    factor: float = Field(gt=0)


class GemmaKeys(Section):
    """`model:` keys of `type: gemma` (with n_layer, n_head, d_model, d_ff, vocab_size, max_seq_len, dropout);
    left out, they take the constructor's defaults (a Gemma 3 without a window)."""

    n_kv_head: PositiveInt | None = Field(None, description="gemma: key/value heads (default n_head)")
    head_dim: PositiveInt | None = Field(None, description="gemma: size of each head (default d_model / n_head)")
    rope_theta: float | None = Field(None, gt=0, description="gemma: rotary base θ of global layers (default 10000)")
    rope_scaling: LinearRopeScaling | None = Field(None, description="gemma: linear rotary scaling (global layers)")
    rope_local_theta: float | None = Field(None, gt=0, description="gemma: rotary base θ of local layers (Gemma 3)")
    rms_norm_eps: float | None = Field(None, gt=0, description="gemma: RMSNorm eps (default 1e-6)")
    query_pre_attn_scalar: float | None = Field(None, gt=0, description="gemma: scores · s^-1/2 (default head_dim)")
    qk_norm: bool | None = Field(None, description="gemma: RMSNorm on queries and keys (Gemma 3; default true)")
    attn_logit_softcapping: float | None = Field(None, gt=0, description="gemma: c·tanh(score/c) (Gemma 2)")
    final_logit_softcapping: float | None = Field(None, gt=0, description="gemma: c·tanh(logit/c) (Gemma 2)")
    sliding_window: PositiveInt | None = Field(None, description="gemma: local layers see the W latest positions")
    layer_types: list[llama.LayerKind] | None = Field(None, description="gemma: which layers are local")


FAMILY = ModelFamily(name="gemma", model=Gemma, keys=GemmaKeys, file_prefix="gemma", reads="text",
                     file_schema=file_schema_of("gemma", Gemma, GemmaKeys, optional=(
                         "rope_scaling", "rope_local_theta", "query_pre_attn_scalar", "attn_logit_softcapping",
                         "final_logit_softcapping", "sliding_window", "layer_types")),
                     parameter_shapes=parameter_shapes, width=lambda config: config["d_model"],
                     linear_paths=llama.FAMILY.linear_paths, check=decoder_rules, packs_rows=True,
                     pretrained="any", fan_in_fan_out=False, layout=hf_layout, lora_targets=llama.FAMILY.lora_targets,
                     example={"type": "gemma", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "d_model": 16, "d_ff": 32,
                              "vocab_size": 64, "max_seq_len": 32, "head_dim": 8, "sliding_window": 4,
                              "layer_types": ["sliding_attention", "full_attention"], "rope_local_theta": 100.0})
