"""Scoring a model on a list of records: perplexity over the counted positions and greedy exact match.

What a run does after training for its dev and test splits, and what `minitrain quantize` and `minitrain merge`
do to compare a model with its quantized or merged twin on the same records.
"""

from __future__ import annotations

from collections.abc import Sequence

from minitrain.data.batcher import EvalBatcher, encode_split
from minitrain.data.tokenizer import CharTokenizer
from minitrain.loop import evaluate, next_log_probs_fn
from minitrain.metrics import greedy_exact_match
from minitrain.nn import Module

# Evaluation builds no tape, so a large batch costs little memory and amortises the per-op overhead; the
# PPL does not depend on it (PerplexityMeter sums in float64 over positions, whatever the batching).
EVAL_BATCH_SIZE = 256


def exact_match(model: Module, tokenizer: CharTokenizer, records: Sequence[dict]) -> float:
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


def score_records(
    model: Module, tokenizer: CharTokenizer, records: Sequence[dict], loss_on: str = "answer"
) -> dict[str, float]:
    """{"loss", "ppl"} over the positions `loss_on` counts, and "exact_match" when every record is a verb form."""
    batches = EvalBatcher(encode_split(records, tokenizer, model.config["max_seq_len"], loss_on), EVAL_BATCH_SIZE)
    loss, ppl = evaluate(model, batches)
    scores = {"loss": loss, "ppl": ppl}
    if all("form" in r for r in records):
        scores["exact_match"] = exact_match(model, tokenizer, records)
    return scores
