"""Scoring an n-gram model on batches, and choosing its hyper-parameters on the dev split only.

Scoring goes through `minitrain.evaluation.metrics.PerplexityMeter`, exactly as MiniGPT's evaluation does: the model
turns a batch's `input` (B, T) into log-probabilities (B, T, V) and the meter reads the `target` ids at the positions
`loss_mask` marks. A grid search only ever receives dev batches, so the held-out val split cannot influence the
chosen order or discount: it is scored once, afterwards, with the winner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from minitrain.data.batch import Batch
from minitrain.evaluation.metrics import PerplexityMeter
from minitrain.ngram.model import NgramLM


def evaluate(model: NgramLM, batches: Iterable[Batch]) -> PerplexityMeter:
    """Accumulate -log p(target) of `model` over the counted positions of every batch."""
    meter = PerplexityMeter()
    for batch in batches:
        meter.update(model.log_probs(batch.input), batch.target, batch.loss_mask)
    return meter


class Tuned(NamedTuple):
    """The outcome of a grid search: the winning model and parameters, and every trial's dev PPL."""

    model: NgramLM
    params: dict
    dev_ppl: float
    trials: list[dict]


def grid_search(
    make_model: Callable[..., NgramLM], candidates: Iterable[dict], dev_batches: Sequence[Batch]
) -> Tuned:
    """Build `make_model(**params)` for every candidate and keep the one with the lowest dev PPL.

    Ties keep the earlier candidate, so listing the simpler settings first prefers them. Deterministic.
    """
    best: Tuned | None = None
    trials = []
    for params in candidates:
        model = make_model(**params)
        ppl = evaluate(model, dev_batches).ppl
        trials.append({**params, "dev_ppl": ppl})
        if best is None or ppl < best.dev_ppl:
            best = Tuned(model, dict(params), ppl, trials)
    if best is None:
        raise ValueError("grid_search needs at least one candidate")
    return best._replace(trials=trials)
