"""The model families a config can name (`model.type`): one line each, and building a model from its keys.

    minigpt     MiniGPT, GPT-2 at course size (minitrain/models/minigpt.py); the default, and the lab's model
    mlp_lm      MLPLanguageModel, a fixed-context MLP language model (minitrain/models/mlp_lm.py)
    sequential  SequentialModel, a stack of nn layers listed in the config, for tables (minitrain/models/sequential.py)
    llama       Llama, the Llama / Qwen2 / Mistral decoder: RMSNorm, rotary, SwiGLU, grouped-query attention
                (minitrain/models/llama.py)
    gemma       Gemma, Gemma 2 and 3: the decoder with sandwich norms, q/k norms, GeGLU, local and global layers
                (minitrain/models/gemma.py)

Each family's file ends with its record (`FAMILY`, minitrain/models/family.py); a new family is a new file and
one line in `FAMILY_MODULES`. A model's `config` dict holds its constructor keys; it is saved in every model file and
checkpoint, so `build_model(saved_config)` rebuilds the same architecture. MiniGPT's config has no `type` key
(its files predate the others, and their bytes must not change), so a config without one is a MiniGPT.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

import numpy as np

from minitrain.common.registry import Registry, keyword_defaults
from minitrain.models.family import ModelFamily, Shapes
from minitrain.nn import Module

# One line per family: the module of minitrain/models/ that ends with its `FAMILY` record.
FAMILY_MODULES = (
    "minigpt",
    "mlp_lm",
    "sequential",
    "llama",
    "gemma",
    "rnn_lm",
)
FAMILIES: Registry[ModelFamily] = Registry(
    "model family", (import_module(f"minitrain.models.{name}").FAMILY for name in FAMILY_MODULES))
DEFAULT_TYPE = "minigpt"
LANGUAGE_MODELS = tuple(name for name, family in FAMILIES.items() if family.reads == "text")
_NOT_CONFIG = ("rng", "dtype")  # constructor arguments that are not part of the architecture


def model_type(config: Mapping[str, Any]) -> str:
    """The family a model config names; UserError for an unknown one."""
    return FAMILIES.pick(config.get("type", DEFAULT_TYPE), "model.type").name


def family_of(config: Mapping[str, Any]) -> ModelFamily:
    """The record of the family a model config names (a config without `type` is a MiniGPT's)."""
    return FAMILIES[model_type(config)]


def layout_of(config: Mapping[str, Any]) -> str | None:
    """The layout a model of `config` exports as (its family's `layout`: llama, qwen2 or gpt2); None: none."""
    layout = family_of(config).layout
    return layout(config) if layout else None


# What a config may ask of a family: whether its record has it, what it is, and why a family without it cannot.
CAPABILITIES: dict[str, tuple[Callable[[ModelFamily], bool], str, str]] = {
    "packing": (lambda f: f.packs_rows, "read packed rows", "it has no segment ids, so the documents packed into a "
                                                            "row would attend to each other"),
    "gguf": (lambda f: f.layout is not None, "be written as a GGUF", "llama.cpp has no layout for it"),
    "recomputation": (lambda f: hasattr(f.model, "gradient_checkpointing"), "recompute its layers in backward",
                      "its model class has no gradient_checkpointing switch"),
}


def refusal(kind: str, capability: str) -> str | None:
    """None when family `kind` has `capability` (a key of CAPABILITIES); else the one line every room refuses it
    with: `model.type K cannot WHAT (WHY; only F, G can)`."""
    has, what, why = CAPABILITIES[capability]
    if has(FAMILIES[kind]):
        return None
    return f"model.type {kind} cannot {what} ({why}; only {', '.join(n for n, f in FAMILIES.items() if has(f))} can)"


def model_keys(kind: str) -> dict[str, Any]:
    """The architecture keys of a family, each with its default (inspect.Parameter.empty when required)."""
    return keyword_defaults(FAMILIES[kind].model, skip=_NOT_CONFIG)


def build_model(
    config: Mapping[str, Any], rng: np.random.Generator | int = 0, dtype: type = np.float32
) -> Module:
    """A freshly initialised model of the family and shape `config` gives (keys of other families are ignored)."""
    kind = model_type(config)
    accepted = model_keys(kind)  # the constructor's signature, read once, not once per key
    return FAMILIES[kind].model(**{k: v for k, v in config.items() if k in accepted}, rng=rng, dtype=dtype)


def parameter_shapes(config: Mapping[str, Any]) -> Shapes:
    """Every parameter's name and shape for `config`, without building (or allocating) the model (a sequential
    model's width not yet known from the data is None)."""
    return family_of(config).parameter_shapes(config)


def tensor_count(config: Mapping[str, Any]) -> int:
    """How many tensors a model of `config` has, without listing them all: a damaged or crafted file may claim a
    million layers, and the count alone already tells that its weights cannot fit. A model of `n_layer` alike
    layers is counted from its lists at 0 and 1 layers."""
    return _by_layers(config, len)


def parameter_count(config: Mapping[str, Any]) -> int:
    """How many weights a model of `config` has, counted like `tensor_count` (no list of every layer's shapes)."""
    return _by_layers(config, lambda shapes: sum(math.prod(shape) for _, shape in shapes))


def _by_layers(config: Mapping[str, Any], measure: Callable[[Shapes], int]) -> int:
    shapes = family_of(config).parameter_shapes
    if "n_layer" not in config:
        return measure(shapes(config))
    fixed, with_one = (measure(shapes({**config, "n_layer": n})) for n in (0, 1))
    return fixed + (with_one - fixed) * int(config["n_layer"])


def linear_module_paths(config: Mapping[str, Any]) -> list[str]:
    """The dotted paths of the model's linear layers (what LoRA adapts and quantization quantizes), without building
    it: the family's record says which (`linear_paths`), or else a linear layer is a 2-D `weight` with a `bias`
    beside it (embeddings have none)."""
    family = family_of(config)
    if family.linear_paths is not None:
        return family.linear_paths(config)
    names = dict(parameter_shapes(config))
    return [name.removesuffix(".weight") for name, shape in names.items()
            if name.endswith(".weight") and len(shape) == 2 and name.removesuffix("weight") + "bias" in names]
