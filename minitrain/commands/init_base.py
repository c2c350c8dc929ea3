"""`minitrain init --base BASE --method full|lora|qlora --data DATA`: a config that fine-tunes a pretrained
Llama-family or GPT-2 base (a Hugging Face folder, a Hub id or a .gguf file) on text, prompt/completion or chat records.

What it does (the publish spec's smart init, §3.4), reading and never writing the data:

    1. the base's architecture from its config.json or GGUF metadata, and its own tokenizer, without one weight
       read (`hub.pretrained.describe_base`; a Hub id fetches config.json and the tokenizer files only)
    2. the LoRA rank suggested by the base's width (`suggested_rank`: 32 for SmolLM2-135M's 576, 64 for 896)
    3. the data's format and kind and the number of samples (`data.text_records.describe_text_data`), each
       record encoded with the base's tokenizer to count its tokens; a record the run would refuse (malformed,
       a chat template that rewrites earlier turns) is refused here already, with its file and line
    4. the config: `model:` is `type: llama` (a GPT-2: `type: minigpt`), the base's keys and `init_from`, with
       max_seq_len the row length the records need (the base's context is a ceiling, not what a CPU run should
       pay for; a GPT-2's learned position table is kept whole, its rows padded: `packing: pad`); `data:` the split
       files (one per split), else the folder as `source` (with `split: {train: 0.9, val: 0.1}` when it has no
       validation file), `packing: pack`, `loss_on` (completion for chat and prompt/completion records: the model
       learns to answer, not to write questions), `overflow`; `lora:` on the spec's Llama names (below); a commented
       `publish:` placeholder
    5. the summary of the spec's §4.1 (model, method, data, optimizer, output) and the next command

    the family record's `lora_targets`: every linear layer of a block (Llama's q_proj ... down_proj, GPT-2's c_attn,
    attn.c_proj, c_fc, mlp.c_proj)

Row length, batch size and gradient checkpointing: `first_run` (the base's parameter count and the machine's
memory). A record longer than a row is split into pieces (`overflow: split`) rather than refused, and the summary
says how many there are. One epoch is counted as `validate` counts it: the training records packed into rows as the
run packs them (`data.packing.pack`), full batches of them; the run validates about five times (`val_every`).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

from minitrain.commands.init_template import _scalar, method_lines, suggested_rank
from minitrain.models.registry import DEFAULT_TYPE, family_of, refusal

MIN_ROW, MAX_ROW = 256, 2048
BATCH_SIZE = 4
LARGE = 50_000_000  # parameters from which a base's activations, not its weights, decide what fits
MAX_STEPS = 500  # a first run on a CPU: the summary says how many steps one epoch is
LR = {"full": 2e-5, "lora": 2e-4, "qlora": 2e-4}
DEFAULT_OUTPUT = "config.yaml"  # the spec's `init` then `train config.yaml`
HOLD_OUT = {"train": 0.9, "val": 0.1}  # data.split of a folder without a validation file


def row_length(longest: int, context: int, shortest: int = MIN_ROW, ceiling: int = MAX_ROW) -> int:
    """Positions per row for records of at most `longest` tokens: the shortest power of two from `shortest` that
    holds the longest record (a record of n tokens fills n - 1 positions: inputs ids[:-1], targets ids[1:]), at
    most the base's context and `ceiling`."""
    need = max(longest - 1, 1)
    return min(context, ceiling, max(shortest, 2 ** math.ceil(math.log2(need))))


