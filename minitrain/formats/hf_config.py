"""Hugging Face Llama / Qwen2 / Mistral configs <-> minitrain's Llama family, Gemma 2 / Gemma 3 configs <-> its Gemma
family (models/gemma.py), and their state dicts.

One minitrain family (`model.type: llama`, minitrain/models/llama.py) covers the three config.json kinds people
fine-tune, because they are the same network (RMSNorm, RoPE, grouped-query attention, SwiGLU):

    minitrain        config.json                     meaning
    n_layer          num_hidden_layers               decoder blocks
    n_head           num_attention_heads             query heads H
    n_kv_head        num_key_value_heads             key/value heads (H when absent: plain multi-head)
    d_model          hidden_size                     residual width D
    d_ff             intermediate_size               SwiGLU hidden width F
    head_dim         head_dim                        per-head width (D // H when absent; always written)
    vocab_size       vocab_size                      V
    max_seq_len      max_position_embeddings         longest sequence
    rope_theta       rope_theta (or rope_parameters) RoPE base θ
    rope_scaling     rope_scaling (or rope_parameters) None, or Llama 3's {"rope_type": "llama3", ...}
    rms_norm_eps     rms_norm_eps                    ε of RMSNorm
    tie_embeddings   tie_word_embeddings             lm_head shares the embedding matrix
    attention_bias   qwen2: always; llama: no        biases on q/k/v (not o): Qwen2's layout

What minitrain cannot reproduce is refused with the reason, before any weight is read: another activation than
SiLU, a bias on o_proj or the MLP (llama's attention_bias / mlp_bias), a RoPE type other than default / llama3, a
partial rotary factor, tensor-parallel pretraining_tp. A sliding window is the model's own (`sliding_window`,
`layer_types`): Mistral's on every layer, Qwen2's (`use_sliding_window`) on the layers from `max_window_layers` on,
as transformers' Qwen2Config lists them, or on those its `layer_types` names.

Gemma (`gemma2`, `gemma3_text`, and a `gemma3` config's `text_config`) maps the same keys plus its own, under the
same names but these: hidden_activation (gelu_pytorch_tanh only), query_pre_attn_scalar, attn_logit_softcapping
and final_logit_softcapping (Gemma 2's defaults 50 and 30), layer_types (default: Gemma 2 alternates
sliding/full, Gemma 3 makes every `sliding_window_pattern`-th (6) layer full), and Gemma 3's RoPE bases:
rope_theta (global layers, 1e6; with a linear rope_scaling) and rope_local_base_freq (local layers, 1e4), or
transformers 5's rope_parameters per layer type. qk_norm is true for Gemma 3; the head is always tied.

State dicts: HF stores a Linear's weight as [out, in]; minitrain's `nn.Linear` as [in, out] (x·W), so every
`*_proj.weight` and an untied `lm_head.weight` are transposed both ways. A tied model's `lm_head.weight` (some files
carry the copy) is dropped on the way in and not written on the way out, as transformers saves it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.formats.gpt2 import misfits, shared_keys
from minitrain.models import gemma, llama
from minitrain.models.decoder import FULL, SLIDING, layer_kinds
from minitrain.models.registry import parameter_shapes, tensor_count
from minitrain.nn.rotary import LLAMA3_KEYS

MODEL_TYPES = ("llama", "qwen2", "mistral", "gemma2", "gemma3_text", "gemma3")
ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM",
                 "gemma2": "Gemma2ForCausalLM", "gemma3": "Gemma3ForCausalLM"}  # by layout (models' `layout`)
# transformers' defaults where a config.json leaves a key out (LlamaConfig / Qwen2Config / MistralConfig).
DEFAULT_EPS = {"llama": 1e-6, "qwen2": 1e-6, "mistral": 1e-6}
DEFAULT_TIE = {"llama": False, "qwen2": False, "mistral": False}
DEFAULT_THETA = 10000.0
# Gemma2Config / Gemma3TextConfig's: context, θ (global, local), soft-capping (attention, final), local:global
GEMMA_DEFAULTS = {"gemma2": (8192, 10000.0, None, 50.0, 30.0, 2), "gemma3_text": (131072, 1e6, 1e4, None, None, 6)}


def _refuse(where: str, key: str, value: Any, why: str) -> UserError:
    return UserError(f"{where}: {key} = {value!r}: {why}", 2)


def _positive_int(config: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if type(value) is not int or value <= 0:
        raise _refuse(where, key, value, "must be a positive integer")
    return value


def _rope(config: Mapping[str, Any], where: str, default_theta: float = DEFAULT_THETA, kinds: tuple[str, ...] = (
        "llama3",)) -> tuple[float, dict[str, Any] | None]:
    """(θ, scaling) from either spelling: old `rope_theta` + `rope_scaling`, or transformers 5's `rope_parameters`;
    scaling of the `kinds` (llama3, linear) only."""
    params = config.get("rope_parameters")
    if params is not None and not isinstance(params, Mapping):
        raise _refuse(where, "rope_parameters", params, "must be an object or null")
    scaling = params if params is not None else config.get("rope_scaling")
    if scaling is not None and not isinstance(scaling, Mapping):
        raise _refuse(where, "rope_scaling", scaling, "must be an object or null")
    theta = config.get("rope_theta", (scaling or {}).get("rope_theta", default_theta))
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not 0 < theta < math.inf:
        raise _refuse(where, "rope_theta", theta, "must be a positive finite number")
    if scaling is None:
        return float(theta), None
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if scaling.get("partial_rotary_factor", 1.0) != 1.0:
        raise _refuse(where, "partial_rotary_factor", scaling["partial_rotary_factor"],
                      "minitrain rotates the whole head (factor 1.0)")
    if kind == "default":
        return float(theta), None
    if kind not in kinds:
        raise _refuse(where, "rope_type", kind,
                      f"minitrain implements RoPE types 'default' and {' and '.join(map(repr, kinds))} only")
    if kind == "linear":
        if isinstance(factor := scaling.get("factor"), bool) or not isinstance(factor, (int, float)) or factor <= 0:
            raise _refuse(where, "rope_scaling", dict(scaling), "linear scaling needs a positive factor")
        return float(theta), {"rope_type": "linear", "factor": float(factor)}
    missing = [k for k in LLAMA3_KEYS if type(scaling.get(k)) not in (int, float) or not math.isfinite(scaling[k])]
    if missing:
        raise _refuse(where, "rope_scaling", dict(scaling), f"llama3 scaling needs {', '.join(missing)}")
    return float(theta), {"rope_type": "llama3", **{k: scaling[k] for k in LLAMA3_KEYS}}


def _number(config: Mapping[str, Any], key: str, where: str, default: float | None) -> float | None:
    """A positive finite number (or the default, which may be None: absent)."""
    value = config.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise _refuse(where, key, value, "must be a positive finite number or null")
    return float(value)


def _heads(config: Mapping[str, Any], where: str) -> dict[str, Any]:
    """n_layer, n_head, n_kv_head, d_model, d_ff, vocab_size, head_dim: the decoder's shape, by its rules."""
    d_model = _positive_int(config, "hidden_size", where)
    n_head = _positive_int(config, "num_attention_heads", where)
    n_kv = config.get("num_key_value_heads") or n_head
    if type(n_kv) is not int or n_kv <= 0:
        raise _refuse(where, "num_key_value_heads", n_kv, "must be a positive integer")
    head_dim = None if config.get("head_dim") is None else _positive_int(config, "head_dim", where)
    heads = {"n_head": n_head, "n_kv_head": n_kv, "d_model": d_model, "head_dim": head_dim}
    for key, why in llama.FAMILY.check(heads):  # the decoder's rules, in config.json's names
        hf_key = {"n_head": "num_attention_heads", "n_kv_head": "num_key_value_heads"}.get(key, key)
        raise _refuse(where, hf_key, heads[key], why)
    return {"n_layer": _positive_int(config, "num_hidden_layers", where), "n_head": n_head, "n_kv_head": n_kv,
            "d_model": d_model, "d_ff": _positive_int(config, "intermediate_size", where),
            "vocab_size": _positive_int(config, "vocab_size", where), "head_dim": head_dim or d_model // n_head}


def _eps(config: Mapping[str, Any], where: str, default: float) -> float:
    eps = config.get("rms_norm_eps", default)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
        raise _refuse(where, "rms_norm_eps", eps, "must be a small positive number")
    return float(eps)


def _layer_types(config: Mapping[str, Any], where: str, n_layer: int, default: list[str] | None) -> list[str] | None:
    """`layer_types` as given (one of FULL, SLIDING per layer), else `default`."""
    kinds = config.get("layer_types")
    if kinds is None:
        return default
    if not isinstance(kinds, list) or len(kinds) != n_layer or not set(kinds) <= {FULL, SLIDING}:
        raise _refuse(where, "layer_types", kinds, f"must list {n_layer} layers, each {FULL!r} or {SLIDING!r}")
    return list(kinds)


def _facts(config: Mapping[str, Any], kind: str) -> dict[str, Any]:
    return {"hf_model_type": kind, "architectures": config.get("architectures"),
            **{k: config.get(k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}}


def from_hf_config(config: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(minitrain model config, facts) for a config.json; UserError naming the key when it cannot be reproduced.

    The facts record what the source was (`hf_model_type`, `architectures`, the special ids)."""
    kind = config.get("model_type")
    if kind not in MODEL_TYPES:
        raise _refuse(where, "model_type", kind, f"minitrain's decoders read {', '.join(MODEL_TYPES)} "
                      "configs (GPT-2 models load into MiniGPT)")
    if kind.startswith("gemma"):
        return _from_gemma_config(config, where)
    act = config.get("hidden_act", "silu")
    if act != "silu":
        raise _refuse(where, "hidden_act", act, "the SwiGLU MLP of minitrain's Llama uses silu")
    if kind == "llama" and config.get("attention_bias", False):
        raise _refuse(where, "attention_bias", True, "Llama's attention_bias puts a bias on o_proj too; minitrain "
                      "has biases on q/k/v only (Qwen2's layout)")
    if config.get("mlp_bias", False):
        raise _refuse(where, "mlp_bias", True, "minitrain's SwiGLU MLP has no biases")
    if config.get("pretraining_tp", 1) not in (1, None):
        raise _refuse(where, "pretraining_tp", config["pretraining_tp"], "only 1 (no tensor-parallel slicing)")
    heads = _heads(config, where)
    eps = _eps(config, where, DEFAULT_EPS[kind])
    theta, scaling = _rope(config, where)
    default_context = {"llama": 2048, "qwen2": 32768, "mistral": 131072}[kind]  # transformers' config defaults
    max_seq_len = _positive_int(config, "max_position_embeddings", where, default_context)
    model = {"type": llama.FAMILY.name, **heads, "max_seq_len": max_seq_len, "rope_theta": theta,
             "rope_scaling": scaling, "rms_norm_eps": eps,
             "tie_embeddings": bool(config.get("tie_word_embeddings", DEFAULT_TIE[kind])),
             "attention_bias": kind == "qwen2"}
    model["head_dim"] = model.pop("head_dim")  # the key order of older files
    window = config.get("sliding_window")
    if window is not None and kind != "llama" and (kind == "mistral" or config.get("use_sliding_window", False)):
        window, n = _positive_int(config, "sliding_window", where), heads["n_layer"]
        first = config.get("max_window_layers", 28) if kind == "qwen2" else 0  # Qwen2Config's rule
        kinds = _layer_types(config, where, n, [SLIDING if i >= first else FULL for i in range(n)])
        if SLIDING in kinds:
            model.update(sliding_window=window, layer_types=None if kind == "mistral" else kinds)
    return model, _facts(config, kind)


def _from_gemma_config(config: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Gemma half of from_hf_config (module docstring)."""
    kind, facts = config["model_type"], _facts(config, config["model_type"])
    if kind == "gemma3":  # the multimodal wrapper: its text model only
        if not isinstance(text := config.get("text_config"), Mapping):
            raise _refuse(where, "text_config", text, "a gemma3 config needs its text_config (an object)")
        config, kind = {**text, "model_type": "gemma3_text"}, "gemma3_text"
    context, theta, local, attn_cap, final_cap, pattern = GEMMA_DEFAULTS[kind]
    act = config.get("hidden_activation") or config.get("hidden_act", "gelu_pytorch_tanh")
    if act != "gelu_pytorch_tanh":
        raise _refuse(where, "hidden_activation", act, "Gemma's GeGLU in minitrain uses gelu_pytorch_tanh")
    for key, why in (("attention_bias", "Gemma has no attention biases in minitrain"),
                     ("use_bidirectional_attention", "minitrain's decoders are causal")):
        if config.get(key):
            raise _refuse(where, key, config[key], why)
    if not config.get("tie_word_embeddings", True):
        raise _refuse(where, "tie_word_embeddings", False, "minitrain's Gemma ties its head to the embedding")
    heads = _heads(config, where)
    n = heads["n_layer"]
    pattern = _positive_int(config, "sliding_window_pattern", where, pattern)
    kinds = _layer_types(config, where, n, [SLIDING if (i + 1) % pattern else FULL for i in range(n)])
    params = config.get("rope_parameters")
    if isinstance(params, Mapping) and {FULL, SLIDING} & set(params):  # transformers 5: one per layer type
        theta, scaling = _rope({"rope_parameters": params.get(FULL) or {}}, where, theta, ("linear",))
        local_theta, local_scaling = _rope({"rope_parameters": params.get(SLIDING) or {}}, where, local or theta)
        if local_scaling is not None:
            raise _refuse(where, "rope_parameters", dict(params), "local layers' RoPE is not scaled in minitrain")
    else:
        theta, scaling = _rope(config, where, theta, ("linear",))
        local_theta = _number(config, "rope_local_base_freq", where, local)
    model = {"type": gemma.FAMILY.name, **heads,
             "max_seq_len": _positive_int(config, "max_position_embeddings", where, context),
             "rope_theta": theta, "rope_scaling": scaling,
             "rope_local_theta": None if kind == "gemma2" or local_theta == theta else local_theta,
             "rms_norm_eps": _eps(config, where, 1e-6),
             "query_pre_attn_scalar": _number(config, "query_pre_attn_scalar", where, 256),
             "qk_norm": kind == "gemma3_text",
             "attn_logit_softcapping": _number(config, "attn_logit_softcapping", where, attn_cap),
             "final_logit_softcapping": _number(config, "final_logit_softcapping", where, final_cap),
             "sliding_window": _positive_int(config, "sliding_window", where, 4096) if SLIDING in kinds else None,
             "layer_types": kinds}
    return model, facts


def to_hf_config(model: Mapping[str, Any], bos_id: int | None, eos_id: int | None, pad_id: int | None,
                 model_type: str | None = None) -> dict[str, Any]:
    """The config.json transformers builds the same network from: Qwen2ForCausalLM when the model has q/k/v
    biases, else LlamaForCausalLM (MistralForCausalLM when every layer slides), or `model_type`, when given and
    able to hold it; Gemma2ForCausalLM or Gemma3ForCausalLM for a Gemma."""
    if gemma.FAMILY.name == model.get("type"):
        return _to_gemma_config(model, bos_id, eos_id, pad_id)
    bias = bool(model.get("attention_bias", False))
    kind = model_type or llama.hf_model_type(model)
    if (kind == "qwen2") != bias:
        raise UserError(f"export: a {'model with' if bias else 'model without'} q/k/v biases cannot be written as "
                        f"{kind} ({'Qwen2 always has them' if kind == 'qwen2' else 'use qwen2'})", 2)
    window, kinds = model.get("sliding_window"), list(model.get("layer_types") or [])
    slides = [window is not None and (not kinds or kinds[i] == SLIDING) for i in range(int(model["n_layer"]))]
    if kind == "llama" and all(slides) and window is not None:
        kind = "mistral"  # transformers' Llama has no window; Mistral is Llama with one on every layer
    elif kind != "qwen2" and any(slides):
        raise UserError(f"export: {kind} slides every layer or none; this model's layer_types {kinds} need qwen2 "
                        "(q/k/v biases)", 2)
    head_dim = model.get("head_dim") or model["d_model"] // model["n_head"]
    config: dict[str, Any] = {
        "architectures": [ARCHITECTURES[kind]],
        "model_type": kind,
        **_shape_keys(model, head_dim, {"hidden_act": "silu"}),
        "rope_theta": float(model.get("rope_theta", DEFAULT_THETA)),
        "rope_scaling": dict(model["rope_scaling"]) if model.get("rope_scaling") else None,
        "tie_word_embeddings": bool(model.get("tie_embeddings", True)),
        "attention_dropout": 0.0,
        **shared_keys(bos_id, eos_id, pad_id),
    }
    if kind == "llama":
        config.update(attention_bias=False, mlp_bias=False, pretraining_tp=1)
    elif kind == "mistral":
        config.update(sliding_window=int(window))
    else:
        config.update(use_sliding_window=any(slides), sliding_window=int(window) if any(slides) else None,
                      max_window_layers=slides.index(True) if any(slides) else int(model["n_layer"]))
        if any(slides):
            config["layer_types"] = [SLIDING if s else FULL for s in slides]
    return config


def _shape_keys(model: Mapping[str, Any], head_dim: int, activation: dict[str, str]) -> dict[str, Any]:
    return {"vocab_size": int(model["vocab_size"]), "hidden_size": int(model["d_model"]),
            "intermediate_size": int(model["d_ff"]), "num_hidden_layers": int(model["n_layer"]),
            "num_attention_heads": int(model["n_head"]),
            "num_key_value_heads": int(model.get("n_kv_head") or model["n_head"]), "head_dim": int(head_dim),
            **activation, "max_position_embeddings": int(model["max_seq_len"]),
            "rms_norm_eps": float(model.get("rms_norm_eps", 1e-5))}


def _to_gemma_config(model: Mapping[str, Any], bos_id: int | None, eos_id: int | None, pad_id: int | None
                     ) -> dict[str, Any]:
    """A Gemma's config.json, in both spellings of RoPE (transformers 4's keys and 5's rope_parameters)."""
    layout = gemma.hf_layout(model)
    head_dim = model.get("head_dim") or model["d_model"] // model["n_head"]
    kinds = layer_kinds(model)
    theta, local = float(model["rope_theta"]), float(model.get("rope_local_theta") or model["rope_theta"])
    scaling = dict(model["rope_scaling"]) if model.get("rope_scaling") else None
    if layout == "gemma2" and (local != theta or scaling):
        raise UserError("export: Gemma 2 has one RoPE base and no scaling; a qk_norm: true model is a Gemma 3", 2)
    if not float(scalar := model.get("query_pre_attn_scalar") or head_dim).is_integer():
        raise UserError(f"export: query_pre_attn_scalar {scalar} is not a whole number (transformers' Gemma)", 2)
    config: dict[str, Any] = {
        "architectures": [ARCHITECTURES[layout]], "model_type": "gemma2" if layout == "gemma2" else "gemma3_text",
        **_shape_keys(model, head_dim, {"hidden_activation": "gelu_pytorch_tanh"}),
        "query_pre_attn_scalar": int(scalar),
        "attn_logit_softcapping": model.get("attn_logit_softcapping"),
        "final_logit_softcapping": model.get("final_logit_softcapping"),
        "sliding_window": int(model.get("sliding_window") or model["max_seq_len"]), "layer_types": kinds,
        "rope_theta": theta, "rope_scaling": scaling, "tie_word_embeddings": True, "attention_bias": False,
        "attention_dropout": 0.0, **shared_keys(bos_id, eos_id, pad_id),
    }
    if layout == "gemma3":
        config.update(rope_local_base_freq=local, rope_parameters={
            FULL: {"rope_type": "default", **(scaling or {}), "rope_theta": theta},
            SLIDING: {"rope_type": "default", "rope_theta": local}})
    return config


# --- state dicts -------------------------------------------------------------------------------------------------

def hf_shapes(model: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every tensor of the Hugging Face state dict of a minitrain Llama or Gemma config, with its HF shape: the
    model's own parameter list, each Linear weight ([in, out] in minitrain) turned to [out, in]."""
    return {name: shape[::-1] if _transposed(name) else shape for name, shape in parameter_shapes(model)}


def _transposed(name: str) -> bool:
    """A Linear weight: the projections and an untied lm_head."""
    return name.endswith("_proj.weight") or name == "lm_head.weight"


def check_hf_state(state: Mapping[str, np.ndarray], model: Mapping[str, Any], where: str) -> None:
    """One UserError listing what is missing, unexpected or mis-shaped in an HF-layout state dict. The tensor
    count is compared first (`tensor_count` lists no names): a config claiming 10**12 layers is refused at once."""
    if (needed := tensor_count(model)) > 2 * len(state) + 100:
        raise UserError(f"{where}: weights do not fit the model config: {len(state)} tensors, it needs {needed}", 2)
    if shown := misfits(state, hf_shapes(model)):
        raise UserError(f"{where}: weights do not fit the model config: {shown}", 2)


def from_hf_state(state: dict[str, np.ndarray], model: Mapping[str, Any], where: str) -> dict[str, np.ndarray]:
    """HF layout -> minitrain layout (float32, Linear weights transposed to [in, out]), checked against `model`.

    `state` is emptied as its tensors are converted, so a big model is never held twice in memory (pass a copy,
    `dict(state)`, to keep the original dict filled; the arrays themselves are never modified)."""
    for name in [n for n in state if n.endswith("rotary_emb.inv_freq")]:  # a buffer in old files, not a weight
        del state[name]
    if model.get("tie_embeddings", True):
        state.pop("lm_head.weight", None)
    check_hf_state(state, model, where)
    out = {}
    for name in list(state):
        a = state.pop(name)
        out[name] = np.ascontiguousarray(a.T if _transposed(name) else a, dtype=np.float32)
    return out


def to_hf_state(state: Mapping[str, np.ndarray], model: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """minitrain layout -> HF layout (float32, Linear weights as [out, in]); a tied model gets no lm_head."""
    out = {n: np.ascontiguousarray(a.T if _transposed(n) else a, dtype=np.float32) for n, a in state.items()
           if not (n == "lm_head.weight" and model.get("tie_embeddings", True))}
    check_hf_state(out, model, "export")
    return out
