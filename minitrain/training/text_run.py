"""The second kind of language-model run: a pretrained Llama-family base fine-tuned on text records.

A config chooses it plainly: `model.type: llama` with `model.init_from` naming the base (a Hugging Face folder, a
Hub id or a .gguf file). Against a character run (data.vocab_path, verb records, one padded record per row):

    tokenizer   always the base's own (minitrain/hub/pretrained_runs.py `read_base`), saved into RUN/tokenizer/
                byte for byte, so `--resume`, `minitrain sample RUN` and `minitrain info RUN` read it there
    model       the architecture keys of `model:` filled from the base (`complete_model_section`); the weights
                loaded from it (LoRA / QLoRA: on every build, the adapters only in the model file; full
                fine-tuning: on a fresh start, every weight in the model file)
    records     {"text"}, {"prompt", "completion"} or {"messages"} (minitrain/data/text_records.py), tokenized with
                loss masks (data.loss_on all | completion) and packed (data.packing pack | pad, data.overflow)
    batches     Batch(input, target, attn_pad_mask, loss_mask) as for every run; for packed rows attn_pad_mask holds
                the int segment ids (minitrain/data/batch.py), which Llama.forward reads as such
    results     train/val loss and perplexity over the loss tokens, tokens seen and tokens/s; no verb exact match
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.config import Config
from minitrain.config.datacheck import DataSummary, check_batches, check_data, text_file_problems
from minitrain.config.problems import ConfigError, Problem
from minitrain.config.source import ConfigSource
from minitrain.data.batch import Batch, take
from minitrain.data.batcher import EvalBatcher, TrainBatcher
from minitrain.data.bpe import BPETokenizer
from minitrain.data.bpe_json import save_bpe
from minitrain.data.packing import pack, pad_id_of
from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
from minitrain.data.text_examples import encode_records
from minitrain.data.text_records import TextRecord, read_file
from minitrain.data.text_sources import source_records
from minitrain.evaluation.text_loss import evaluate_text
from minitrain.hub.pretrained_runs import TOKENIZER_DIR, complete_model_section, read_base
from minitrain.training import artifacts

# Rows per evaluation batch: a base's vocabulary is large (SmolLM2: 49,152), and evaluation holds the logits and
# their log-softmax of a whole batch, B · T · V floats each (8 × 256 × 49,152 × 4 bytes = 400 MB).
TEXT_EVAL_BATCH_SIZE = 8


def complete_config(cfg: Config) -> Config:
    """`cfg` with its base's architecture filled in, for a run on a pretrained base (minitrain/hub/pretrained_runs.py
    `complete_model_section`); any other config as it is. Idempotent."""
    return complete_model_section(cfg) if cfg.on_pretrained_base else cfg


def data_summary(cfg: Config) -> DataSummary:
    """Every data check of `cfg` (completed): `check_text_data` on a pretrained base, else config/datacheck.py's."""
    return check_text_data(cfg) if cfg.on_pretrained_base else check_data(cfg)


def save_tokenizer(cfg: Config, tokenizer: Any, out_dir: Path) -> None:
    """RUN/tokenizer/: a run on a pretrained base keeps the base's tokenizer files (byte for byte where it came
    from a tokenizer.json), which `minitrain sample RUN` and an export read. A run with `data.tokenizer: bpe`
    keeps the BPE it trained as RUN/tokenizer.json (`tokenizers` reads it too)."""
    if cfg.on_pretrained_base:
        tokenizer.save(out_dir / TOKENIZER_DIR)
    elif isinstance(tokenizer, BPETokenizer):
        save_bpe(tokenizer, out_dir / "tokenizer.json")


def base_tokenizer(cfg: Config) -> PretrainedTokenizer:
    """The base's own tokenizer."""
    return read_base(cfg.model.init_from).tokenizer


def text_records(cfg: Config) -> dict[str, list[TextRecord]]:
    """{split: records} of train, val (and test): data.source split by its file names or data.split
    (minitrain/data/text_sources.py), else the files data.train_path, val_path and test_path name."""
    data = cfg.data
    if data.source is not None:
        ratios = None if data.split is None else {"train": data.split.train, "val": data.split.val,
                                                  "test": data.split.test}
        seed = cfg.training.data_seed if data.split is None or data.split.seed is None else data.split.seed
        return source_records(data.source, ratios, seed)
    splits = ["train", "val", *(["test"] if data.test_path else [])]
    return {split: read_file(getattr(data, f"{split}_path")) for split in splits}


def text_splits(cfg: Config, tokenizer: PretrainedTokenizer) -> dict[str, Batch]:
    """{split: Batch} of rows of model.max_seq_len positions; packed rows carry segment ids in attn_pad_mask."""
    return {split: _rows(cfg, tokenizer, records) for split, records in text_records(cfg).items()}


