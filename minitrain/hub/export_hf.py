"""`minitrain export`: turn a run (or a model file) into a folder `transformers` loads as `GPT2LMHeadModel`, or
for a Llama or Gemma trained from scratch as its own class (`LlamaForCausalLM`, `Gemma3ForCausalLM`, ...: the folder
hub/pretrained.export_hf_folder writes, with generation_config.json, and the character tokenizer's files below);
a Llama-family base, or a run that fine-tuned one, is exported by hub/export_text.py.

    OUT_DIR/
      config.json             GPT-2 config (see minitrain/formats/gpt2.py for the key mapping)
      model.safetensors       the weights under GPT-2 names, metadata {"format": "pt"} as transformers expects
      vocab.json              minitrain's character vocabulary (what `CharTokenizer.load` reads)
      tokenizer.json          the same vocabulary in the Hugging Face tokenizers format
      tokenizer_config.json   so `AutoTokenizer.from_pretrained(OUT_DIR)` knows the special tokens
      README.md               the model card

A LoRA run exports its adapter instead of config.json and model.safetensors: adapter_config.json and
adapter_model.safetensors in PEFT's layout (minitrain/lora/peft.py), loaded on top of the base's export.

There is no `lm_head.weight`: GPT-2 ties it to `transformer.wte.weight` and `from_pretrained` re-ties it. The
`attn.bias` causal-mask buffers old transformers versions kept are not weights, and are not written either.
The folder is written whole or not at all (minitrain/hub/staging.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.io import atomic_write_json, atomic_write_text
from minitrain.data.tokenizer import CharTokenizer
from minitrain.formats.gpt2 import WEIGHTS_FILE, check_exportable, to_gpt2_config
from minitrain.formats.hf_tokenizer import char_pretrained
from minitrain.formats.safetensors_folder import write_weights
from minitrain.hub.card import build_card
from minitrain.hub.pretrained import export_hf_folder, is_base_id, is_llama
from minitrain.hub.run_folder import RunInfo, read_run
from minitrain.hub.staging import check_target, staged
from minitrain.lora.peft import CONFIG_FILE as ADAPTER_CONFIG
from minitrain.lora.peft import WEIGHTS_FILE as ADAPTER_WEIGHTS
from minitrain.lora.peft import write_peft_folder
from minitrain.models.registry import family_of

ADAPTER_FILES = (ADAPTER_CONFIG, ADAPTER_WEIGHTS)  # a LoRA run's export holds these instead of config + weights
EXPORT_FILES = ("README.md", "config.json", WEIGHTS_FILE, "tokenizer.json", "tokenizer_config.json", "vocab.json")


def run_tokenizer(info: RunInfo, vocab_path: str | Path | None = None) -> CharTokenizer:
    """The run's vocabulary: `vocab_path` if given, else the run config's data.vocab_path."""
    recorded = vocab_path or info.section("data").get("vocab_path")
    found = info.find(str(recorded)) if recorded else None
    if found is None:
        raise UserError(f"{info.model_path}: cannot find the vocabulary this model was trained with "
                        f"(data.vocab_path = {recorded or 'not recorded'}); pass it with --vocab", BAD_INPUT)
    tokenizer = CharTokenizer.load(found)
    if tokenizer.vocab_size > info.model_config["vocab_size"]:
        raise UserError(f"{found}: {tokenizer.vocab_size} tokens, but the model {info.model_path} has only "
                        f"{info.model_config['vocab_size']} embedding rows; this is not the model's vocabulary")
    return tokenizer


def hub_base(info: RunInfo, base_model: str | None) -> str:
    """The Hub id a published adapter names as its base: `base_model`, else the base the run records. PEFT loads
    the base by that name, so a local file or folder is refused (minitrain does not upload the base itself)."""
    base = base_model or info.adapter.base
    if is_base_id(base):
        return base
    raise UserError(f"publish {info.model_path}: a LoRA adapter on the Hub names its base by Hub id, and this run's "
                    f"base {base} is a local file or folder; publish the base first and pass its id with --base-model "
                    "user/name, or publish the base with the adapters merged in with --merge-adapters", BAD_INPUT)


def export_model(source: str | Path, out_dir: str | Path, repo_id: str | None = None,
                 vocab_path: str | Path | None = None, merge_adapters: bool = False, base_model: str | None = None,
                 for_hub: bool = False, float_base: bool = False, log: Callable[[str], None] | None = None
                 ) -> list[Path]:
    """Write the export folder for a run folder or model file; return the files written, sorted.

    `repo_id` only changes the model card (its title and loading snippet). A LoRA run exports its adapter in
    PEFT's layout (adapter_config.json, adapter_model.safetensors) with the tokenizer files and the card; with
    `merge_adapters`, its base with the adapters merged in (`base_model` replaces the base the run records).
    `for_hub` (publish): an adapter must name its base by Hub id, PEFT's `base_model_name_or_path` (hub_base).
    `float_base`, `log`: a QLoRA run on a Llama-family base (hub/export_text.py), merged into the float base.
    OUT_DIR must be new, empty, or an earlier export, which a failure (a full disk) leaves as it was (staging.py).
    """
    from minitrain.hub.export_text import export_text_model  # the Llama family's own folder
    from minitrain.hub.text_models import is_text_source

    if is_text_source(source):
        return export_text_model(source, out_dir, repo_id, float_base, log, merge_adapters,
                                 lambda info: hub_base(info, base_model) if for_hub else base_model)
    if float_base:
        raise UserError(f"export --float-base: {source} is not a QLoRA run on a Llama-family base (a GPT-2 "
                        "adapter merges with --merge-adapters into the base it trained on)", BAD_INPUT)
    info = read_run(source)
    if info.adapter is not None and merge_adapters:
        from minitrain.hub.fold_adapters import merged_model  # merging needs the sources, which import this module

        model, _ = merged_model(info, base_model)
        info = replace(info, state=model.state_dict(), model_config=dict(model.config), adapter=None)
    elif info.adapter is not None:  # the base by Hub id for the Hub, else as found here (PEFT: its absolute path)
        local = info.find(info.adapter.base)
        base = hub_base(info, base_model) if for_hub else base_model or (str(local) if local else info.adapter.base)
        info = replace(info, adapter=replace(info.adapter, base=base))
    llama = is_llama(info.model_config)  # a Llama or Gemma trained from scratch: its own transformers class
    if not llama:
        check_exportable(info.model_config)  # before anything else is looked for: say what cannot be exported
    files = char_pretrained(run_tokenizer(info, vocab_path), info.model_config["max_seq_len"])
    out = Path(out_dir)
    check_target(out, EXPORT_FILES + ADAPTER_FILES + ("generation_config.json",))
    with staged(out) as staging:
        if info.adapter is not None:  # PEFT puts the adapter on the base's own export: no config.json, no weights
            write_peft_folder(staging, info.state, info.adapter, family_of(info.model_config).fan_in_fan_out)
            files.save(staging)
        elif llama:
            export_hf_folder(info.model_config, info.state, files, staging)
        else:
            config = to_gpt2_config(info.model_config, files.pad_id, files.bos_id, files.eos_id)
            atomic_write_json(staging / "config.json", config)
            write_weights(staging, info.state)
            files.save(staging)
        atomic_write_text(staging / "README.md", build_card(info, files.vocab_size, repo_id))
        written = sorted(p.name for p in staging.iterdir())
    return [out / name for name in written]
