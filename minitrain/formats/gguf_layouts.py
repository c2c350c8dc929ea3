"""llama.cpp's GGUF layouts, one `GGUFLayout` record per `general.architecture` in `GGUF_LAYOUTS`: what its
metadata means as a transformers config (in transformers' own key names for that model_type), its tensor names in
Hugging Face's, and what llama.cpp's converter did to a tensor that the reader undoes.

    architecture  model_type   own config keys (beside the shared ones, formats/gguf_read.py)   tensors undone
    llama         llama        head_dim = rope.dimension_count                                    q/k RoPE rows
    qwen2         qwen2        -                                                                  -
    gemma2        gemma2       head_dim, soft-caps, window, layers local/global alternating       norms - 1
    gemma3        gemma3_text  head_dim, window, every 6th layer global, local RoPE base 10000   norms - 1

Gemma's RMSNorm computes x·(1 + w); llama.cpp's converter stores every `*norm.weight` as 1 + w, so the reader
subtracts 1 (as transformers' GGUF loader does). What llama.cpp hard-codes rather than stores (llama-model.cpp) is
written here as it does: Gemma 2's soft-caps default to 50 (attention) and 30 (logits), its window to 4096, its
even layers slide; Gemma 3's layers slide but every 6th (sliding_window_pattern 6; none without
attention.sliding_window), its local layers rotate with base 10000; both scale the scores by query_pre_attn_scalar
= head_dim, but the 27B models (46 and 62 layers) by hidden_size / num_attention_heads (transformers' GGUF loader
leaves its config's default 256 there, which is right only where head_dim is 256).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from minitrain.common.registry import Registry
from minitrain.models.decoder import FULL, SLIDING

SHARED_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.weight": "self_attn.k_proj.weight", "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
GEMMA2_LAYER_NAMES = {
    **SHARED_LAYER_NAMES,
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
}
GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                "output.weight": "lm_head.weight"}
GEMMA_WRITTEN = {"sliding_window": "attention.sliding_window", "attn_logit_softcapping": "attn_logit_softcapping",
                 "final_logit_softcapping": "final_logit_softcapping"}


@dataclass(frozen=True)
class GGUFLayout:
    """One architecture: `name` (general.architecture), `model_type` (transformers'), `layer_names` (blk.N.<short>
    -> model.layers.N.<long>), `hf_keys(meta, shared)` (its own config keys from its `<arch>.*` metadata; `meta`
    has count/real/field/has as formats/gguf_read.py's `Metadata`, `shared` the config so far), `rope_permuted`
    (the converter permuted q/k rows for interleaved RoPE), `norm_offset` (stored norm = offset + w),
    `rope_scalings` (the `rope.scaling.type`s it maps to a config's rope_scaling), `written` (minitrain config key ->
    its `<arch>.*` key, written when the config sets it: formats/gguf_write.py)."""

    name: str
    model_type: str
    layer_names: Mapping[str, str]
    hf_keys: Callable[[Any, Mapping[str, Any]], dict[str, Any]]
    rope_permuted: bool = False
    norm_offset: float = 0.0
    rope_scalings: tuple[str, ...] = field(default=())
    written: Mapping[str, str] = field(default_factory=dict)


def _llama_keys(meta: Any, shared: Mapping[str, Any]) -> dict[str, Any]:
    head_dim = meta.count("rope.dimension_count", 0)
    return {"hidden_act": "silu", **({"head_dim": head_dim} if head_dim else {})}


def _gemma_keys(meta: Any, shared: Mapping[str, Any], big_layers: int, pattern: int) -> dict[str, Any]:
    """The keys Gemma 2 and 3 share: head_dim (attention.key_length), GeGLU's tanh GELU, the score scale, the
    window and the local/global layer pattern (layer i is global when (i + 1) % pattern == 0)."""
    n_layer, n_head = shared["num_hidden_layers"], shared["num_attention_heads"]
    head_dim = meta.count("attention.key_length", 0) or shared["hidden_size"] // n_head
    return {"head_dim": head_dim, "hidden_activation": "gelu_pytorch_tanh",
            "query_pre_attn_scalar": shared["hidden_size"] // n_head if n_layer == big_layers else head_dim,
            "layer_types": [FULL if (i + 1) % pattern == 0 else SLIDING for i in range(n_layer)]}


def _gemma2_keys(meta: Any, shared: Mapping[str, Any]) -> dict[str, Any]:
    return {**_gemma_keys(meta, shared, 46, 2), "sliding_window": meta.count("attention.sliding_window", 4096),
            "attn_logit_softcapping": meta.real("attn_logit_softcapping", 50.0),
            "final_logit_softcapping": meta.real("final_logit_softcapping", 30.0)}


def _gemma3_keys(meta: Any, shared: Mapping[str, Any]) -> dict[str, Any]:
    """No (or a 0) attention.sliding_window: every layer global, as llama.cpp reads such a file."""
    window = meta.count("attention.sliding_window", 0, 0)
    return {**_gemma_keys(meta, shared, 62, 6 if window else 1), "sliding_window": window or None,
            "rope_local_base_freq": 10000.0, "attn_logit_softcapping": None,
            "final_logit_softcapping": meta.real("final_logit_softcapping") if meta.has(
                "final_logit_softcapping") else None}


GGUF_LAYOUTS: Registry[GGUFLayout] = Registry("GGUF architecture", [
    GGUFLayout("llama", "llama", SHARED_LAYER_NAMES, _llama_keys, rope_permuted=True),
    GGUFLayout("qwen2", "qwen2", SHARED_LAYER_NAMES, lambda meta, shared: {"hidden_act": "silu"}),
    GGUFLayout("gemma2", "gemma2", GEMMA2_LAYER_NAMES, _gemma2_keys, norm_offset=1.0, written=GEMMA_WRITTEN),
    GGUFLayout("gemma3", "gemma3_text", {**GEMMA2_LAYER_NAMES, "attn_q_norm.weight": "self_attn.q_norm.weight",
                                         "attn_k_norm.weight": "self_attn.k_norm.weight"},
               _gemma3_keys, norm_offset=1.0, rope_scalings=("linear",), written=GEMMA_WRITTEN),
])
