"""The model families a config can name (`model.type`), and building one from its keys.

    minigpt   MiniGPT, GPT-2 at course size (minitrain/models/minigpt.py); the default, and the lab's model
    mlp_lm    MLPLanguageModel, a fixed-context MLP language model (minitrain/models/mlp_lm.py)
    sequential  SequentialModel, a stack of nn layers listed in the config, for tables (minitrain/models/sequential.py)

A model's `config` dict holds its constructor keys; it is saved in every model file and checkpoint, so
`build_model(saved_config)` rebuilds the same architecture. MiniGPT's config has no `type` key (its files predate
the others, and their bytes must not change), so a config without one is a MiniGPT.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.common.registry import keyword_defaults
from minitrain.models import minigpt, mlp_lm, sequential
from minitrain.nn import Module

MODELS: dict[str, type[Module]] = {"minigpt": minigpt.MiniGPT, "mlp_lm": mlp_lm.MLPLanguageModel,
                                   "sequential": sequential.SequentialModel}
LANGUAGE_MODELS = ("minigpt", "mlp_lm")  # the families trained on text; sequential models read tables
DEFAULT_TYPE = "minigpt"
_NOT_CONFIG = ("rng", "dtype")  # constructor arguments that are not part of the architecture


def model_type(config: Mapping[str, Any]) -> str:
    """The family a model config names; UserError for an unknown one."""
    kind = config.get("type", DEFAULT_TYPE)
    if kind not in MODELS:
        raise UserError(f"model.type: unknown model type {kind!r} (choose one of {', '.join(MODELS)})", 2)
    return kind


def model_keys(kind: str) -> dict[str, Any]:
    """The architecture keys of a family, each with its default (inspect.Parameter.empty when required)."""
    return keyword_defaults(MODELS[kind], skip=_NOT_CONFIG)


def build_model(
    config: Mapping[str, Any], rng: np.random.Generator | int = 0, dtype: type = np.float32
) -> Module:
    """A freshly initialised model of the family and shape `config` gives (keys of other families are ignored)."""
    kind = model_type(config)
    keys = {k: v for k, v in config.items() if k in model_keys(kind)}
    return MODELS[kind](**keys, rng=rng, dtype=dtype)


def parameter_shapes(config: Mapping[str, Any]) -> list[tuple[str, tuple[int | None, ...]]]:
    """Every parameter's name and shape for `config`, without building (or allocating) the model (a sequential
    model's width not yet known from the data is None)."""
    if model_type(config) == "sequential":
        return sequential.parameter_shapes(config["layers"])
    if model_type(config) == "mlp_lm":
        return mlp_lm.parameter_shapes(config["vocab_size"], config["context"], config["d_embed"], config["hidden"])
    return minigpt.parameter_shapes(*(config[k] for k in ("n_layer", "d_model", "d_ff", "vocab_size", "max_seq_len")))


def tensor_count(config: Mapping[str, Any]) -> int:
    """How many tensors a model of `config` has, without listing them: a damaged or crafted file may claim a
    million layers, and the count alone already tells that its weights cannot fit."""
    if model_type(config) == DEFAULT_TYPE:
        sizes = [int(config[k]) for k in ("d_model", "d_ff", "vocab_size", "max_seq_len")]
        fixed, with_one = (len(minigpt.parameter_shapes(n, *sizes)) for n in (0, 1))
        return fixed + (with_one - fixed) * int(config["n_layer"])
    return len(parameter_shapes(config))


def linear_module_paths(config: Mapping[str, Any]) -> list[str]:
    """The dotted paths of the model's linear layers (what LoRA adapts and quantization quantizes), without building
    it: in both families, a linear layer is a 2-D `weight` with a `bias` beside it (embeddings have none)."""
    names = dict(parameter_shapes(config))
    return [name.removesuffix(".weight") for name, shape in names.items()
            if name.endswith(".weight") and len(shape) == 2 and name.removesuffix("weight") + "bias" in names]
