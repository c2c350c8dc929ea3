"""MiniGPT <-> Hugging Face GPT-2: the two config vocabularies and the tensor table they imply.

MiniGPT is GPT-2 at course size, with GPT-2's parameter names and shapes, so moving a model between minitrain
and `transformers` is a renaming of config keys, nothing more:

    minitrain      GPT-2 config.json           meaning
    n_layer        n_layer                     transformer blocks
    n_head         n_head                      attention heads per block
    d_model        n_embd                      residual stream width D
    d_ff           n_inner                     MLP hidden width F (GPT-2's default is 4·D)
    vocab_size     vocab_size                  V
    max_seq_len    n_positions                 P, learned positions
    dropout        resid/embd/attn_pdrop       one rate for all three

    attn_scale     scale_attn_weights          only 1/√(D/H) (true, the default) or 1 (false)

Fixed choices both sides must agree on: GELU with the tanh approximation (`gelu_new`), LayerNorm eps 1e-5, and
the output projection tied to the token embedding (`lm_head = wte`). Only MiniGPT has a GPT-2 twin: the other
families (`model.type`) cannot be exported to transformers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minitrain.common.errors import UserError
from minitrain.models.registry import family_of, layout_of, model_type, parameter_shapes, tensor_count

WEIGHTS_FILE = "model.safetensors"  # the weights of a Hugging Face model folder
LAYER_NORM_EPS = 1e-5
# transformers' names for GELU with the tanh approximation; "gelu" would be the exact erf form.
TANH_GELU = ("gelu_new", "gelu_pytorch_tanh")


def check_state_dict(state: Mapping[str, Any], model_config: Mapping[str, Any], where: str) -> None:
    """Raise one UserError listing every missing, unexpected or mis-shaped tensor; `where` names the source.

    The tensor count is compared first (`models.registry.tensor_count`, which does not list the names), so a config
    that claims a million layers is refused at once instead of having a million layers' names listed.
    """
    config = ", ".join(f"{k}={v}" for k, v in model_config.items())
    needed = tensor_count(model_config)
    if len(state) != needed:
        raise UserError(f"{where}: weights do not fit the model config ({config}): {len(state)} tensors, the "
                        f"config needs {needed}", 2)
    if shown := misfits(state, dict(parameter_shapes(model_config))):
        raise UserError(f"{where}: weights do not fit the model config ({config}): {shown}", 2)


def misfits(state: Mapping[str, Any], expected: Mapping[str, tuple[int, ...]]) -> str:
    """The tensors of `state` missing, unexpected or mis-shaped against `expected` (name -> shape), the first five
    joined by "; " (and how many more); "" when the state fits."""
    problems = [f"missing {name} {shape}" for name, shape in expected.items() if name not in state]
    problems += [f"unexpected {name}" for name in state if name not in expected]
    problems += [f"{name} has shape {tuple(state[name].shape)}, the config needs {shape}"
                 for name, shape in expected.items() if name in state and tuple(state[name].shape) != shape]
    return "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")


def check_exportable(model_config: Mapping[str, Any]) -> None:
    """UserError unless transformers' GPT-2 can represent the model (a MiniGPT with GPT-2's attention scale)."""
    kind = model_type(model_config)
    if family_of(model_config).reads == "table":
        raise UserError("export: only MiniGPT (model.type minigpt) has a transformers twin (GPT-2), and the Llama "
                        "family its own; this model is a sequential table model: its run folder and model file hold "
                        "everything `minitrain predict RUN_DIR rows.csv -o out.csv` needs")
    if layout_of(model_config) != "gpt2":
        raise UserError(f"export: only MiniGPT (model.type minigpt) has a transformers twin (GPT-2), and the Llama "
                        f"family its own; this model is {kind}. Sample and evaluate it with minitrain (`minitrain "
                        "sample RUN_DIR ...`)")
    scale = model_config.get("attn_scale")
    if scale not in (None, 1.0):
        raise UserError(f"export: attn_scale {scale:g}: GPT-2 scales attention by 1/sqrt(head size) or not at all "
                        "(attn_scale 1)")


def to_gpt2_config(model_config: Mapping[str, Any], pad_id: int, bos_id: int, eos_id: int) -> dict[str, Any]:
    """The config.json `GPT2LMHeadModel.from_pretrained` reads, for a MiniGPT config; UserError for a model
    transformers' GPT-2 cannot represent."""
    check_exportable(model_config)
    dropout = float(model_config.get("dropout", 0.0))
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": int(model_config["vocab_size"]),
        "n_positions": int(model_config["max_seq_len"]),
        "n_embd": int(model_config["d_model"]),
        "n_layer": int(model_config["n_layer"]),
        "n_head": int(model_config["n_head"]),
        "n_inner": int(model_config["d_ff"]),
        "activation_function": TANH_GELU[0],
        "resid_pdrop": dropout,
        "embd_pdrop": dropout,
        "attn_pdrop": dropout,
        "layer_norm_epsilon": LAYER_NORM_EPS,
        "scale_attn_weights": model_config.get("attn_scale") is None,
        "tie_word_embeddings": True,
        **shared_keys(bos_id, eos_id, pad_id),
    }


