"""The number every fine-tune is judged by: the mean token loss and perplexity of a model on text it did not
train on (`minitrain eval`).

    loss = −(1/N) Σ log p(target_t | tokens before t)     over the N positions the loss mask counts
    ppl  = exp(loss)

The rows are scored in batches of at most `MAX_LOGITS` logits (B·T·V), so a 49,152-token vocabulary at 512
positions is scored row by row and memory stays flat (the decoder's `token_nll` goes further: blocks of the vocabulary,
so a 262,144-token vocabulary never builds a row's logits); the sums are float64 (PerplexityMeter), so the batching
does not change the result beyond float32 rounding in the model itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from minitrain.autograd import functional as F
from minitrain.data.batch import trim_padding
from minitrain.evaluation.metrics import PerplexityMeter
from minitrain.nn import inference

MAX_LOGITS = 1 << 25  # 128 MiB of float32 logits per batch (and as much again for their log-softmax)


def token_loss(model: Any, rows: Any, vocab_size: int) -> dict[str, float | int]:
    """{"loss", "ppl", "tokens"} of `model` on `rows`, a Batch or PackedBatch of padded rows (one document, or a
    window of one, per row)."""
    meter = PerplexityMeter()
    with inference(model):
        for start, stop in _batches(rows.attn_pad_mask, vocab_size):
            batch = trim_padding(type(rows)(*(a[start:stop] for a in rows)))
            _score(model, batch, meter, by_blocks=hasattr(model, "token_nll"))
    return {"loss": meter.mean_nll, "ppl": meter.ppl, "tokens": meter.count}


def evaluate_text(model: Any, batches: Iterable[Any]) -> tuple[float, float]:
    """(loss, ppl) as `loop.evaluate` gives them (whole logits, then log-softmax), except that a decoder's batch
    whose logits pass MAX_LOGITS is scored through `token_nll`, by blocks of the vocabulary: the same sums to
    float32 rounding without two (B, T, V) arrays (8 rows × 128 positions × 49,152 words: 400 MB). A run's
    validation and its train and test scores on a pretrained base; smaller batches keep loop.evaluate's bytes."""
    meter = PerplexityMeter()
    with inference(model):
        for batch in map(trim_padding, batches):
            decoder = hasattr(model, "token_nll")
            _score(model, batch, meter, decoder and batch.input.size * model.config["vocab_size"] > MAX_LOGITS)
    return meter.mean_nll, meter.ppl


def _score(model: Any, batch: Any, meter: PerplexityMeter, by_blocks: bool) -> None:
    """Add one batch's −log p(target): a decoder's token_nll by blocks of the vocabulary, or whole logits."""
    if by_blocks:
        counted = np.where(batch.loss_mask, batch.target, 0)  # a pad id at another may be no token id
        meter.add(model.token_nll(batch.input, counted, batch.attn_pad_mask), batch.loss_mask)
    else:
        logits, _ = model(batch.input, attn_pad_mask=batch.attn_pad_mask)
        meter.update(F.log_softmax(logits).data, batch.target, batch.loss_mask)


def _batches(attn_pad_mask: np.ndarray, vocab_size: int) -> list[tuple[int, int]]:
    """Consecutive row ranges whose logits, at the width of their longest row, fit in MAX_LOGITS."""
    real = attn_pad_mask.astype(bool)
    lengths = np.where(real.any(axis=1), real.shape[1] - np.argmax(real[:, ::-1], axis=1), 0)
    ranges, start, longest = [], 0, 0
    for i, length in enumerate(lengths.tolist()):
        longest = max(longest, length)
        if i > start and (i + 1 - start) * longest * vocab_size > MAX_LOGITS:
            ranges.append((start, i))
            start, longest = i, length
    return [*ranges, (start, len(lengths))] if len(lengths) else ranges
