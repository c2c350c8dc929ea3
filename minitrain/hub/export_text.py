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
exports its adapter in PEFT's layout (adapter_config.json, adapter_model.safetensors: what PEFT users load onto the
base), with the tokenizer files and the card, as a GPT-2 run does. `merge_adapters`: its base read from `init_from`
and each adapter's update W + (α/r)·A·B folded into its weight with NumPy (`pretrained_runs.run_state`), so the
folder is a plain model of the base's architecture.

A QLoRA run trained its adapter on the base held in 4-bit NF4 blocks (its adapter's metadata and card say so):
merged, by default it is folded into that base, dequantized (what the run computed); `float_base` (which merges)
folds it into the float base instead. Either way both merges run on PROBE_ROWS rows of random token ids and the
largest |Δlogit| between them is logged and written in the card.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.io import atomic_write_text
from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
from minitrain.formats.safetensors_folder import WEIGHTS_FILE
from minitrain.hub.card import MISSING, pretrained_card
from minitrain.hub.pretrained import TOKENIZER_FILES, export_hf_folder, load_pretrained_base
from minitrain.hub.pretrained_runs import TOKENIZER_DIR, run_state
from minitrain.hub.run_folder import RunInfo, read_run
from minitrain.hub.staging import check_target, staged
from minitrain.hub.text_models import is_pretrained_base
from minitrain.lora.peft import CONFIG_FILE, write_peft_folder
from minitrain.lora.peft import WEIGHTS_FILE as ADAPTER_WEIGHTS
from minitrain.models.registry import build_model, family_of
from minitrain.nn import inference

TEXT_EXPORT_FILES = ("README.md", "config.json", WEIGHTS_FILE, "generation_config.json", *TOKENIZER_FILES, CONFIG_FILE,
                     ADAPTER_WEIGHTS)
PROBE_ROWS, PROBE_LENGTH = 4, 32  # the random token ids both merges of a QLoRA adapter run on


def text_state(source: str) -> tuple[dict[str, Any], dict[str, np.ndarray], PretrainedTokenizer]:
    """(model config, float32 state, tokenizer) of a text source: a base as it is, or a run on one (a LoRA run: its
    adapters folded into its base); what every export of it writes."""
    if is_pretrained_base(source):
        return load_pretrained_base(source)[:3]
    return run_state(source)


def logit_gap(model_config: dict[str, Any], a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> tuple[float, int]:
    """(max |logit difference|, positions) between two states of one model on PROBE_ROWS rows of random ids."""
    ids = np.random.default_rng(0).integers(0, model_config["vocab_size"],
                                            (PROBE_ROWS, min(PROBE_LENGTH, model_config["max_seq_len"])))
    model, logits = build_model(model_config), []
    for state in (a, b):  # one model, each state loaded into its arrays in turn
        model.load_state_dict(state)
        with inference(model):
            logits.append(model(ids)[0].data.copy())
    return float(np.abs(logits[0] - logits[1]).max()), int(ids.size)


def export_text_model(source: str | Path, out_dir: str | Path, repo_id: str | None = None, float_base: bool = False,
                      log: Callable[[str], None] | None = None, merge_adapters: bool = False,
                      adapter_base: Callable[[RunInfo], str | None] | None = None) -> list[Path]:
    """Write the Hugging Face folder of a text source (module docstring); return the files written, sorted.
    A LoRA run: its adapter, or with `merge_adapters` (or `float_base`: a QLoRA run merged into the float base, `log`
    getting the gap between its two merges) the merged model. `adapter_base(run)`: the base an adapter names."""
    source = str(source)
    info = None if is_pretrained_base(source) else read_run(source)
    qlora = info is not None and info.adapter is not None and info.adapter.quantize_base
    if float_base and not qlora:
        raise UserError(f"export --float-base: {source} is not a QLoRA run; only an adapter trained on a 4-bit base "
                        "has a float base other than the one it trained on", BAD_INPUT)
    if info is not None and info.adapter is not None and not (merge_adapters or float_base):
        return _export_adapter(info, Path(out_dir), repo_id, adapter_base(info) if adapter_base else None)
    model_config, state, tokenizer = run_state(source, float_base=True) if float_base else text_state(source)
    gap = None
    if qlora:
        other = run_state(source, float_base=not float_base)[1]
        gap = (float_base, *logit_gap(model_config, state, other))
        if log is not None:
            log(f"{source}: a QLoRA adapter, trained on the NF4-quantized base; exported merged into "
                f"{'the float base (--float-base)' if float_base else 'that base, dequantized (what the run computed)'}"
                f"; the two merges' logits differ by up to {gap[1]:.4g} (max |Δlogit| over {gap[2]} positions of "
                "random token ids)")
    base = source if info is None else str(info.section("model").get("init_from") or MISSING)
    card = pretrained_card(model_config, tokenizer.vocab_size, repo_id, base, info,
                           chat=tokenizer.chat_template is not None, merge_gap=gap)
    out = Path(out_dir)
    check_target(out, TEXT_EXPORT_FILES)
    with staged(out) as staging:
        export_hf_folder(model_config, state, tokenizer, staging)
        atomic_write_text(staging / "README.md", card)
        written = sorted(p.name for p in staging.iterdir())
    return [out / name for name in written]


def _export_adapter(info: RunInfo, out: Path, repo_id: str | None, base: str | None) -> list[Path]:
    """A LoRA run on a pretrained base as PEFT's folder: its adapter (naming `base`, else the recorded one), the
    run's tokenizer (the base's files) and the card."""
    local = info.find(info.adapter.base)  # a local base as found here: PEFT reads its absolute path
    settings = replace(info.adapter, base=base or (str(local) if local else info.adapter.base))
    info = replace(info, adapter=settings)
    tokenizer = PretrainedTokenizer.from_folder(Path(info.run_dir or info.model_path.parent) / TOKENIZER_DIR)
    model_config = {k: v for k, v in info.model_config.items() if k != "lora"}
    card = pretrained_card(model_config, tokenizer.vocab_size, repo_id, settings.base, info,
                           chat=tokenizer.chat_template is not None, adapter=True)
    check_target(out, TEXT_EXPORT_FILES)
    with staged(out) as staging:
        write_peft_folder(staging, info.state, settings, family_of(model_config).fan_in_fan_out)
        tokenizer.save(staging)
        atomic_write_text(staging / "README.md", card)
        written = sorted(p.name for p in staging.iterdir())
    return [out / name for name in written]
