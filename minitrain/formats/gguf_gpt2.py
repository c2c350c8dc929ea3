"""A GGUF in llama.cpp's gpt2 layout read back as MiniGPT: its config, its state dict and its tokenizer.

The inverse of formats/gguf_write.py's GPT-2 layout: the `gpt2.*` metadata becomes a GPT-2 config.json dict, read by
formats/gpt2.py as for a Hugging Face folder (so the same checks refuse what MiniGPT cannot be); each tensor is
dequantized to float32, renamed to GPT-2's names and its four projections transposed back to Conv1D's [in, out].
`output.weight` must equal `token_embd.weight`: MiniGPT ties them. The tokenizer is minitrain's character
vocabulary when the tokens spell one (formats/gguf_vocab.py), else the byte-level BPE of a GPT-2 base.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
from minitrain.data.tokenizer import CharTokenizer
from minitrain.formats.gguf_read import (
    check_types,
    count_of,
    dequantized,
    field_value,
    open_gguf,
    real_of,
    tokenizer_fields,
)
from minitrain.formats.gguf_vocab import char_vocab
from minitrain.formats.gguf_write import CONV1D, GPT2_GLOBAL, GPT2_LAYER
from minitrain.formats.gpt2 import check_state_dict, from_gpt2_config

_FROM_GLOBAL = {short: name for name, short in GPT2_GLOBAL.items()}
_FROM_LAYER = {short: part for part, short in GPT2_LAYER.items()}


def _hf_config(reader, path: Path) -> dict[str, Any]:
    def need(key: str) -> int:
        return count_of(reader, path, f"gpt2.{key}")

    tokens = field_value(reader, "tokenizer.ggml.tokens") or []
    return {"model_type": "gpt2", "vocab_size": count_of(reader, path, "gpt2.vocab_size", 0, 0) or len(tokens),
            "n_positions": need("context_length"), "n_embd": need("embedding_length"), "n_layer": need("block_count"),
            "n_head": need("attention.head_count"), "n_inner": need("feed_forward_length"),
            "layer_norm_epsilon": real_of(reader, path, "gpt2.attention.layer_norm_epsilon", 1e-5)}


def _minigpt_name(path: Path, short: str) -> str:
    if short in _FROM_GLOBAL:
        return _FROM_GLOBAL[short]
    parts = short.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in _FROM_LAYER:
        return f"transformer.h.{parts[1]}.{_FROM_LAYER[parts[2]]}.{parts[3]}"
    raise UserError(f"{path}: tensor {short} is not part of a GPT-2 model MiniGPT can build", 2)


def read_gpt2_gguf(path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, Any]]:
    """(MiniGPT config, float32 state dict under GPT-2 names, tokenizer fields) of a gpt2-layout GGUF."""
    path = Path(path)
    reader = open_gguf(path)
    if field_value(reader, "general.architecture") != "gpt2":
        raise UserError(f"{path}: general.architecture is not gpt2", 2)
    model_config = from_gpt2_config(_hf_config(reader, path), f"{path} (GGUF metadata)")
    check_types(reader, path)
    state, output = {}, None
    for t in reader.tensors:
        w = dequantized(path, t)
        if t.name == "output.weight":
            output = w
            continue
        name = _minigpt_name(path, t.name)
        if name.rsplit(".", 1)[0].split(".", 3)[-1] in CONV1D and name.endswith(".weight"):
            w = w.T
        state[name] = np.ascontiguousarray(w)
    embedding = state.get("transformer.wte.weight")
    if output is not None and (embedding is None or not np.array_equal(output, embedding)):
        raise UserError(f"{path}: output.weight differs from token_embd.weight; MiniGPT ties the output layer to "
                        "the token embedding", 2)
    check_state_dict(state, model_config, str(path))
    return model_config, state, tokenizer_fields(reader, path)


def gpt2_tokenizer(fields: dict[str, Any]) -> CharTokenizer | PretrainedTokenizer:
    """The character vocabulary the fields spell, else the byte-level BPE they describe."""
    return char_vocab(fields) or PretrainedTokenizer.from_gguf_fields(**fields)
