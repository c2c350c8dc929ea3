"""The models a merge reads, and the check that they can be merged at all.

    load_parent(spec) -> Parent(state, model_config, tokenizer, kind, facts, where)

    spec                                          kind         tokenizer
    a run folder, model file, export folder       minitrain    the character vocabulary it records (None when a
      (a LoRA run: its adapters merged into                      bare model file does not)
      its base first, minitrain/hub/sources.py)
    a .gguf file, Hugging Face folder or Hub id   pretrained   the base's own (minitrain/hub/pretrained.py)
      of a Llama-family model or a GPT-2 base
    a run on such a base (RUN/tokenizer/)         pretrained   the run's copy of the base's (adapters merged)

`check_compatible` refuses models that do not hold the same tensors: the first tensor that differs (missing, or of
another shape) is named with both shapes; then a model config key that changes no shape (n_head, rope_theta, ...);
then the tokenizer (the same characters in the same order, or the same BPE vocabulary and merges). Averaging
weights only means something between models of one architecture whose ids mean the same tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from minitrain.common.errors import UserError
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.pretrained import load_pretrained_base
from minitrain.hub.pretrained_runs import TOKENIZER_DIR, run_state
from minitrain.hub.sources import load_pretrained
from minitrain.hub.text_models import is_pretrained_base

IGNORED_KEYS = ("dropout",)  # a training setting: it changes no weight and no output of the merged model


class Parent(NamedTuple):
    state: dict[str, np.ndarray]
    model_config: dict[str, Any]
    tokenizer: Any  # CharTokenizer, PretrainedTokenizer, or None (a model file that does not record its vocab)
    kind: str  # "minitrain" (written as a minitrain model file) or "pretrained" (written as an HF folder)
    facts: dict[str, Any]  # what hub/pretrained.py says of a pretrained base (hf_model_type, ...)
    where: str


def load_parent(spec: str) -> Parent:
    """Weights, config and tokenizer of any source listed in the module docstring, in float32."""
    if is_pretrained_base(spec):
        model_config, state, tokenizer, facts = load_pretrained_base(spec)
        return Parent(state, dict(model_config), tokenizer, "pretrained", facts, spec)
    if (Path(spec) / TOKENIZER_DIR / "tokenizer.json").is_file():
        model_config, state, tokenizer = run_state(spec)  # its adapters, if any, folded in
        return Parent(state, model_config, tokenizer, "pretrained", {}, spec)
    pretrained = load_pretrained(spec)
    tokenizer = CharTokenizer.load(pretrained.vocab_path) if pretrained.vocab_path is not None else None
    return Parent(pretrained.state, pretrained.model_config, tokenizer, "minitrain", {}, pretrained.where)


def tensor_order(state: dict[str, np.ndarray]) -> list[str]:
    """The tensor names in reading order: by name, with the layer numbers compared as numbers (h.2 before h.10),
    so "the first tensor that differs" is the one nearest the input, whatever order a file stored them in."""
    return sorted(state, key=lambda name: [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in name.split(".")])


def check_compatible(parents: list[Parent], names: list[str]) -> None:
    """UserError (exit code 2) naming the first tensor, config key or tokenizer that differs from the first model's
    (`names`: how the config names each model)."""
    first, name0 = parents[0], names[0]
    for parent, name in zip(parents[1:], names[1:], strict=True):
        for tensor in tensor_order(first.state):
            a = first.state[tensor]
            b = parent.state.get(tensor)
            if b is None:
                raise UserError(f"merge: {name} has no tensor {tensor} (shape {a.shape} in {name0}): not the same "
                                f"architecture", 2)
            if b.shape != a.shape:
                raise UserError(f"merge: tensor {tensor} is {b.shape} in {name} but {a.shape} in {name0}: not the "
                                f"same architecture", 2)
        extra = [t for t in tensor_order(parent.state) if t not in first.state]
        if extra:
            raise UserError(f"merge: {name} has a tensor {name0} lacks ({extra[0]}, shape "
                            f"{parent.state[extra[0]].shape}): not the same architecture", 2)
        _check_config(first.model_config, parent.model_config, name0, name)
        problem = tokenizer_difference(first.tokenizer, parent.tokenizer)
        if problem:
            raise UserError(f"merge: {name} and {name0} do not share a tokenizer ({problem}): the same id would "
                            f"mean different tokens", 2)


def _check_config(a: dict[str, Any], b: dict[str, Any], name_a: str, name_b: str) -> None:
    keys = [*a, *(k for k in b if k not in a)]
    for key in keys:
        if key not in IGNORED_KEYS and a.get(key) != b.get(key):
            raise UserError(f"merge: model config {key} is {b.get(key)!r} in {name_b} but {a.get(key)!r} in "
                            f"{name_a}: not the same architecture", 2)


def tokenizer_difference(a: Any, b: Any) -> str | None:
    """Why two tokenizers differ, or None when they are the same (or one is unknown: a bare model file)."""
    if a is None or b is None:
        return None
    if type(a) is not type(b):
        return f"a {type(a).__name__} and a {type(b).__name__}"
    if isinstance(a, CharTokenizer):
        if a.chars != b.chars:
            return f"character vocabularies of {len(a.chars)} and {len(b.chars)} characters that differ"
        return None
    if a.tokenizer.to_str() != b.tokenizer.to_str():
        return f"{a.where} and {b.where} hold different vocabularies or merges"
    if a.special != b.special:
        return f"special tokens {a.special} and {b.special}"
    return None
