"""Lab 01: one training step and one evaluation pass, the two pieces the training loop repeats.

    loss, grad_norm = train_step(model, optimizer, batches, clip_norm)    # the step's gradient, clipped
    val_loss, val_ppl = evaluate(model, val_batches)                     # one pass over val, no tape

The loop around them (`minitrain/training/engine.py`) logs, validates, checkpoints and stops; it imports exactly these
two names from here, so a student's own loop.py (`minitrain lab start 01 DIR`, then MINITRAIN_LAB_DIR=DIR)
trains with every feature of the library's.

The loss is the token mean of −log p(target) over the positions `loss_mask` counts, the same mean the n-gram
baseline is scored with (`minitrain/evaluation/metrics.py`), so val_ppl = exp(val_loss) compares with its perplexity.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from minitrain.autograd import functional as F
from minitrain.data.batch import Batch, trim_padding
from minitrain.evaluation.metrics import PerplexityMeter
from minitrain.nn import inference
from minitrain.optim.clip import clip_grad_norm_, global_grad_norm


def train_step(
    model: Any, optimizer: Any, batches: Sequence[Batch], clip_norm: float | None = None
) -> tuple[float, float]:
    """The gradient of one optimizer step; returns (loss, grad_norm) as floats. It does not update the weights.

    - Start from a zero gradient (`optimizer.zero_grad()`): `backward()` adds into `.grad`, so without it every
      step would also carry the gradients of all the steps before.
    - `batches` are the step's micro-batches (one, unless `training.grad_accumulation` > 1). For each,
      `_, loss = model(batch.input, batch.target, batch.attn_pad_mask, batch.loss_mask)` is the token mean over
      that batch's counted positions, and `loss.backward(...)` adds its gradient. The step's gradient must equal
      that of ONE batch holding all micro-batches: micro-batch i, with n_i of the N counted tokens, is weighted
      n_i / N (backward with a seed of that weight), because Σ_i (n_i/N)·mean_i = (1/N)·Σ over all tokens.
      A plain sum of the micro-batch losses would scale the gradient by k and weight short batches too much.
      The returned loss is the same weighted mean. Each micro-batch's gradient is computed from zero and the
      step's gradient is their sum in micro-batch order, so N data-parallel workers reduced in worker order
      give the same bytes as k = N micro-batches here.
    - `grad_norm` is the global L2 norm of the whole gradient, sqrt(Σ (g·g).sum()) over every parameter,
      measured BEFORE clipping (that is what the log shows). With `clip_norm` set, the gradient is then scaled
      so its norm is at most `clip_norm` (`minitrain.optim.clip.clip_grad_norm_` measures and clips in one call).

    The caller checks that both numbers are finite and only then calls `optimizer.step()`.
    """
    optimizer.zero_grad()
    batches = [trim_padding(b) for b in batches]
    counts = [int(np.count_nonzero(b.loss_mask)) for b in batches]
    total = sum(counts)
    loss_value = 0.0
    summed = None  # the step's gradient so far: g_0 + g_1 + ... in micro-batch order
    for i, (batch, count) in enumerate(zip(batches, counts, strict=True)):
        _, loss = model(batch.input, batch.target, batch.attn_pad_mask, batch.loss_mask)
        if len(batches) == 1:
            loss.backward()
            loss_value = loss.item()
        else:
            weight = count / total
            if i > 0:
                optimizer.zero_grad()
            loss.backward(np.asarray(weight, dtype=loss.dtype))
            # Each micro-batch's gradient is computed from zero, then added: (g_0 + g_1) + g_2 is then exactly
            # what data-parallel workers (one micro-batch each, reduced in worker order) give, bit for bit.
            # Backward adding into a gradient that already holds g_0 would round differently.
            summed = model.buffer.grad.copy() if summed is None else np.add(summed, model.buffer.grad, out=summed)
            loss_value += weight * loss.item()
    if summed is not None:
        model.buffer.grad[...] = summed
    if clip_norm is not None:
        return loss_value, clip_grad_norm_(model.buffer, clip_norm)
    return loss_value, global_grad_norm([model.buffer.grad])


def evaluate(model: Any, val_iter: Iterable[Batch]) -> tuple[float, float]:
    """(val_loss, val_ppl) over one whole pass of `val_iter`, a batcher whose batches cover the split once.

    val_loss = the mean of −log p(target) over every position where `loss_mask` is True, across the WHOLE split:
    the sum over all counted tokens divided by their number (1,299 for lab 01's val), not a mean of per-batch
    means (the last batch may be smaller) and never counting padding or prompt positions. val_ppl = exp(val_loss).

    The model runs in eval mode (no dropout) and records no tape (`no_grad`): nothing here is trained, and a
    tape would keep every activation of the pass alive. Afterwards the model is back in the mode it was in.
    `model(idx, attn_pad_mask=...)` without targets returns (logits, None); logits have shape (B, T, V).
    """
    meter = PerplexityMeter()  # sums −log p in float64; the n-gram baseline is scored by the same class
    with inference(model):  # eval mode + no_grad, train mode restored afterwards
        for batch in map(trim_padding, val_iter):
            logits, _ = model(batch.input, attn_pad_mask=batch.attn_pad_mask)
            meter.update(F.log_softmax(logits).data, batch.target, batch.loss_mask)
    return meter.mean_nll, meter.ppl
