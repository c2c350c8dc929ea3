"""Hugging Face Llama / Qwen2 / Mistral configs <-> minitrain's Llama family, and their state dicts.

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
partial rotary factor, tensor-parallel pretraining_tp. A sliding window (Mistral, Qwen2's use_sliding_window)
only changes attention for sequences longer than the window, so the model is taken with max_seq_len capped at the
window: exactly the same network for every sequence it accepts (the facts returned say so).

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
from minitrain.models import llama
from minitrain.models.registry import tensor_count
from minitrain.nn.rotary import LLAMA3_KEYS

MODEL_TYPES = ("llama", "qwen2", "mistral")
ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM"}
# transformers' defaults where a config.json leaves a key out (LlamaConfig / Qwen2Config / MistralConfig).
DEFAULT_EPS = {"llama": 1e-6, "qwen2": 1e-6, "mistral": 1e-6}
DEFAULT_TIE = {"llama": False, "qwen2": False, "mistral": False}
DEFAULT_THETA = 10000.0


def _refuse(where: str, key: str, value: Any, why: str) -> UserError:
    return UserError(f"{where}: {key} = {value!r}: {why}", 2)


def _positive_int(config: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if type(value) is not int or value <= 0:
        raise _refuse(where, key, value, "must be a positive integer")
    return value


def _rope(config: Mapping[str, Any], where: str) -> tuple[float, dict[str, Any] | None]:
    """(θ, scaling) from either spelling: old `rope_theta` + `rope_scaling`, or transformers 5's `rope_parameters`."""
    params = config.get("rope_parameters")
    if params is not None and not isinstance(params, Mapping):
        raise _refuse(where, "rope_parameters", params, "must be an object or null")
    scaling = params if params is not None else config.get("rope_scaling")
    if scaling is not None and not isinstance(scaling, Mapping):
        raise _refuse(where, "rope_scaling", scaling, "must be an object or null")
    theta = config.get("rope_theta", (scaling or {}).get("rope_theta", DEFAULT_THETA))
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
    if kind != "llama3":
        raise _refuse(where, "rope_type", kind, "minitrain implements RoPE types 'default' and 'llama3' only")
    missing = [k for k in LLAMA3_KEYS if type(scaling.get(k)) not in (int, float) or not math.isfinite(scaling[k])]
    if missing:
        raise _refuse(where, "rope_scaling", dict(scaling), f"llama3 scaling needs {', '.join(missing)}")
    return float(theta), {"rope_type": "llama3", **{k: scaling[k] for k in LLAMA3_KEYS}}


