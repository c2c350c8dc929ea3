"""Llama: the decoder of Llama 2/3, SmolLM2, Qwen2 and Mistral, a configuration of the composed decoder
(minitrain/models/decoder.py) with Llama's pieces: RMSNorm (eps `rms_norm_eps`; minitrain/nn/rms_norm.py),
grouped-query attention with rotary positions (`n_kv_head` key/value heads shared by groups of the `n_head` query
heads; θ = `rope_theta`, optionally Llama 3's `rope_scaling`; llama_attention.py) and the SwiGLU MLP
down_proj(silu(gate_proj(x)) · up_proj(x)) (llama_mlp.py). No biases except the optional q/k/v ones
(`attention_bias`: Qwen2); the output head tied to the token embedding or its own (`tie_embeddings`). One class
covers Hugging Face's `llama`, `qwen2` and `mistral` configs, with their sliding window (`sliding_window` W: a
query sees the W latest positions, on the layers `layer_types` names, all by default); `dropout` is 0 in every
pretrained model. Parameter names are LlamaForCausalLM's (`model.layers.0.self_attn.q_proj.weight`...); linear
weights are stored [in, out], the transpose of theirs (minitrain's `nn.Linear`), lm_head's too.

Init, all from the training RNG (transformers' for these models): embed_tokens, then per layer q, k, v, o, gate,
up, down, then lm_head when untied, all N(0, 0.02²) (initializer_range); biases 0, norms 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import Field

from minitrain.common.strict import PositiveInt, Section
from minitrain.models.decoder import Decoder, decoder_rules
from minitrain.models.family import ModelFamily, Shapes, file_schema_of
from minitrain.nn import RMSNorm


def parameter_shapes(config: Mapping[str, Any]) -> Shapes:
    """Every parameter's Hugging Face name and (minitrain) shape, in model order, without building the model."""
    d, n_head, n_kv = config["d_model"], config["n_head"], config.get("n_kv_head") or config["n_head"]
    head_dim = config.get("head_dim") or d // n_head
    bias = config.get("attention_bias", False)
    shapes = [("model.embed_tokens.weight", (config["vocab_size"], d))]
    for i in range(config["n_layer"]):
        layer = f"model.layers.{i}"
        a, m = f"{layer}.self_attn", f"{layer}.mlp"
        for name, width in (("q_proj", n_head * head_dim), ("k_proj", n_kv * head_dim), ("v_proj", n_kv * head_dim)):
            shapes += [(f"{a}.{name}.weight", (d, width))] + ([(f"{a}.{name}.bias", (width,))] if bias else [])
        shapes += [
            (f"{a}.o_proj.weight", (n_head * head_dim, d)), (f"{m}.gate_proj.weight", (d, config["d_ff"])),
            (f"{m}.up_proj.weight", (d, config["d_ff"])), (f"{m}.down_proj.weight", (config["d_ff"], d)),
            (f"{layer}.input_layernorm.weight", (d,)), (f"{layer}.post_attention_layernorm.weight", (d,)),
        ]  # fmt: skip
    shapes.append(("model.norm.weight", (d,)))
    return shapes if config.get("tie_embeddings", True) else [*shapes, ("lm_head.weight", (d, config["vocab_size"]))]


