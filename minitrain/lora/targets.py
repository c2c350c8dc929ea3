"""Which linear layers a LoRA config adapts: `lora.target_modules` and `lora.target_modules_pattern`.

A model's linear layers have dotted module paths (MiniGPT's: `transformer.h.0.attn.c_attn`, `...attn.c_proj`,
`...mlp.c_fc`, `...mlp.c_proj` in every block). As in PEFT:

- a `target_modules` entry names the layers whose path is it or ends with "." + it: `c_attn` is every block's
  c_attn, `c_proj` both projections of every block, `attn.c_proj` the attention's only, a full path one layer
  (a glob such as `transformer.h.0.*` works too);
- `target_modules_pattern` is a regular expression that must match a whole path (re.fullmatch).

Both may be given; the layers either names are adapted. Each entry, and the pattern, must name at least one
linear layer: a typo must not leave a model unadapted.

The YAML-mode spec writes Llama's names. A model of the Llama family (minitrain/models/llama.py) has layers of
those names, and a name that names a layer of the model means that layer, as written. MiniGPT has not: GPT-2 has
one fused projection for queries, keys and values, c_attn, so q_proj, k_proj and v_proj together mean c_attn; one
or two of them cannot be adapted apart from the others and are refused with what to write instead. o_proj is the
attention's output projection attn.c_proj; up_proj and down_proj are the MLP's projections mlp.c_fc and
mlp.c_proj; gate_proj has no GPT-2 counterpart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from minitrain.nn import Linear, Module
from minitrain.nn.module import module_matches

QKV = ("q_proj", "k_proj", "v_proj")
FUSED_QKV = "attn.c_attn"
SPEC_NAMES = {"o_proj": "attn.c_proj", "up_proj": "mlp.c_fc", "down_proj": "mlp.c_proj"}
NO_COUNTERPART = {"gate_proj": "GPT-2's MLP has no gate projection; its widening projection is c_fc (Llama's up_proj)"}


def linear_paths(model: Module) -> list[str]:
    """The dotted paths of a built model's `Linear` layers, in model order."""
    return [path for path, module in model.named_modules() if isinstance(module, Linear)]


def translate_spec_names(
    targets: Sequence[str], paths: Iterable[str] = ()
) -> tuple[list[tuple[int, str]], dict[int, str]]:
    """([(entry index, GPT-2 name)] for the entries that translate (Llama's names replaced, q_proj, k_proj and
    v_proj together as one attn.c_attn), {entry index: why} for those that cannot. An entry that names one of
    `paths` (the model's linear layers: a Llama model's q_proj...) is kept as written."""
    paths = list(paths)
    problems: dict[int, str] = {}
    own = {name for name in targets if any(module_matches(p, name) for p in paths)}
    given_qkv = [name for name in QKV if name in targets and name not in own]
    translated: list[tuple[int, str]] = []
    for i, name in enumerate(targets):
        if name in own:
            translated.append((i, name))
        elif name in NO_COUNTERPART:
            problems[i] = NO_COUNTERPART[name]
        elif name in QKV and len(given_qkv) < len(QKV):
            problems[i] = ("GPT-2 computes queries, keys and values in one product, attn.c_attn, adapted as a "
                           "whole: write c_attn (or list all three of q_proj, k_proj, v_proj)")
        elif name in QKV:
            if name == given_qkv[0]:
                translated.append((i, FUSED_QKV))
        else:
            translated.append((i, SPEC_NAMES.get(name, name)))
    return translated, problems


def resolve_targets(
    target_modules: Sequence[str], pattern: str | None, paths: Iterable[str]
) -> tuple[list[str], dict[int | None, str]]:
    """(the adapted layer paths in model order, {entry index, or None for the pattern: the problem}).

    `paths` are the model's linear layers (`linear_paths`, or `models.registry.linear_module_paths` for a config)."""
    paths = list(paths)
    translated, problems = translate_spec_names(target_modules, paths)
    chosen: set[str] = set()
    for index, target in translated:
        hits = {p for p in paths if module_matches(p, target)}
        if not hits:
            problems[index] = f"{target!r} names no linear layer ({_layers_hint(paths)})"
        chosen |= hits
    if pattern is not None:
        try:
            regex = re.compile(pattern)
        except re.error as e:
            problems[None] = f"{pattern!r} is not a regular expression ({e})"
        else:
            hits = {p for p in paths if regex.fullmatch(p)}
            if not hits:
                problems[None] = f"{pattern!r} matches no linear layer's whole path ({_layers_hint(paths)})"
            chosen |= hits
    return [p for p in paths if p in chosen], problems


def _layers_hint(paths: list[str]) -> str:
    shown = ", ".join(paths[:4]) + (", ..." if len(paths) > 4 else "")
    return f"the linear layers are {shown}" if paths else "this model has no linear layer"
