"""What the checkers test with: the committed corpus, a tiny MiniGPT, and a tiny run folder to train in.

Everything is built from the repository's own data (`data/processed/`), so a check's expected numbers are
those of the corpus the labs use (1,299 counted val tokens, 144 val records, ...).
"""

from __future__ import annotations

import json
import shutil
import textwrap
from functools import cache
from pathlib import Path

import numpy as np

from minitrain.common.paths import course_file
from minitrain.data.batch import Batch
from minitrain.data.batcher import EvalBatcher, encode_split  # the library's: `lab check` refuses the seam
from minitrain.data.corpus import load_records
from minitrain.data.tokenizer import CharTokenizer
from minitrain.models.minigpt import MiniGPT
from minitrain.optim import build_optimizer
from minitrain.optim.schedule import build_scheduler

DATA = course_file("data/processed")
LAB01_CONFIG = course_file("experiments/18-train-mini/config.yaml")


@cache
def tokenizer() -> CharTokenizer:
    return CharTokenizer.load(DATA / "vocab.json")


@cache
def records(split: str) -> tuple[dict, ...]:
    """The committed split's records (a tuple: cached, so nobody may change it)."""
    return tuple(load_records(DATA / f"{split}.jsonl"))


def split(name: str, n: int | None = None, seq_len: int = 32) -> Batch:
    """The first `n` records (None: all) of the committed split `name`, encoded by the library's encode_split: a
    check of anything else grades it apart from the student's encode_split."""
    return encode_split(list(records(name)[:n]), tokenizer(), seq_len)


def val_batches(size: int, n: int | None = None) -> EvalBatcher:
    """The library's EvalBatcher over the first `n` val records (None: all), in batches of `size`."""
    return EvalBatcher(split("val", n), size)


def lab01_model_config() -> dict:
    """The model section of lab 01's config, resolved (defaults filled in), as a run's manifest records it."""
    from minitrain.config import load_config, resolved_dict

    return resolved_dict(load_config(LAB01_CONFIG))["model"]


def tiny_model(seed: int = 0, dropout: float = 0.0) -> MiniGPT:
    """A one-block MiniGPT, small enough that a check runs in milliseconds, its parameters packed into one flat
    buffer (`model.buffer`) as a run packs them."""
    model = MiniGPT(n_layer=1, n_head=2, d_model=16, d_ff=32, vocab_size=64, max_seq_len=32, dropout=dropout,
                    rng=seed)
    model.pack_parameters()
    return model


def opinionated_model(seed: int = 1, dropout: float = 0.0) -> MiniGPT:
    """A tiny MiniGPT with large random weights, so its losses differ from position to position (a fresh model
    is so close to uniform that averaging over the wrong positions gives almost the same number)."""
    model = tiny_model(seed, dropout)
    model.buffer.data[...] = np.random.default_rng(seed).standard_normal(model.buffer.data.shape) * 0.5
    return model


def adamw(model: MiniGPT, lr: float = 1e-2, total_steps: int = 100, warmup_steps: int = 5):
    """AdamW over the model and a warm-up + cosine schedule driving it: (optimizer, scheduler)."""
    optimizer = build_optimizer("adamw", model.named_parameters(), buffer=model.buffer, lr=lr, weight_decay=0.1)
    scheduler = build_scheduler("warmup_cosine", optimizer, lr_max=lr, lr_min=lr / 10, total_steps=total_steps,
                                warmup_steps=warmup_steps)
    return optimizer, scheduler


def write_tiny_data(folder: Path, baseline_ppl: float) -> Path:
    """folder/data: a tiny corpus cut from the real one (40 train, 16 val, 8 dev records) and its vocabulary;
    folder/baseline.json: an n-gram baseline results.json. Returns the data folder."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 40), ("val", 16), ("dev", 8)):
        lines = (DATA / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()[:n]
        (data / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    shutil.copy(DATA / "vocab.json", data / "vocab.json")
    (folder / "baseline.json").write_text(json.dumps({"val_ppl": baseline_ppl}), encoding="utf-8")
    return data


def write_tiny_run(folder: Path, body: str = "", baseline_ppl: float = 1000.0, plots: bool = False) -> Path:
    """The tiny corpus and baseline of `write_tiny_data`, and a 1-layer config for them; returns the config path.
    40 records / batch 4 = 10 steps per epoch; 24 steps, validation every 5, a checkpoint every 4. No plots
    (`output: {plots: false}`: drawing them is most of such a run's time) unless `plots`; a `body` with an
    `output` section of its own needs `plots=True`."""
    data = write_tiny_data(folder, baseline_ppl)
    text = textwrap.dedent(f"""\
        model: {{n_layer: 1, n_head: 2, d_model: 16, d_ff: 32, vocab_size: 64, max_seq_len: 32}}
        optimizer: {{type: adamw, lr_max: 3.0e-3, lr_min: 3.0e-4, beta1: 0.9, beta2: 0.95, weight_decay: 0.1,
                     clip: 1.0}}
        scheduler: {{warmup_steps: 6, total_steps: 24}}
        training:
          batch_size: 4
          val_every: 5
          log_every: 2
          rng_seed: 42
          data_seed: 7
          checkpoint: {{save_every: 4, keep_last: 10}}
        data:
          train_path: {data}/train.jsonl
          val_path: {data}/val.jsonl
          dev_path: {data}/dev.jsonl
          vocab_path: {data}/vocab.json
        monitoring: {{progress: none}}
        """) + ("" if plots else "output: {plots: false}\n") + textwrap.dedent(body)
    path = folder / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path