class Llama(Decoder):
    """Llama-family language model. `model(idx, targets, attn_pad_mask, loss_mask, segment_ids)` -> (None, loss)."""

    def __init__(
        self,
        *,
        n_layer: int,
        n_head: int,
        n_kv_head: int | None = None,
        d_model: int,
        d_ff: int,
        vocab_size: int,
        max_seq_len: int,
        rope_theta: float = 10000.0,
        rope_scaling: Mapping[str, Any] | None = None,
        rms_norm_eps: float = 1e-5,
        tie_embeddings: bool = True,
        attention_bias: bool = False,
        head_dim: int | None = None,
        sliding_window: int | None = None,
        layer_types: list[str] | None = None,
        dropout: float = 0.0,
        rng: np.random.Generator | int = 0,
        dtype: type = np.float32,
    ) -> None:
        """n_kv_head defaults to n_head (ordinary multi-head attention), head_dim to d_model // n_head."""
        config = dict(type="llama", n_layer=n_layer, n_head=n_head, n_kv_head=n_kv_head, d_model=d_model, d_ff=d_ff,
                      vocab_size=vocab_size, max_seq_len=max_seq_len, rope_theta=float(rope_theta),
                      rope_scaling=None if rope_scaling is None else dict(rope_scaling),
                      rms_norm_eps=float(rms_norm_eps), tie_embeddings=bool(tie_embeddings),
                      attention_bias=bool(attention_bias), head_dim=head_dim, dropout=float(dropout))  # fmt: skip
        window = {"sliding_window": sliding_window, "layer_types": None if layer_types is None else list(layer_types)}
        config.update({k: v for k, v in window.items() if v is not None})  # absent when None: older files' bytes
        super().__init__(config, norm=RMSNorm, rng=rng, dtype=dtype)


# --- the family record: how configs, model files and run folders name it (minitrain/models/family.py) ---------


class RopeScaling(Section):
    """Llama 3's `rope_scaling` (minitrain/nn/rotary.py), as transformers' config writes it."""

    rope_type: Literal["llama3"]
    factor: float = Field(gt=0)
    low_freq_factor: float = Field(gt=0)
    high_freq_factor: float = Field(gt=0)
    original_max_position_embeddings: PositiveInt


LayerKind = Literal["full_attention", "sliding_attention"]  # transformers' layer_types (models/decoder.py)


class LlamaKeys(Section):
    """`model:` keys of `type: llama` (with n_layer, n_head, d_model, d_ff, vocab_size, max_seq_len, dropout);
    left out, they take Llama's defaults."""

    n_kv_head: PositiveInt | None = Field(None, description="llama: key/value heads (default n_head)")
    head_dim: PositiveInt | None = Field(None, description="llama: size of each head (default d_model / n_head)")
    rope_theta: float | None = Field(None, gt=0, description="llama: rotary base θ (default 10000)")
    rope_scaling: RopeScaling | None = Field(None, description="llama: Llama 3's rotary scaling")
    rms_norm_eps: float | None = Field(None, gt=0, description="llama: RMSNorm eps (default 1e-5)")
    tie_embeddings: bool | None = Field(None, description="llama: output head = token embedding (default true)")
    attention_bias: bool | None = Field(None, description="llama: biases on q, k, v (Qwen2; default false)")
    sliding_window: PositiveInt | None = Field(None, description="llama: attend to the W latest positions (Mistral)")
    layer_types: list[LayerKind] | None = Field(None, description="llama: which layers slide (default: all, with a "
                                                                   "window)")


def hf_model_type(config: Mapping[str, Any]) -> str:
    """The Hugging Face model_type (and GGUF architecture) a Llama config exports as: qwen2 when it has q/k/v
    biases (formats/hf_config.py)."""
    return "qwen2" if config.get("attention_bias") else "llama"


def _linear_paths(config: Mapping[str, Any]) -> list[str]:
    return [name.removesuffix(".weight") for name, _ in parameter_shapes(config)
            if name.endswith("_proj.weight") or name == "lm_head.weight"]  # fmt: skip


FAMILY = ModelFamily(name="llama", model=Llama, keys=LlamaKeys, file_prefix="llama",
                     file_schema=file_schema_of("llama", Llama, LlamaKeys,
                                                 optional=("rope_scaling", "sliding_window", "layer_types")),
                     reads="text", parameter_shapes=parameter_shapes, width=lambda config: config["d_model"],
                     linear_paths=_linear_paths, check=decoder_rules, packs_rows=True,
                     pretrained="any", fan_in_fan_out=False, layout=hf_model_type,
                     lora_targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
                     example={"type": "llama", "n_layer": 1, "n_head": 4, "n_kv_head": 2, "d_model": 16, "d_ff": 32,
                              "vocab_size": 64, "max_seq_len": 32})
