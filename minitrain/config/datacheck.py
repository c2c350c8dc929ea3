"""The data checks: rules that need the data files, run by `minitrain validate` and `minitrain train`.

They come after `load_config` (which never opens a data file) and report, all at once, with the config key
they concern and its line:

- data.train_path / val_path / vocab_path exist and are regular files, and test_path when given (a folder, a FIFO
  or a symbolic-link loop is named as what it is; the dev split is optional: checked when its file exists),
- the vocabulary loads and every record encodes (an unknown character names its file and line),
- with heldout_policy verbs_4, no verb of val (or dev) occurs in train,
- model.vocab_size ≥ the tokenizer's size,
- model.max_seq_len ≥ the longest model input, BOS + text (the EOS is only ever a target, so a line of n
  characters needs n + 1 positions; this is exactly what the batcher requires),
- training.batch_size · training.grad_accumulation ≤ the number of training records (an epoch holds a step),
  and a full-batch optimizer's (lbfgs, cg) one step holds them all,
- with training.epochs, scheduler.warmup_steps < the run's steps.

`load_split(cfg.data, "train")` is also how the loop should read a split, for both data formats.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minitrain.autograd.loss_kinds import LOSSES
from minitrain.common.errors import DataError, UserError
from minitrain.common.io import read_text, regular_file_problem
from minitrain.config.data_section import DataConfig
from minitrain.config.problems import ConfigError, Problem, exit_code_of
from minitrain.config.schema import TASK_METRICS, Config
from minitrain.data.batch import batches_per_epoch
from minitrain.data.bpe import BPETokenizer
from minitrain.data.corpus import load_records
from minitrain.data.language_tokenizer import language_tokenizer
from minitrain.data.tokenizer import CharTokenizer
from minitrain.optim.factory import OPTIMIZERS

SPLITS = ("train", "val", "dev", "test")


def load_split(data: DataConfig, split: str) -> list[dict]:
    """The records of `split` ("train", "val", "dev" or "test"): JSONL records, or `{"text": line}` per non-empty
    line.

    Either way each record has a "text", which is what `minitrain.data.batcher.encode_split` reads.
    """
    path = Path(getattr(data, f"{split}_path"))
    if data.format == "jsonl":
        return load_records(path)
    return [{"text": text, "line": line} for line, text in _text_lines(path)]


def _text_lines(path: Path) -> list[tuple[int, str]]:
    raw = read_text(path, "data file")
    lines = [(i, text) for i, text in enumerate(raw.splitlines(), start=1) if text.strip()]
    if not lines:
        raise UserError(f"{path}: holds no lines of text")
    return lines


@dataclass
class DataSummary:
    """What the data checks measured (validate's checklist and the dry run print it)."""

    records: dict[str, int] = field(default_factory=dict)
    tokenizer_size: int = 0
    longest_input: int = 0  # BOS + text, in tokens
    longest_where: str = ""
    steps_per_epoch: int = 0  # optimizer steps: batches per epoch (batcher.py) // grad_accumulation
    table: dict[str, Any] | None = None  # a table task: task, target, features, classes (validate prints them)
    text: dict[str, Any] | None = None  # a run on a pretrained base: {split: Batch}, the rows the run trains on


def check_data(cfg: Config) -> DataSummary:
    """Run every data check; raise one ConfigError (exit code 2) listing all problems found.

    A run on a pretrained base (`cfg.on_pretrained_base`) counts its records in tokens of the base's tokenizer,
    which this floor cannot load: here its files are checked only; minitrain/training/text_run.py
    `check_text_data` runs the rest."""
    summary = DataSummary()
    if cfg.is_table_task:
        problems = _check_table(cfg, summary)
    else:
        problems = text_file_problems(cfg) if cfg.on_pretrained_base else _check_characters(cfg, summary)
    if problems:
        raise ConfigError(problems, cfg.source)
    return summary


def _check_characters(cfg: Config, summary: DataSummary) -> list[Problem]:
    """A language model on characters (or a BPE of its training split): the files, the tokenizer, every record."""
    data = cfg.data
    # dev is optional (checked when its file exists); test only when given
    wanted = [s for s in SPLITS if (s != "dev" or os.path.lexists(data.dev_path)) and (s != "test" or data.test_path)]
    bpe = data.uses_bpe  # trained on train_path: no vocab file
    problems = _file_problems(data, [f"{s}_path" for s in wanted] + ([] if bpe else ["vocab_path"]))
    tokenizer = None
    source = ("train_path", data.train_path) if bpe else ("vocab_path", data.vocab_path)
    if regular_file_problem(source[1]) is None:
        try:
            tokenizer = language_tokenizer(data)
        except UserError as exc:
            problems.append(Problem(("data", source[0]), str(exc)))
    if tokenizer is not None:
        summary.tokenizer_size = tokenizer.vocab_size
        if cfg.model.vocab_size < tokenizer.vocab_size:
            made = f"the BPE trained on {data.train_path}" if bpe else data.vocab_path
            problems.append(Problem(("model", "vocab_size"), f"vocab_size {cfg.model.vocab_size} is smaller than the "
                                                             f"tokenizer's {tokenizer.vocab_size} ids ({made})"))
        verbs = {}
        for split in wanted:
            if regular_file_problem(getattr(data, f"{split}_path")) is None:
                found, verbs[split] = _check_split(cfg, split, tokenizer, summary)
                problems += found
        problems += _check_heldout(cfg, verbs)
    if summary.longest_input > cfg.model.max_seq_len:
        problems.append(Problem(("model", "max_seq_len"), f"max_seq_len {cfg.model.max_seq_len} is shorter than the "
                                                          f"longest record: {summary.longest_where} needs "
                                                          f"{summary.longest_input} positions (BOS + text)"))
    return problems + check_batches(cfg, summary)


def text_file_problems(cfg: Config) -> list[Problem]:
    """The text record files of a run on a pretrained base (train, val, and test when given) that are missing or
    not regular files."""
    return _file_problems(cfg.data, ["train_path", "val_path", "test_path"])


def _file_problems(data: DataConfig, keys: list[str]) -> list[Problem]:
    """A problem for each data key of `keys` whose path is given but is not a regular file (a folder, a FIFO or a
    link loop is named as what it is)."""
    problems = []
    for key in keys:
        path = getattr(data, key)
        if path is not None and (problem := regular_file_problem(path)) is not None:
            shown = f"file not found: {path}" if problem == "not found" else f"{path} {problem}"
            problems.append(Problem(("data", key), shown))
    return problems


def _check_split(cfg: Config, split: str, tokenizer: CharTokenizer | BPETokenizer,
                 summary: DataSummary) -> tuple[list[Problem], set[str]]:
    """The split's problems, and the verbs its records conjugate (none for plain text)."""
    key = ("data", f"{split}_path")
    path = getattr(cfg.data, f"{split}_path")
    try:
        records = load_split(cfg.data, split)
    except UserError as exc:
        return [Problem(key, str(exc))], set()
    summary.records[split] = len(records)
    for index, record in enumerate(records):
        line = record.get("line", index + 1)
        try:
            length = len(tokenizer.encode(record["text"])) + 1
        except UserError as exc:
            return [Problem(key, f"{path}:{line}: {exc}")], set()
        if length > summary.longest_input:
            summary.longest_input, summary.longest_where = length, f"{path}:{line}"
    return [], {record["verb"] for record in records if "verb" in record}


def _check_heldout(cfg: Config, verbs: dict[str, set[str]]) -> list[Problem]:
    """heldout_policy verbs_4: val (and dev) hold verbs training never sees, as the corpus promises; a val split
    that shares verbs with train would measure memory, not generalisation."""
    if cfg.data.heldout_policy != "verbs_4" or "train" not in verbs:
        return []
    problems = []
    for split in ("val", "dev"):
        shared = sorted(verbs.get(split, set()) & verbs["train"])
        if shared:
            shown = ", ".join(shared[:4]) + (f" and {len(shared) - 4} more" if len(shared) > 4 else "")
            problems.append(Problem(("data", f"{split}_path"),
                                    f"heldout_policy verbs_4: {len(shared)} verb(s) of "
                                    f"{getattr(cfg.data, f'{split}_path')} also occur in {cfg.data.train_path} "
                                    f"({shown}); held-out verbs must never be trained on"))
    return problems


def check_batches(cfg: Config, summary: DataSummary) -> list[Problem]:
    """An epoch holds a step (batch_size · grad_accumulation ≤ the training rows); the warm-up fits an epochs run.
    Sets summary.steps_per_epoch from summary.records["train"] (records, or packed rows)."""
    n_train = summary.records.get("train")
    if n_train is None:
        return []
    training = cfg.training
    batches = batches_per_epoch(n_train, training.batch_size, training.drop_last)
    summary.steps_per_epoch = batches // training.grad_accumulation
    if summary.steps_per_epoch == 0:
        return [Problem(("training", "batch_size"), f"batch_size {training.batch_size} · grad_accumulation "
                                                    f"{training.grad_accumulation} is more than the {n_train} training "
                                                    "records")]
    if OPTIMIZERS[cfg.optimizer.type].full_batch and (
            summary.steps_per_epoch != 1 or training.batch_size * training.grad_accumulation < n_train):
        return [Problem(("optimizer", "type"), f"{cfg.optimizer.type} is a full-batch method: one step must hold "
                                               f"all {n_train} training rows (set training.batch_size: {n_train})")]
    total = cfg.resolve_steps(summary.steps_per_epoch)
    if training.epochs is not None and total is not None and cfg.resolve_warmup(total) >= total:
        return [Problem(("scheduler", "warmup_steps"), f"warmup_steps {cfg.resolve_warmup(total)} must be below the "
                                                       f"{total} steps of {training.epochs} epoch(s) × "
                                                       f"{summary.steps_per_epoch}")]
    return []


def _check_table(cfg: Config, summary: DataSummary) -> list[Problem]:
    """A table task: the data reads, splits and preprocesses, the layers fit its widths, the metrics and loss fit
    the task inferred from the target, and a batch fits the training split."""
    from minitrain.config.table_check import load_table  # imports pyarrow-reading code only for tables

    try:
        table, _ = load_table(cfg)
    except DataError as exc:
        return [Problem(exc.key, exc.detail, exit_code_of(exc))]
    summary.records = {split: len(batch.target) for split, batch in table.splits.items()}
    summary.table = {key: table.info[key] for key in ("task", "target", "features", "classes") if key in table.info}
    task = table.pipeline.task
    problems = [Problem(("training", "val_metrics"), f"{metric} is not a {task} metric (the task inferred from "
                                                     f"{cfg.data.target!r}); set task: or choose among "
                                                     f"{', '.join(TASK_METRICS[task])}")
                for metric in cfg.training.val_metrics if metric not in (*TASK_METRICS[task], "perplexity")]
    if cfg.training.loss is not None and task not in LOSSES[cfg.training.loss].tasks:
        problems.append(Problem(("training", "loss"), f"{cfg.training.loss} does not fit the task {task} (inferred "
                                                      f"from {cfg.data.target!r})"))
    return problems + check_batches(cfg, summary)
