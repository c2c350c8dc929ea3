"""The phase-14 baseline run: fit on train, tune on dev, score train/dev/val, write results.json and a README.

Everything the script `scripts/ngram_baseline.py` does lives here, so it can be tested and reused:

1. read the small YAML config (validated strictly: an unknown or missing key is a `UserError`);
2. count every n-gram of length ≤ 8 in the encoded training lines (`[BOS] + text + [EOS]`, every position);
3. grid-search Kneser–Ney (order × discount scale) and add-k (order × k) on the **dev** batches only;
4. score the winners on train, dev and val through the batcher's eval pass and `PerplexityMeter`, so exactly the
   positions MiniGPT's evaluation counts are counted here (`loss_on: answer` = the form and EOS);
5. greedy-decode the form from each val prompt (`caminar|P1|` -> `camino`) for the exact-match rate.

The results depend only on the data files and the config (no randomness; floats rounded to 6 decimals); the
stage timings are returned beside them, for the console only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_json, atomic_write_text, read_text, sha256_of
from minitrain.data.batcher import EvalBatcher, encode_split
from minitrain.data.corpus import load_records
from minitrain.data.tokenizer import CharTokenizer
from minitrain.evaluation.metrics import greedy_exact_match
from minitrain.ngram.add_k import AddKLM
from minitrain.ngram.counts import NgramCounts
from minitrain.ngram.kneser_ney import KneserNeyLM
from minitrain.ngram.model import NgramLM
from minitrain.ngram.tuning import Tuned, evaluate, grid_search

MAX_ORDER = 8
DIGITS = 6  # decimals kept in results.json: far below any meaningful difference, stable across machines

Order = Annotated[int, Field(ge=1, le=MAX_ORDER)]
Positive = Annotated[float, Field(gt=0)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataSection(_Section):
    train_path: str
    dev_path: str
    val_path: str
    vocab_path: str
    manifest_path: str
    loss_on: Literal["answer", "all"] = "answer"
    seq_len: int = Field(32, ge=2)


class EvalSection(_Section):
    batch_size: int = Field(256, ge=1)
    max_new_tokens: int = Field(32, ge=1)


class KneserNeySection(_Section):
    orders: list[Order] = Field(min_length=1)
    discount_scales: list[Positive] = Field(min_length=1)


class AddKSection(_Section):
    orders: list[Order] = Field(min_length=1)
    ks: list[Positive] = Field(min_length=1)


class NgramBaselineConfig(_Section):
    """The whole config file; paths are relative to the current directory (the repository root)."""

    data: DataSection
    eval: EvalSection = EvalSection()
    kneser_ney: KneserNeySection
    add_k: AddKSection


def _plain(error: dict) -> str:
    # Pydantic's wording for the two commonest mistakes, said the way a config user thinks of them.
    return {"extra_forbidden": "unknown key", "missing": "missing key"}.get(error["type"], error["msg"])


def load_baseline_config(path: str | Path) -> NgramBaselineConfig:
    """Read and validate the config; every problem is reported at once in one `UserError` (exit code 2)."""
    path = Path(path)
    try:
        raw = yaml.safe_load(read_text(path, "config file"))
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not a readable YAML file ({e})", 2) from None
    try:
        cfg = NgramBaselineConfig.model_validate(raw)
    except ValidationError as e:
        problems = [f"{'.'.join(map(str, err['loc'])) or '<top>'}: {_plain(err)}" for err in e.errors()]
        raise UserError(f"{path}: invalid config:\n  " + "\n  ".join(problems), 2) from None
    return cfg


def _round(x: float) -> float:
    return round(float(x), DIGITS)


def _scores(model: NgramLM, splits: dict[str, list], val_records: list[dict], tokenizer: CharTokenizer,
            max_new_tokens: int) -> tuple[dict, dict[str, int]]:
    """PPL on every split and greedy exact match on val; also the number of counted tokens per split."""
    scores, counted = {}, {}
    for name, batches in splits.items():
        meter = evaluate(model, batches)
        scores[f"{name}_ppl"] = _round(meter.ppl)
        counted[name] = meter.count
    em = greedy_exact_match(model.next_log_probs, val_records, tokenizer, max_new_tokens)
    scores["val_exact_match"] = _round(em.rate)
    scores["val_exact_match_correct"] = em.correct
    return scores, counted


def _dev_grid(tuned: Tuned, knob: str) -> dict[str, dict[str, float]]:
    """Every trial's dev PPL as {order: {knob value: ppl}} (JSON keys are strings)."""
    grid: dict[str, dict[str, float]] = {}
    for t in tuned.trials:
        grid.setdefault(str(t["order"]), {})[str(t[knob])] = _round(t["dev_ppl"])
    return grid


class BaselineRun(NamedTuple):
    """The results (deterministic, for results.json) and how long each stage took (seconds, for the console)."""

    results: dict
    seconds: dict[str, float]


