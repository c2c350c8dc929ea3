"""`minitrain export` of a Llama-family model: a pretrained base as it is, or a run that fine-tuned one, written as
the Hugging Face folder `LlamaForCausalLM` / `Qwen2ForCausalLM` loads (`hub.pretrained.export_hf_folder`).

    source                                   weights                  tokenizer files
    a .gguf file, HF folder or Hub id        the base's, float32      the base's (a GGUF's rebuilt from its metadata)
    a run on a pretrained base (its          the run's model file     RUN/tokenizer/, byte for byte the base's
        RUN/tokenizer/)                      (LoRA: merged into the
                                             base)

    OUT_DIR/ config.json, model.safetensors, generation_config.json, tokenizer.json, tokenizer_config.json
             (special_tokens_map.json, chat_template.jinja when the base had them), README.md (hub/card.py)

The folder is staged beside OUT_DIR and swapped in whole, as every export is (minitrain/hub/export_hf.py). A LoRA run
is exported merged: its base read from `init_from` and each adapter's update W + (α/r)·A·B folded into its weight
with NumPy (`pretrained_runs.run_state`), so the folder is a plain model of the base's architecture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.io import atomic_write_text
from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
from minitrain.formats.safetensors_folder import WEIGHTS_FILE
from minitrain.hub.card import MISSING, pretrained_card
from minitrain.hub.pretrained import TOKENIZER_FILES, export_hf_folder, load_pretrained_base
from minitrain.hub.pretrained_runs import run_state
from minitrain.hub.run_folder import read_run
from minitrain.hub.staging import check_target, staged
from minitrain.hub.text_models import is_pretrained_base

TEXT_EXPORT_FILES = ("README.md", "config.json", WEIGHTS_FILE, "generation_config.json", *TOKENIZER_FILES)


def text_state(source: str) -> tuple[dict[str, Any], dict[str, np.ndarray], PretrainedTokenizer]:
    """(model config, float32 state, tokenizer) of a text source: a base as it is, or a run on one (a LoRA run: its
    adapters folded into its base); what every export of it writes."""
    if is_pretrained_base(source):
        return load_pretrained_base(source)[:3]
    return run_state(source)


def export_text_model(source: str | Path, out_dir: str | Path, repo_id: str | None = None) -> list[Path]:
    """Write the Hugging Face folder of a text source (module docstring); return the files written, sorted."""
    source = str(source)
    info = None if is_pretrained_base(source) else read_run(source)
    model_config, state, tokenizer = text_state(source)
    base = source if info is None else str(info.section("model").get("init_from") or MISSING)
    card = pretrained_card(model_config, tokenizer.vocab_size, repo_id, base, info,
                           chat=tokenizer.chat_template is not None)
    out = Path(out_dir)
    check_target(out, TEXT_EXPORT_FILES)
    with staged(out) as staging:
        export_hf_folder(model_config, state, tokenizer, staging)
        atomic_write_text(staging / "README.md", card)
        written = sorted(p.name for p in staging.iterdir())
    return [out / name for name in written]