def machine_memory() -> int:
    """Bytes of physical memory (os.sysconf), or 8 GiB where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def first_run(parameters: int, memory: int, longest: int, context: int, can_recompute: bool,
              fixed_row: int | None = None) -> dict[str, Any]:
    """{"batch_size", "row", "gradient_checkpointing"} of a first run, so that it leaves a laptop usable:

    - a base under LARGE (50M) parameters, a course-sized model whose activations are small: BATCH_SIZE (4) rows of
      `row_length` (from 256), no gradient checkpointing
    - from LARGE: micro-batches of 256 tokens (batch_size x row), 128 on a machine under 8 GiB or for a base from
      1B parameters; rows from 64 (`row_length`, at most those tokens), as many as fill them; gradient checkpointing
      where the family can recompute its layers (llama: ~30x less activation memory for a second forward). A
      135M base's logits alone take 0.6 MB a token (49,152 float32 scores, ~3 copies in the loss).
    `fixed_row`: the row a family must train on (learned positions: its whole context), the batch sized for it."""
    if parameters < LARGE:
        return {"batch_size": BATCH_SIZE, "row": fixed_row or row_length(longest, context),
                "gradient_checkpointing": False}
    tokens = 128 if memory < 8 << 30 or parameters >= 1_000_000_000 else 256
    row = fixed_row or row_length(longest, context, 64, tokens)
    return {"batch_size": max(tokens // row, 1), "row": row, "gradient_checkpointing": can_recompute}


def epoch_steps(train: list, plan: dict[str, Any]) -> int:
    """Optimizer steps of one epoch as `validate` counts them: the training examples packed into rows as the run
    packs them, full batches of batch_size rows."""
    from minitrain.data.batch import batches_per_epoch
    from minitrain.data.packing import pack

    rows = pack(train, plan["row"], plan["packing"], overflow=plan["overflow"])
    return max(batches_per_epoch(len(rows.input), plan["batch_size"]), 1)


def _data_section(data: dict[str, Any], folder: str) -> dict[str, Any]:
    """What `data:` names: the split files when the folder holds one per split, a validation one included
    ({"train_path": ..., "val_path": ..., "test_path": ...}); else the folder as data.source, split by HOLD_OUT when
    it has no validation file ({"source": folder, "split": HOLD_OUT})."""
    by_split: dict[str, list[str]] = {}
    for file in data["files"]:
        by_split.setdefault(_split_of(file), []).append(file)
    if "val" in by_split and all(len(files) == 1 for files in by_split.values()):
        return {f"{split}_path": files[0] for split, files in by_split.items()}
    return {"source": folder, **({} if "val" in by_split else {"split": HOLD_OUT})}


def _split_of(file: str) -> str:
    from minitrain.data.locate import split_of

    return split_of(Path(file)) or "all"


def _examples(section: dict[str, Any], tokenizer: Any, loss_on: str) -> dict[str, list]:
    """Every record of every split, read and encoded as the run will (the same split)."""
    from minitrain.data.text_examples import encode_records
    from minitrain.data.text_records import read_file
    from minitrain.data.text_sources import source_records

    if "source" in section:
        from minitrain.config.schema import TrainingConfig

        seed = TrainingConfig.model_fields["data_seed"].default  # what the run splits data.source with
        records = source_records(section["source"], section.get("split"), seed)
    else:
        records = {key.removesuffix("_path"): read_file(path) for key, path in section.items()}
    return {split: encode_records(found, tokenizer, loss_on) for split, found in records.items()}


def _value(value: Any) -> str:
    """A model key's value as YAML: true/false/null and numbers as JSON writes them (1e-05: minitrain's loader reads
    YAML 1.2 floats), strings plain when they read back unchanged."""
    return _scalar(value) if isinstance(value, str) else json.dumps(value)


def _rate(lr: float) -> str:
    return f"{lr:.0e}".replace("e-0", "e-")  # 2e-4, as the spec writes it


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "run"


def _name(base: str, folder: str) -> str:
    stem = Path(base.rstrip("/")).name.removesuffix(".gguf")
    stem = re.sub(r"\.(q\d\w*|f16|f32|bf16)$", "", stem, flags=re.IGNORECASE)  # the GGUF's quantization suffix
    return f"{_slug(stem)}-{_slug(Path(folder.rstrip('/')).name)}"


def base_config_text(spec: str, method: str, folder: str, model: dict[str, Any], data: dict[str, Any],
                     files: dict[str, str], plan: dict[str, Any]) -> str:
    """The YAML text of the config (module docstring); `plan` holds the numbers init chose."""
    model_lines = [f"  {k}: {_value(v)}" for k, v in model.items() if k != "max_seq_len"]
    ceiling = min(model["max_seq_len"], MAX_ROW)
    rows = (f"positions per row: the longest record is {plan['longest']} tokens (the base reads up to "
            f"{model['max_seq_len']}; at most {ceiling} here)" if plan["packing"] == "pack" else
            f"GPT-2's learned positions: all {model['max_seq_len']} rows of the base's table")
    if "source" in files:
        data_lines = [f"  source: {_scalar(files['source'])}"]
        if "split" in files:
            data_lines.append(f"  split: {{train: {HOLD_OUT['train']}, val: {HOLD_OUT['val']}}}   # no validation "
                              "file: a tenth of the records held out, at random (training.data_seed)")
    else:
        data_lines = [f"  train_path: {_scalar(files['train_path'])}", f"  val_path: {_scalar(files['val_path'])}"]
        if "test_path" in files:
            data_lines.append(f"  test_path: {_scalar(files['test_path'])}   # scored once, after training")
    data_lines += [
        "  packing: pack          # several records per row, never attending across records (or: pad)"
        if plan["packing"] == "pack" else "  packing: pad           # one record per row (MiniGPT has no segment ids)",
        f"  loss_on: {plan['loss_on']}" + ("   # the assistant turns / completions only (or: all)"
                                           if plan["loss_on"] == "completion" else ""),
        f"  overflow: {plan['overflow']}" + (f"   # {plan['too_long']} records are longer than a row"
                                             if plan["overflow"] == "split" else ""),
    ]
    warmup = warmup_steps(plan["steps"])
    return "\n".join([
        f"# minitrain config: {method} fine-tuning of {spec} on {folder} ({data['shape']} records),",
        f"# written by `minitrain init --base {spec} --method {method}`. docs/fine-tuning.md explains every key.",
        f"name: {plan['name']}",
        f"model:   # the base's architecture ({plan['read_from']}); init_from loads its weights",
        *model_lines,
        f"  max_seq_len: {plan['row']}   # {rows}",
        f"  init_from: {_scalar(spec)}",
        "training:",
        f"  total_steps: {plan['steps']}   # one epoch is {plan['epoch_steps']} steps of batch_size x max_seq_len",
        f"  batch_size: {plan['batch_size']}   # rows per step: init's rule for this base and this machine's memory",
        f"  val_every: {max(math.ceil(plan['steps'] / 5), 1)}   # about five validations",
        *(["  gradient_checkpointing: true   # recompute each layer in backward: far less memory, the same "
           "gradients"] if plan["gradient_checkpointing"] else []),
        "  log_every: 10",
        "optimizer:",
        "  type: adamw",
        f"  lr_max: {_rate(LR[method])}",
        f"  lr_min: {_rate(LR[method] / 10)}",
        "  weight_decay: 0.0",
        "  clip: 1.0",
        "scheduler:",
        f"  warmup_steps: {warmup}",
        "data:",
        *data_lines,
        *method_lines(method, model, "fine-tuning.md"),
    ]) + "\n"


def init_base_config(spec: str, method: str | None, folder: str,
                     out_name: str = DEFAULT_OUTPUT) -> tuple[str, list[str]]:
    """(config text, summary lines) for fine-tuning the pretrained base `spec` on the data in `folder`; a problem
    of the text names `out_name`, the file it is for."""
    from minitrain.data.text_records import describe_text_data
    from minitrain.hub.pretrained import describe_base

    method = method or "lora"
    model, tokenizer, facts = describe_base(spec)
    model = {"type": DEFAULT_TYPE, **model}  # a GPT-2's config has no type: say it
    family = family_of(model)  # learned positions: the rows are the base's context
    data = describe_text_data(folder)
    files = _data_section(data, folder)
    loss_on = "completion" if data["kind"] in ("chat", "prompt_completion") else "all"
    print(f"counting the tokens of {data['samples']:,} records with the base's tokenizer ...", file=sys.stderr)
    examples = _examples(files, tokenizer, loss_on)
    lengths = {split: [len(e.ids) for e in found] for split, found in examples.items()}
    longest = max(max(v) for v in lengths.values())
    plan = first_run(facts["parameters"], machine_memory(), longest, model["max_seq_len"],
                     refusal(model["type"], "recomputation") is None,
                     model["max_seq_len"] if family.learned_positions else None)
    too_long = sum(n - 1 > plan["row"] for v in lengths.values() for n in v)
    read_from = {"gguf": "its GGUF metadata", "folder": "its config.json",
                 "hub": "config.json from the Hub"}[facts["source"]]
    plan.update(name=_name(spec, folder), longest=longest, loss_on=loss_on, overflow="split" if too_long else "error",
                too_long=too_long, rank=suggested_rank(model["d_model"]), read_from=read_from,
                packing="pack" if family.packs_rows else "pad")
    plan["epoch_steps"] = epoch_steps(examples["train"], plan)
    plan["steps"] = min(plan["epoch_steps"], MAX_STEPS)
    text = base_config_text(spec, method, folder, model, data, files, plan)
    _validate(text, out_name)
    return text, _summary(spec, method, model, tokenizer, facts, data, files, lengths, plan)


def _summary(spec, method, model, tokenizer, facts, data, files, lengths, plan) -> list[str]:
    rank = plan["rank"]
    how = {"full": "full fine-tuning (every weight trains)",
           "lora": f"LoRA (rank={rank}, alpha={2 * rank}, on {', '.join(family_of(model).lora_targets)})",
           "qlora": f"QLoRA (rank={rank}, alpha={2 * rank}, 4-bit NF4 base)"}[method]
    splits = ", ".join(f"{split} {len(v):,}" for split, v in lengths.items())
    lines = [
        f"  Model: {spec} ({model['d_model']} hidden, {model['n_layer']} layers, {model['n_head']} heads / "
        f"{model.get('n_kv_head', model['n_head'])} key-value, {facts['parameters'] / 1e6:.1f}M parameters; from "
        f"{plan['read_from']})",
        f"  Tokenizer: the base's own ({tokenizer.vocab_size:,} tokens"
        f"{', chat template' if tokenizer.chat_template else ''})",
        f"  Method: {how}",
        f"  Data: {files.get('source') or files['train_path']} ({data['samples']:,} samples detected: {splits}; "
        f"{data['shape']} records, {data['format']})",
        f"  Tokens: {sum(lengths['train']):,} in train, longest record {plan['longest']}; rows of {plan['row']} "
        f"{'packed' if plan['packing'] == 'pack' else 'padded'}, loss on "
        f"{'the answers' if plan['loss_on'] == 'completion' else 'every token'}"
        + (f"; {plan['too_long']} records split" if plan["too_long"] else ""),
        f"  Optimizer: AdamW (lr={_rate(LR[method])}, warmup={warmup_steps(plan['steps'])} steps), "
        f"{plan['steps']} steps of {plan['batch_size']} rows"
        + (", gradient checkpointing" if plan["gradient_checkpointing"] else ""),
        f"  Output: runs/{plan['name']}/",
    ]
    return lines


def warmup_steps(total: int) -> int:
    """A tenth of the run, at most 100 steps, and always fewer steps than the run (a one-step run has none)."""
    return min(100, max(total // 10, 1), total - 1)


def _validate(text: str, out_name: str) -> None:
    """What init writes validates."""
    from minitrain.config.loader import config_from_yaml

    config_from_yaml(text, out_name)
