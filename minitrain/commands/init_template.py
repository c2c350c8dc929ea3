"""`minitrain init`: look at a data folder and write a config that validates against it.

The folder must hold `train.*` and `val.*` (and may hold `dev.*` and `vocab.json`). The format comes from the
content, not the extension: if the first non-empty line of the train file is a JSON object with a "text" field,
the files are JSONL records (the verb corpus); otherwise every non-empty line is one plain-text example
(`format: text`, loss on every character, nothing held out). Without a vocab.json, the characters of all the
splits make one, written into the folder.

Two templates: `lab01` is lab 01's block (paths pointed at the folder), `minimal` only the keys that matter,
with the model sized to the data (vocab_size = the tokenizer's size, max_seq_len = the longest record).

`--method full|lora|qlora` says how a base is fine-tuned: every weight (full), or low-rank adapters on its linear
layers with the rank suggested from its width (lora: a `lora:` section; qlora: the same on a 4-bit base); each
adds a commented `publish:` placeholder.

`--base PATH|user/repo` starts from a trained model instead (a run folder, model file, export folder or Hub id,
which the init command reads with minitrain/hub/sources.py and passes in as a `BaseModel`): the model section is the
base's shape plus `init_from`, whatever the template. The base must fit the data (vocab_size ≥ the tokenizer's ids,
max_seq_len ≥ the longest record), and when it comes with a vocabulary, the data must use that very vocabulary (the
same ids for the same characters): a folder without vocab.json gets the base's, provided it covers every character
of the data.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from minitrain.common.errors import UserError
from minitrain.config.data_section import DataConfig
from minitrain.config.datacheck import DataSummary, check_data
from minitrain.config.loader import config_from_yaml
from minitrain.data.tokenizer import CharTokenizer
from minitrain.models.registry import family_of, linear_module_paths

TEMPLATES = ("minimal", "lab01")
METHODS = ("full", "lora", "qlora")
DEFAULT_DATA = "data/processed"


class BaseModel(NamedTuple):
    """A trained model a new config starts from: how the user named it, its model section, its vocabulary."""

    spec: str
    model: dict[str, Any]
    vocab: Path | None


@dataclass
class DataLayout:
    """What `detect_layout` found in a data folder."""

    format: str  # "jsonl" or "text"
    train: str
    val: str
    dev: str | None
    vocab: str
    vocab_exists: bool
    holds_out_verbs: bool = True  # val and dev conjugate no verb of train (what heldout_policy verbs_4 promises)


def _find(folder: Path, stem: str) -> Path | None:
    for ext in (".jsonl", ".json", ".txt", ""):
        candidate = folder / f"{stem}{ext}"
        if candidate.is_file():
            return candidate
    return None


def detect_layout(folder: str | Path) -> DataLayout:
    """Find the splits in `folder` and tell JSONL records from plain text lines."""
    folder = Path(folder)
    if not folder.is_dir():
        course = "; `minitrain lab start 00 labs/00` copies the course's corpus there" if str(folder) == DEFAULT_DATA \
            else ""
        raise UserError(f"--data {folder}: not a folder{course}", 2)
    train, val = _find(folder, "train"), _find(folder, "val")
    if train is None or val is None:
        raise UserError(f"--data {folder}: expected train.jsonl and val.jsonl (or train.txt and val.txt) there", 2)
    with train.open(encoding="utf-8", errors="replace") as f:
        first = next((line for line in f if line.strip()), "")
    try:
        record = json.loads(first)
        fmt = "jsonl" if isinstance(record, dict) and isinstance(record.get("text"), str) else "text"
    except json.JSONDecodeError:
        fmt = "text"
    dev = _find(folder, "dev")
    vocab = folder / "vocab.json"
    return DataLayout(fmt, str(train), str(val), str(dev) if dev else None, str(vocab), vocab.is_file())


def _records(layout: DataLayout) -> dict[str, list[dict]]:
    """The records of every split, as `load_split` reads them (a "text" each; JSONL records have a "verb" too)."""
    # load_split reads both formats; its records' "text" is what gets encoded.
    from minitrain.config.datacheck import load_split

    data = DataConfig(format=layout.format, train_path=layout.train, val_path=layout.val,
                      dev_path=layout.dev or layout.train, heldout_policy="none", loss_on="all")
    try:
        return {split: load_split(data, split) for split in ("train", "val", "dev")}
    except UserError as e:  # data that cannot be read is bad input, as it is for `validate` and `train`
        raise UserError(str(e), 2) from None


def _texts(layout: DataLayout) -> list[str]:
    """The text of every record of every split: what the tokenizer must cover."""
    return [r["text"] for records in _records(layout).values() for r in records]


def _holds_out_verbs(layout: DataLayout) -> bool:
    """Whether val (and dev, when the folder has one) hold only verbs train never conjugates."""
    if layout.format != "jsonl":
        return False
    verbs = {split: {r["verb"] for r in records} for split, records in _records(layout).items()}
    held_out = verbs["val"] | (verbs["dev"] if layout.dev else set())
    return not held_out & verbs["train"]


def _make_vocab(layout: DataLayout) -> None:
    CharTokenizer.from_texts(_texts(layout)).save(layout.vocab)
    print(f"wrote {layout.vocab} (the characters of the splits)", file=sys.stderr)


def _check_base_vocab(layout: DataLayout, base: str, base_vocab: Path) -> None:
    """The data's vocabulary must be the base model's, or (no vocab.json yet) the base's must cover the data."""
    theirs = CharTokenizer.load(base_vocab)
    if layout.vocab_exists:
        ours = CharTokenizer.load(layout.vocab)
        if ours.chars != theirs.chars:
            raise UserError(f"--base {base}: its vocabulary ({base_vocab}, {len(theirs.chars)} characters) differs "
                            f"from {layout.vocab} ({len(ours.chars)} characters); fine-tuning needs the same ids for "
                            "the same characters", 2)
        return
    missing = sorted({c for text in _texts(layout) for c in text} - set(theirs.chars))
    if missing:
        raise UserError(f"--base {base}: the data has characters its vocabulary ({base_vocab}) lacks: "
                        f"{''.join(missing)!r}; the model can only be trained on text it can encode", 2)


