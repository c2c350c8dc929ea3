"""`minitrain export`: turn a run (or a model file) into a folder `transformers` loads as `GPT2LMHeadModel`.

    OUT_DIR/
      config.json             GPT-2 config (see minitrain/hub/gpt2.py for the key mapping)
      model.safetensors       the weights under GPT-2 names, metadata {"format": "pt"} as transformers expects
      vocab.json              minitrain's character vocabulary (what `CharTokenizer.load` reads)
      tokenizer.json          the same vocabulary in the Hugging Face tokenizers format
      tokenizer_config.json   so `AutoTokenizer.from_pretrained(OUT_DIR)` knows the special tokens
      README.md               the model card

A LoRA run exports its adapter instead of config.json and model.safetensors: adapter_config.json and
adapter_model.safetensors in PEFT's layout (minitrain/lora/peft.py), loaded on top of the base's export.

There is no `lm_head.weight`: GPT-2 ties it to `transformer.wte.weight` and `from_pretrained` re-ties it. The
`attn.bias` causal-mask buffers old transformers versions kept are not weights, and are not written either.
Every file goes through an atomic write, so an interrupted export never leaves a half-written file.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import safetensors.numpy

from minitrain.data.tokenizer import CharTokenizer
from minitrain.errors import UserError
from minitrain.hub.card import build_card
from minitrain.hub.gpt2 import to_gpt2_config
from minitrain.hub.hf_tokenizer import tokenizer_config, tokenizer_json
from minitrain.hub.run_folder import RunInfo, read_run
from minitrain.io import atomic_write_bytes, atomic_write_json, atomic_write_text
from minitrain.lora.peft import write_peft_folder

WEIGHTS_FILE = "model.safetensors"
EXPORT_FILES = ("README.md", "config.json", WEIGHTS_FILE, "tokenizer.json", "tokenizer_config.json", "vocab.json")


def run_tokenizer(info: RunInfo, vocab_path: str | Path | None = None) -> CharTokenizer:
    """The run's vocabulary: `vocab_path` if given, else the run config's data.vocab_path."""
    recorded = vocab_path or info.section("data").get("vocab_path")
    found = info.find(str(recorded)) if recorded else None
    if found is None:
        raise UserError(
            f"{info.model_path}: cannot find the vocabulary this model was trained with "
            f"(data.vocab_path = {recorded or 'not recorded'}); pass it with --vocab"
        )
    tokenizer = CharTokenizer.load(found)
    if tokenizer.vocab_size > info.model_config["vocab_size"]:
        raise UserError(
            f"{found}: {tokenizer.vocab_size} tokens, but the model {info.model_path} has only "
            f"{info.model_config['vocab_size']} embedding rows; this is not the model's vocabulary"
        )
    return tokenizer


def weights_bytes(state: dict[str, np.ndarray]) -> bytes:
    """The safetensors file transformers reads: float32 tensors, metadata {"format": "pt"}."""
    tensors = {name: np.ascontiguousarray(a, dtype=np.float32) for name, a in state.items()}
    return safetensors.numpy.save(tensors, metadata={"format": "pt"})


def export_model(
    source: str | Path,
    out_dir: str | Path,
    repo_id: str | None = None,
    vocab_path: str | Path | None = None,
    merge_adapters: bool = False,
    base_model: str | None = None,
) -> list[Path]:
    """Write the export folder for a run folder or model file; return the files written, sorted.

    `repo_id` only changes the model card (its title and loading snippet). A LoRA run exports its adapter in
    PEFT's layout (adapter_config.json, adapter_model.safetensors) with the tokenizer files and the card; with
    `merge_adapters`, its base with the adapters merged in (`base_model` replaces the base the run records).
    """
    info = read_run(source)
    if info.adapter is not None and merge_adapters:
        from minitrain.hub.merge import merged_model  # merging needs the sources, which import this module

        model, _ = merged_model(info, base_model)
        info = replace(info, state=model.state_dict(), model_config=dict(model.config), adapter=None)
    tokenizer = run_tokenizer(info, vocab_path)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a folder")
    if info.adapter is None:
        config = to_gpt2_config(info.model_config, tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
        atomic_write_json(out / "config.json", config)
        atomic_write_bytes(out / WEIGHTS_FILE, weights_bytes(info.state))
        written = list(EXPORT_FILES)
    else:
        to_gpt2_config(info.model_config, tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)  # PEFT needs a GPT-2
        written = [path.name for path in write_peft_folder(out, info.state, info.adapter)]
        written += [name for name in EXPORT_FILES if name not in ("config.json", WEIGHTS_FILE)]
    tokenizer.save(out / "vocab.json")
    atomic_write_json(out / "tokenizer.json", tokenizer_json(tokenizer))
    atomic_write_json(out / "tokenizer_config.json", tokenizer_config(info.model_config["max_seq_len"]))
    atomic_write_text(out / "README.md", build_card(info, tokenizer.vocab_size, repo_id))
    return sorted(out / name for name in written)
