"""Scoring a trained model on held-out records, beyond the loss the loop validates with: greedy exact match of
the verb forms, the extra metrics a validation row may carry (training.val_metrics), the dev and test splits
scored once after training, and `score_records`, what `minitrain quantize` and `minitrain merge-adapters` compare a
model with its quantized or merged twin by. They read no file but the splits they score.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from minitrain.config import Config
from minitrain.config.datacheck import load_split
from minitrain.config.schema import ALWAYS_MEASURED
from minitrain.data.batch import Batch, trim_padding
from minitrain.data.batcher import EvalBatcher, encode_split
from minitrain.data.tokenizer import CharTokenizer
from minitrain.evaluation.metrics import TokenAccuracyMeter, greedy_exact_match
from minitrain.loop import evaluate
from minitrain.models.sampling import next_log_probs_fn
from minitrain.nn import inference
from minitrain.training import artifacts

# Evaluation builds no tape, so a large batch costs little memory and amortises the per-op overhead; the
# PPL does not depend on it (PerplexityMeter sums in float64 over positions, whatever the batching).
EVAL_BATCH_SIZE = 256


def measure(model: Any, batches: Iterable, token_accuracy: bool = False) -> dict[str, float]:
    """{"loss", "ppl"} as `evaluate` computes them and, when asked, "token_accuracy": the share of counted
    positions whose argmax is the target (training.val_metrics), from one more pass without a tape."""
    loss, ppl = evaluate(model, batches)
    if not token_accuracy:
        return {"loss": loss, "ppl": ppl}
    meter = TokenAccuracyMeter()
    with inference(model):
        for batch in map(trim_padding, batches):
            logits, _ = model(batch.input, attn_pad_mask=batch.attn_pad_mask)
            meter.update(logits.data, batch.target, batch.loss_mask)
    return {"loss": loss, "ppl": ppl, "token_accuracy": meter.accuracy}


def exact_match(model: Any, tokenizer: CharTokenizer, records: Sequence[dict]) -> float:
    """Share of `records` whose greedily decoded form is exactly right, given `verb|T#|`.

    Only ids the tokenizer knows can be chosen: embedding rows past its vocabulary (lab 01 has 64 rows for fewer
    characters) stand for no character, and a barely trained model, or one started from other weights
    (`init_from`), may still rank one of them first.
    """
    model_log_probs = next_log_probs_fn(model, tokenizer.pad_id)
    known = tokenizer.vocab_size
    found = greedy_exact_match(lambda prefixes: model_log_probs(prefixes)[:, :known], records, tokenizer,
                               max_new_tokens=model.config["max_seq_len"])
    return found.rate


def validator(val_metrics: Iterable[str], val_batches: EvalBatcher, tokenizer: CharTokenizer,
              val_records: list[dict]) -> Callable[[Any], dict[str, float]] | None:
    """What each validation measures when `val_metrics` asks for more than loss and perplexity: one pass for
    val_loss, val_ppl (and val_token_accuracy), then greedy decoding for val_exact_match. None otherwise: the
    loop's own evaluate."""
    extra = [m for m in val_metrics if m not in ALWAYS_MEASURED]
    if not extra:
        return None

    def validate(model: Any) -> dict[str, float]:
        measured = measure(model, val_batches, token_accuracy="token_accuracy" in extra)
        row = {f"val_{key}": value for key, value in measured.items()}
        if "exact_match" in extra:
            row["val_exact_match"] = exact_match(model, tokenizer, val_records)
        return row

    return validate


def score_records(
    model: Any, tokenizer: CharTokenizer, records: Sequence[dict], loss_on: str = "answer"
) -> dict[str, float]:
    """{"loss", "ppl"} over the positions `loss_on` counts, and "exact_match" when every record is a verb form."""
    batches = EvalBatcher(encode_split(records, tokenizer, model.config["max_seq_len"], loss_on), EVAL_BATCH_SIZE)
    loss, ppl = evaluate(model, batches)
    scores = {"loss": loss, "ppl": ppl}
    if all("form" in r for r in records):
        scores["exact_match"] = exact_match(model, tokenizer, records)
    return scores


def score_held_out_splits(cfg: Config, model: Any, tokenizer: CharTokenizer) -> dict[str, float]:
    """dev and test, scored once after training when their files exist (`score_records`): {split}_loss,
    {split}_ppl and, for verb records, {split}_exact_match (results.json and report.md show them)."""
    scores: dict[str, float] = {}
    for split in ("dev", "test"):
        path = getattr(cfg.data, f"{split}_path")
        if path is None or not Path(path).is_file():
            continue
        records = load_split(cfg.data, split)
        scores.update({f"{split}_{key}": value
                       for key, value in score_records(model, tokenizer, records, cfg.data.loss_on).items()})
    return scores


def language_model_results(cfg: Config, model: Any, tokenizer: CharTokenizer, train_split: Batch,
                           val_records: list[dict], outcome: dict[str, Any], baseline: float | None) -> dict[str, Any]:
    """results.json of a language model run: train PPL (one pass over train), val exact match for verb records,
    the comparison with the n-gram baseline, and dev and test when present (wall_seconds and model_path are the
    caller's)."""
    train_loss, train_ppl = evaluate(model, EvalBatcher(train_split, EVAL_BATCH_SIZE))
    exact = exact_match(model, tokenizer, val_records) if all("form" in r for r in val_records) else None
    results = artifacts.build_results(outcome, train_loss=train_loss, train_ppl=train_ppl, baseline_ppl=baseline,
                                      val_exact_match=exact)
    results.update(score_held_out_splits(cfg, model, tokenizer))
    return results