def _check_base_fits(base: str, model: dict[str, Any], tokenizer: CharTokenizer, summary: DataSummary,
                     vocab_path: str) -> None:
    problems = []
    if model["vocab_size"] < tokenizer.vocab_size:
        problems.append(f"its vocab_size {model['vocab_size']} is smaller than the {tokenizer.vocab_size} ids "
                        f"of {vocab_path}")
    if model["max_seq_len"] < summary.longest_input:
        problems.append(f"its max_seq_len {model['max_seq_len']} is shorter than the longest record, "
                        f"{summary.longest_where}, which needs {summary.longest_input} positions (BOS + text)")
    if problems:
        raise UserError(f"--base {base} does not fit the data: {'; '.join(problems)}", 2)


def _scalar(value: Any) -> str:
    """`value` as a YAML scalar: plain when it reads back unchanged, else JSON-quoted (valid YAML)."""
    text = str(value)
    return text if yaml.safe_load(f"k: {text}") == {"k": value} else json.dumps(value)


def _data_lines(layout: DataLayout, *, align: bool) -> list[str]:
    defaults = DataConfig()
    pad = "  " if align else ""  # lab 01 aligns val_path under train_path
    lines = [f"  train_path: {layout.train}", f"  val_path: {pad}{layout.val}"]
    if layout.dev and layout.dev != defaults.dev_path:
        lines.append(f"  dev_path: {layout.dev}")
    if layout.vocab != defaults.vocab_path:
        lines.append(f"  vocab_path: {layout.vocab}")
    if layout.format == "text":
        lines += ["  format: text", "  loss_on: all", "  heldout_policy: none"]
    elif layout.holds_out_verbs:
        lines.append("  heldout_policy: verbs_4")
    else:
        lines.append("  heldout_policy: none   # val shares verbs with train: it does not hold verbs out")
    return lines


def _lab01(layout: DataLayout, max_seq_len: int, batch_size: int, model_lines: list[str] | None = None) -> str:
    return "\n".join([
        *(model_lines or [
            "model:",
            "  n_layer: 2       # Phase 17 locked config",
            "  n_head: 4",
            "  d_model: 64",
            "  d_ff: 256",
            "  vocab_size: 64   # Phase 17 locked config",
            f"  max_seq_len: {max(32, max_seq_len)}  # verb sentences are short",
        ]),
        "",
        "optimizer:",
        "  type: adamw",
        "  lr_max: 3e-4",
        "  lr_min: 3e-5",
        "  beta1: 0.9",
        "  beta2: 0.95",
        "  eps: 1e-8",
        "  weight_decay: 0.1",
        "  clip: 1.0",
        "",
        "scheduler:",
        "  warmup_steps: 100",
        "  total_steps: 2000",
        "",
        "training:",
        f"  batch_size: {batch_size}",
        "  val_every: 50",
        "  log_every: 10",
        "  loss_reduction: token_mean",
        "  rng_seed: 42",
        "  data_seed: 7",
        "",
        "data:",
        *_data_lines(layout, align=True),
    ]) + "\n"