def check_text_data(cfg: Config) -> DataSummary:
    """The data checks of a run on a pretrained base, all problems at once as one ConfigError: the files exist,
    every record reads, tokenizes and fits a row (data.overflow), a step fits the training rows. The summary counts
    packed rows as records (what a batch draws) and the longest row in tokens; `text` holds the rows, which the
    run trains on rather than encoding the records again."""
    problems = [] if cfg.data.source is not None else text_file_problems(cfg)
    summary = DataSummary(text={})
    if not problems:
        tokenizer = base_tokenizer(cfg)
        summary.tokenizer_size = tokenizer.vocab_size
        try:
            records = text_records(cfg)
        except UserError as exc:
            records, key = {}, "source" if cfg.data.source is not None else "train_path"
            problems.append(Problem(("data", key), str(exc)))
        for split, split_records in records.items():
            key = ("data", "source" if cfg.data.source is not None else f"{split}_path")
            try:
                batch = _rows(cfg, tokenizer, split_records)
            except UserError as exc:
                problems.append(Problem(key, str(exc)))
                continue
            summary.records[split], summary.text[split] = len(batch.input), batch
            longest = int(np.count_nonzero(batch.attn_pad_mask, axis=1).max())
            if longest > summary.longest_input:
                summary.longest_input, summary.longest_where = longest, getattr(cfg.data, key[1])
        problems += check_batches(cfg, summary)
    if problems:
        raise ConfigError(problems, cfg.source or ConfigSource())
    return summary


def _rows(cfg: Config, tokenizer: PretrainedTokenizer, records: list[TextRecord]) -> Batch:
    """One split's records as rows (`text_splits`)."""
    data = cfg.data
    examples = encode_records(records, tokenizer, data.loss_on)
    rows = pack(examples, cfg.model.max_seq_len, data.packing, pad_id_of(tokenizer), data.overflow)
    return Batch(rows.input, rows.target, rows.segment_ids if data.packing == "pack" else rows.attn_pad_mask,
                 rows.loss_mask)


def train_batcher(cfg: Config, train_split: Any) -> TrainBatcher:
    """The batcher a run draws its training batches from (the data RNG: training.data_seed)."""
    t = cfg.training
    # shuffle/drop_last only when they differ from the defaults: a student's lab-00 batcher takes three arguments.
    loader = {} if (t.shuffle, t.drop_last) == (True, True) else {"shuffle": t.shuffle, "drop_last": t.drop_last}
    return TrainBatcher(train_split, t.batch_size, t.data_seed, **loader)


def tokens_seen(cfg: Config, train_split: Batch, steps: int) -> dict[str, int]:
    """{"tokens_seen": real input tokens, "loss_tokens_seen": counted targets} of the first `steps` optimizer
    steps, replayed from the data seed (the batcher draws the same rows again; no model runs)."""
    batcher = train_batcher(cfg, train_split)
    real = counted = 0
    for _ in range(steps * cfg.training.grad_accumulation):
        batch = next(batcher)
        real += int(np.count_nonzero(batch.attn_pad_mask))
        counted += int(np.count_nonzero(batch.loss_mask))
    return {"tokens_seen": real, "loss_tokens_seen": counted}


def text_results(cfg: Config, model: Any, splits: dict[str, Batch], outcome: dict[str, Any]) -> dict[str, Any]:
    """results.json of a run on a pretrained base (wall_seconds and model_path are the caller's): train loss and
    perplexity on the first rows of train, as many as val has (a whole pass over a corpus a base is fine-tuned on
    can take longer than the training: `train_rows_scored` says how many), val's from the loop, test's when given,
    tokens seen and tokens per second of training; no n-gram baseline (the course's, of its character corpus)."""
    rows = min(len(splits["train"].input), len(splits["val"].input))
    train = EvalBatcher(take(splits["train"], slice(0, rows)), TEXT_EVAL_BATCH_SIZE)
    train_loss, train_ppl = evaluate_text(model, train)
    results = artifacts.build_results(outcome, train_loss=train_loss, train_ppl=train_ppl, val_exact_match=None,
                                      compares=False, train_rows_scored=rows)
    seen = tokens_seen(cfg, splits["train"], outcome["steps_done"])
    ms = outcome.get("ms_per_step")
    per_step = seen["tokens_seen"] / max(outcome["steps_done"], 1)
    results.update(seen, tokens_per_second=round(1000.0 * per_step / ms, 1) if ms else None)
    if "test" in splits:
        test = EvalBatcher(splits["test"], TEXT_EVAL_BATCH_SIZE)
        results["test_loss"], results["test_ppl"] = evaluate_text(model, test)
    return results