def run_baseline(cfg: NgramBaselineConfig) -> BaselineRun:
    """Fit on train, tune on dev, score train/dev/val."""
    clock = [time.perf_counter()]
    seconds: dict[str, float] = {}

    def lap(stage: str) -> None:
        clock.append(time.perf_counter())
        seconds[stage] = clock[-1] - clock[-2]

    d = cfg.data
    manifest_hash = sha256_of(d.manifest_path)
    tokenizer = CharTokenizer.load(d.vocab_path)
    records = {name: load_records(getattr(d, f"{name}_path")) for name in ("train", "dev", "val")}
    splits = {
        name: list(EvalBatcher(encode_split(recs, tokenizer, d.seq_len, d.loss_on), cfg.eval.batch_size))
        for name, recs in records.items()
    }
    lap("load")
    counts = NgramCounts([tokenizer.encode_line(r["text"]) for r in records["train"]], tokenizer.vocab_size,
                         max(cfg.kneser_ney.orders + cfg.add_k.orders), tokenizer.pad_id, tokenizer.bos_id)
    lap("fit")
    # Tuning sees the dev batches and nothing else.
    kn = grid_search(lambda **p: KneserNeyLM(counts, **p),
                     [{"order": o, "discount_scale": s} for o in cfg.kneser_ney.orders
                      for s in cfg.kneser_ney.discount_scales], splits["dev"])
    ak = grid_search(lambda **p: AddKLM(counts, **p),
                     [{"order": o, "k": k} for o in cfg.add_k.orders for k in cfg.add_k.ks],
                     splits["dev"])
    lap("tune")
    kn_scores, counted = _scores(kn.model, splits, records["val"], tokenizer, cfg.eval.max_new_tokens)
    ak_scores, _ = _scores(ak.model, splits, records["val"], tokenizer, cfg.eval.max_new_tokens)
    lap("score")
    results = {
        "model": "character n-gram, interpolated modified Kneser-Ney",
        **kn.model.describe(),
        **kn_scores,
        "val_records": len(records["val"]),
        "loss_on": d.loss_on,
        "counted_tokens": counted,
        "tuned_on": "dev",
        "dev_ppl_grid": _dev_grid(kn, "discount_scale"),
        "add_k_reference": {**ak.model.describe(), **ak_scores, "dev_ppl_grid": _dev_grid(ak, "k")},
        "data_manifest_hash": manifest_hash,
        "vocab_size": tokenizer.vocab_size,
    }
    return BaselineRun(results, seconds)


def render_readme(results: dict, manifest_path: str) -> str:
    """A short note on the run, generated from `results` (so it never disagrees with results.json)."""
    r, ak = results, results["add_k_reference"]
    grid = r["dev_ppl_grid"]
    chosen_row = grid[str(r["order"])].values()
    best_per_order = ", ".join(f"{o}: {min(row.values()):.2f}" for o, row in grid.items())
    top = ", ".join(f"{x:.3f}" for x in r["discounts"][-1])
    counted = r["counted_tokens"]
    return f"""# Phase 14: the character n-gram baseline

Written by `scripts/ngram_baseline.py` together with `results.json`; rerun it to regenerate both.

## Model

A character n-gram with interpolated modified Kneser–Ney smoothing (`minitrain/ngram/`), counted
on every position of the encoded training lines `[BOS] + text + [EOS]`. It conditions on the prefix
from BOS, truncated to its order. PAD and BOS get probability 0; the other {r["vocab_size"] - 2}
symbols sum to 1 in every context, seen or not. Add-k is fitted alongside as a simple reference.

## Tuning, on dev only

Every order in {", ".join(grid)} × every discount scale in {", ".join(next(iter(grid.values())))}
(a factor on the Chen–Goodman closed-form discounts D1, D2, D3+, clipped to [0, k]) is scored on
dev; the lowest dev perplexity wins. Val is scored once, afterwards.

- Chosen: **order {r["order"]}, discount scale {r["discount_scale"]}** (top-level D1, D2, D3+ = {top}).
- Best dev PPL per order: {best_per_order}.
- Over the scales tried, order {r["order"]}'s dev PPL spans {min(chosen_row):.3f}–{max(chosen_row):.3f}.
- Add-k chose order {ak["order"]}, k = {ak["k"]}.

## Scores

Perplexity over the positions `loss_on: {r["loss_on"]}` marks, exactly those MiniGPT's evaluation
counts, through the same `minitrain.evaluation.metrics.PerplexityMeter`:

| split | counted tokens | Kneser–Ney PPL | add-k PPL |
|---|---:|---:|---:|
| train | {counted["train"]} | {r["train_ppl"]:.3f} | {ak["train_ppl"]:.3f} |
| dev | {counted["dev"]} | {r["dev_ppl"]:.3f} | {ak["dev_ppl"]:.3f} |
| val | {counted["val"]} | **{r["val_ppl"]:.3f}** | {ak["val_ppl"]:.3f} |

Greedy exact match of the form on val (prompt `verb|T#|`, e.g. `caminar|P1|` -> `camino`):
**{r["val_exact_match"]:.1%}** ({r["val_exact_match_correct"]} of {r["val_records"]});
add-k {ak["val_exact_match"]:.1%}.

Lab 01's gate: MiniGPT's val PPL < {r["val_ppl"]:.3f}. Dev and val hold verbs never seen in training,
so an n-gram can only guess their stems from other verbs' character statistics; a transformer can copy
the stem from the prompt. Long contexts mostly memorise training stems (each verb's stem recurs in all of
its lines), which is why the dev PPL per order above does not keep falling with the order.

Data: `{manifest_path}` sha256 `{r["data_manifest_hash"]}`.
Fitting, tuning and scoring take seconds; the script prints the time of each stage, kept out of
these files so that a rerun reproduces them byte for byte.
"""


def write_outputs(results: dict, cfg: NgramBaselineConfig, out_dir: str | Path) -> None:
    """results.json and README.md into `out_dir`, each written atomically."""
    out_dir = Path(out_dir)
    atomic_write_json(out_dir / "results.json", results)
    atomic_write_text(out_dir / "README.md", render_readme(results, cfg.data.manifest_path))