def shared_keys(bos_id: int | None, eos_id: int | None, pad_id: int | None) -> dict[str, Any]:
    """The config.json keys every export writes alike (GPT-2's and the Llama family's): the special ids, float32."""
    return {"initializer_range": 0.02, "use_cache": True, "bos_token_id": bos_id, "eos_token_id": eos_id,
            "pad_token_id": pad_id, "torch_dtype": "float32"}


def from_gpt2_config(config: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The minitrain model section for a GPT-2 config.json; UserError when MiniGPT cannot represent it."""
    def need(ok: bool, key: str, why: str) -> None:
        if not ok:
            raise UserError(f"{where}: {key} = {config.get(key)!r}: {why}", 2)

    def number(key: str, default: float) -> float:
        value = config.get(key, default)
        need(isinstance(value, float) or (type(value) is int and abs(value) < 2**53), key, "must be a number")
        return float(value)

    need(config.get("model_type") == "gpt2", "model_type", "only GPT-2 models can be loaded into MiniGPT")
    for key in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"):
        need(type(config.get(key)) is int and config[key] > 0, key, "must be a positive integer")
    need(config.get("n_inner") is None or (type(config["n_inner"]) is int and config["n_inner"] > 0), "n_inner",
         "must be a positive integer or null")
    need(config.get("activation_function", TANH_GELU[0]) in TANH_GELU, "activation_function",
         f"MiniGPT uses GELU with the tanh approximation ({TANH_GELU[0]})")
    need(abs(number("layer_norm_epsilon", LAYER_NORM_EPS) - LAYER_NORM_EPS) < 1e-12, "layer_norm_epsilon",
         f"MiniGPT's LayerNorm uses eps = {LAYER_NORM_EPS}")
    dropout = number("resid_pdrop", 0.0)
    need(0.0 <= dropout < 1.0, "resid_pdrop", "must be in [0, 1)")
    need(config.get("tie_word_embeddings", True) is True, "tie_word_embeddings",
         "MiniGPT ties the output layer to the token embedding")
    need(not config.get("scale_attn_by_inverse_layer_idx", False), "scale_attn_by_inverse_layer_idx",
         "MiniGPT scales attention by 1/sqrt(head size) only")
    need(config["n_embd"] % config["n_head"] == 0, "n_head", f"must divide n_embd = {config['n_embd']}")
    d_ff = config.get("n_inner") or 4 * config["n_embd"]
    section = {
        "n_layer": config["n_layer"],
        "n_head": config["n_head"],
        "d_model": config["n_embd"],
        "d_ff": d_ff,
        "vocab_size": config["vocab_size"],
        "max_seq_len": config["n_positions"],
        "dropout": dropout,
    }
    return section if config.get("scale_attn_weights", True) else {**section, "attn_scale": 1.0}