def _minimal(layout: DataLayout, vocab_size: int, max_seq_len: int, batch_size: int, data_folder: str,
             model_lines: list[str] | None = None) -> str:
    kind = "JSONL records" if layout.format == "jsonl" else "plain text lines"
    return "\n".join([
        f"# minitrain config for {data_folder} ({kind}), written by `minitrain init --template minimal`.",
        "# Keys left out take their defaults (lab 01's values); docs/yaml-mode.md lists every key.",
        "name: minigpt",
        *(model_lines or [
            "model:",
            f"  vocab_size: {vocab_size}    # the tokenizer's size",
            f"  max_seq_len: {max_seq_len}   # the longest record: BOS + text",
        ]),
        "training:",
        "  total_steps: 500",
        *([f"  batch_size: {batch_size}   # all the training records"] if batch_size < 8 else []),
        "data:",
        *_data_lines(layout, align=False),
    ]) + "\n"


def suggested_rank(width: int) -> int:
    """A LoRA rank for a model of this width: width/16 to the nearest power of two, within [4, 128] (64 for a
    0.5B model of width 896, 128 for a 7B one of 4096, 4 for lab 01's 64)."""
    return int(min(128, max(4, 2 ** round(math.log2(max(width, 1) / 16)))))


def method_lines(method: str, model: dict[str, Any] | None, docs: str = "yaml-mode.md") -> list[str]:
    """The `lora:` section of `--method lora|qlora` (none for full), its comment pointing at docs/`docs`, and a
    commented `publish:` placeholder (both init templates and `init --base` write them)."""
    lines = []
    if method in ("lora", "qlora"):
        width = model.get("d_model") or max([*model.get("hidden", []), 1])
        rank = suggested_rank(width)
        targets = family_of(model).lora_targets or linear_module_paths(model)
        lines += ["", f"lora:   # {method}: the base stays frozen; only low-rank adapters train (docs/{docs})",
                  "  enabled: true", f"  rank: {rank}             # suggested for width {width}",
                  f"  alpha: {2 * rank}", "  dropout: 0.05", f"  target_modules: [{', '.join(targets)}]"]
        if method == "qlora":
            lines += ["  quantize_base: true   # the frozen base in 4-bit NF4 blocks", "  quant_type: nf4",
                      "  double_quantize: true"]
    lines += ["", "# publish:                 # uncomment to upload to the Hugging Face Hub after training",
              "#   repo: user/name", "#   private: false"]
    if method != "full":
        lines.append("#   merge_adapters: true   # the base with the adapters merged in (default: the adapter)")
    return lines


def init_config(template: str, data_folder: str | Path = DEFAULT_DATA, out_name: str = "config.yaml",
                base: BaseModel | None = None, method: str | None = None) -> str:
    """The text of a new config for `data_folder`, checked against the data before it is returned.

    `base` (`--base`): a model whose shape and weights (`init_from`) the config starts from. `method`
    (`--method`): full trains every weight, lora and qlora add a `lora:` section (they need a base); each adds a
    commented `publish:` placeholder.
    """
    if template not in TEMPLATES:
        raise UserError(f"--template must be one of {', '.join(TEMPLATES)}, got {template!r}", 2)
    if method not in (None, *METHODS):
        raise UserError(f"--method must be one of {', '.join(METHODS)}, got {method!r}", 2)
    if method in ("lora", "qlora") and base is None:
        raise UserError(f"--method {method} adapts a trained model: give it with --base PATH|user/repo", 2)
    layout = detect_layout(data_folder)
    layout = replace(layout, holds_out_verbs=_holds_out_verbs(layout))
    model, model_lines, base_vocab = None, None, None
    if base is not None:
        model, base_vocab = base.model, base.vocab
        model_lines = [f"model:   # the shape of --base {base.spec}; init_from loads its weights",
                       *(f"  {key}: {_scalar(value)}" for key, value in model.items())]
        if base_vocab is not None:
            _check_base_vocab(layout, base.spec, base_vocab)
    # A folder without vocab.json gets the base's (written once every check passed) or one built from its text.
    adopt = base_vocab is not None and not layout.vocab_exists
    if not layout.vocab_exists and not adopt:
        _make_vocab(layout)
    probe_layout = replace(layout, vocab=str(base_vocab)) if adopt else layout
    tokenizer = CharTokenizer.load(probe_layout.vocab)
    # Size the model from the data: a first check with room to spare measures the longest record.
    probe = config_from_yaml(_minimal(probe_layout, tokenizer.vocab_size, 10**6, 1, str(data_folder)), out_name)
    summary = check_data(probe)
    if model is not None:
        _check_base_fits(base.spec, model, tokenizer, summary, probe_layout.vocab)
    if adopt:
        tokenizer.save(layout.vocab)
        print(f"wrote {layout.vocab} (the base model's vocabulary)", file=sys.stderr)
    longest, batch_size = summary.longest_input, min(8, summary.records["train"])
    if template == "lab01":
        text = _lab01(layout, longest, batch_size, model_lines)
    else:
        text = _minimal(layout, tokenizer.vocab_size, longest, batch_size, str(data_folder), model_lines)
    if method is not None:
        text += "\n".join(method_lines(method, model)) + "\n"
    check_data(config_from_yaml(text, out_name))  # what init writes always validates
    return text