def from_hf_config(config: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(minitrain model config, facts) for a config.json; UserError naming the key when it cannot be reproduced.

    The facts record what the source was (`hf_model_type`, `architectures`, the special ids) and any
    adjustment made (`max_seq_len_capped_by_sliding_window`).
    """
    kind = config.get("model_type")
    if kind not in MODEL_TYPES:
        raise _refuse(where, "model_type", kind, f"minitrain's Llama family reads {', '.join(MODEL_TYPES)} "
                      "configs (GPT-2 models load into MiniGPT)")
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
    d_model = _positive_int(config, "hidden_size", where)
    n_head = _positive_int(config, "num_attention_heads", where)
    n_kv = config.get("num_key_value_heads") or n_head
    if type(n_kv) is not int or n_kv <= 0:
        raise _refuse(where, "num_key_value_heads", n_kv, "must be a positive integer")
    head_dim = None if config.get("head_dim") is None else _positive_int(config, "head_dim", where)
    heads = {"n_head": n_head, "n_kv_head": n_kv, "d_model": d_model, "head_dim": head_dim}
    for key, why in llama.FAMILY.check(heads):  # the Llama family's rules, in config.json's names
        hf_key = {"n_head": "num_attention_heads", "n_kv_head": "num_key_value_heads"}.get(key, key)
        raise _refuse(where, hf_key, heads[key], why)
    eps = config.get("rms_norm_eps", DEFAULT_EPS[kind])
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
        raise _refuse(where, "rms_norm_eps", eps, "must be a small positive number")
    theta, scaling = _rope(config, where)
    default_context = {"llama": 2048, "qwen2": 32768, "mistral": 131072}[kind]  # transformers' config defaults
    max_seq_len = _positive_int(config, "max_position_embeddings", where, default_context)
    facts: dict[str, Any] = {"hf_model_type": kind, "architectures": config.get("architectures"),
                             **{k: config.get(k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}}
    window = config.get("sliding_window")
    active = window is not None and (kind == "mistral" or config.get("use_sliding_window", False))
    if active:
        window = _positive_int(config, "sliding_window", where)
        if window < max_seq_len:
            facts["max_seq_len_capped_by_sliding_window"] = {"max_position_embeddings": max_seq_len,
                                                             "sliding_window": window}
            max_seq_len = window
    model = {
        "type": llama.FAMILY.name,
        "n_layer": _positive_int(config, "num_hidden_layers", where),
        "n_head": n_head,
        "n_kv_head": n_kv,
        "d_model": d_model,
        "d_ff": _positive_int(config, "intermediate_size", where),
        "vocab_size": _positive_int(config, "vocab_size", where),
        "max_seq_len": max_seq_len,
        "rope_theta": theta,
        "rope_scaling": scaling,
        "rms_norm_eps": float(eps),
        "tie_embeddings": bool(config.get("tie_word_embeddings", DEFAULT_TIE[kind])),
        "attention_bias": kind == "qwen2",
    }
    model["head_dim"] = head_dim or d_model // n_head
    return model, facts


def to_hf_config(model: Mapping[str, Any], bos_id: int | None, eos_id: int | None, pad_id: int | None,
                 model_type: str | None = None) -> dict[str, Any]:
    """The config.json transformers builds the same network from: Qwen2ForCausalLM when the model has q/k/v
    biases, else LlamaForCausalLM (or `model_type`, when given and able to hold it)."""
    bias = bool(model.get("attention_bias", False))
    kind = model_type or llama.hf_model_type(model)
    if (kind == "qwen2") != bias:
        raise UserError(f"export: a {'model with' if bias else 'model without'} q/k/v biases cannot be written as "
                        f"{kind} ({'Qwen2 always has them' if kind == 'qwen2' else 'use qwen2'})", 2)
    head_dim = model.get("head_dim") or model["d_model"] // model["n_head"]
    config: dict[str, Any] = {
        "architectures": [ARCHITECTURES[kind]],
        "model_type": kind,
        "vocab_size": int(model["vocab_size"]),
        "hidden_size": int(model["d_model"]),
        "intermediate_size": int(model["d_ff"]),
        "num_hidden_layers": int(model["n_layer"]),
        "num_attention_heads": int(model["n_head"]),
        "num_key_value_heads": int(model.get("n_kv_head") or model["n_head"]),
        "head_dim": int(head_dim),
        "hidden_act": "silu",
        "max_position_embeddings": int(model["max_seq_len"]),
        "rms_norm_eps": float(model.get("rms_norm_eps", 1e-5)),
        "rope_theta": float(model.get("rope_theta", DEFAULT_THETA)),
        "rope_scaling": dict(model["rope_scaling"]) if model.get("rope_scaling") else None,
        "tie_word_embeddings": bool(model.get("tie_embeddings", True)),
        "attention_dropout": 0.0,
        **shared_keys(bos_id, eos_id, pad_id),
    }
    if kind == "llama":
        config.update(attention_bias=False, mlp_bias=False, pretraining_tp=1)
    else:
        config.update(use_sliding_window=False, sliding_window=None, max_window_layers=int(model["n_layer"]))
    return config


# --- state dicts -------------------------------------------------------------------------------------------------

def hf_shapes(model: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every tensor of the Hugging Face state dict of a minitrain Llama config, with its HF shape: the model's own
    parameter list, each Linear weight ([in, out] in minitrain) turned to [out, in]."""
    return {name: shape[::-1] if _transposed(name) else shape for name, shape in llama.parameter_shapes(model)}


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
