"""Shared token accounting: the one place that decides which positions a perplexity counts.

Every language model in minitrain (the n-gram baseline and MiniGPT's `loop.evaluate`) is scored through the two
helpers below, so "baseline PPL vs model PPL" compares numbers computed over exactly the same target tokens.

Perplexity. For the counted target positions i = 1..N (those where `loss_mask` is True),

    mean_nll = -(1/N) · Σ_i log p(target_i | prefix_i)        ppl = exp(mean_nll)

`perplexity(mean_nll)` is that exp for every loss a run logs: past ln(float64 max) ≈ 709.78 it is inf, not an
OverflowError, and the training engine stops such a run as diverged.

The sum is accumulated in float64 across batches, so the result does not depend on how the split was cut into
batches. Positions outside `loss_mask` (padding, and with `loss_on="answer"` the prompt) are ignored entirely:
their log-probabilities may be anything, even NaN. Typical use, for any model that maps a batch's `input` to
log-probabilities (B, T, V):

    meter = PerplexityMeter()
    for batch in eval_batcher:                     # minitrain.data.batcher.EvalBatcher
        meter.update(log_probs_of(batch.input), batch.target, batch.loss_mask)
    meter.mean_nll, meter.ppl, meter.count

Token accuracy. The share of the same counted positions where the most likely token (argmax, ties to the lowest
id) is the target: `TokenAccuracyMeter`, updated with the same arrays.

Greedy exact match. Given the prompt `verb|T#|` (e.g. `caminar|P1|`), decode by always taking the most likely
next token until EOS (or a length limit) and count the record as right when the decoded text equals its `form`
(`camino`). Models plug in through one callable, `next_log_probs(prefixes) -> (N, V)`, the log-distribution of
the token that follows each prefix; every prefix starts with BOS.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import numpy as np

NextLogProbs = Callable[[list[list[int]]], np.ndarray]


def perplexity(mean_nll: float) -> float:
    """exp(mean_nll): inf where a float64 overflows (a loss above ≈ 709.78), NaN for a NaN loss."""
    try:
        return math.exp(mean_nll)
    except OverflowError:  # math.exp raises where np.exp would return inf
        return math.inf


class PerplexityMeter:
    """Accumulates -log p(target) over the positions a `loss_mask` marks.

    `update(log_probs (B, T, V), target (B, T) int, loss_mask (B, T) bool)`, or `add(nll (B, T), loss_mask)`, may
    be called once per batch;
    `.count`, `.total_nll`, `.mean_nll` and `.ppl` read the running totals.
    """

    def __init__(self) -> None:
        self.total_nll = 0.0
        self.count = 0

    def update(self, log_probs: np.ndarray, target: np.ndarray, loss_mask: np.ndarray) -> None:
        """Add the counted positions of one batch.

        log_probs: (B, T, V) log-probabilities (any float dtype; each row a log-distribution over V symbols).
        target:    (B, T) integer ids of the true next tokens.
        loss_mask: (B, T) bool, True where the position counts.
        """
        log_probs = np.asarray(log_probs)
        target = np.asarray(target)
        loss_mask = np.asarray(loss_mask, dtype=bool)
        if log_probs.ndim != 3 or target.shape != log_probs.shape[:2] or loss_mask.shape != target.shape:
            raise ValueError(f"PerplexityMeter.update expects log_probs (B, T, V), target and loss_mask (B, T); got "
                             f"{log_probs.shape}, {target.shape}, {loss_mask.shape}")
        b, t = np.nonzero(loss_mask)
        picked = log_probs[b, t, target[b, t]].astype(np.float64)
        self.total_nll -= float(picked.sum())
        self.count += int(b.size)

    def add(self, nll: np.ndarray, loss_mask: np.ndarray) -> None:
        """Add −log p(target) of one batch, nll (B, T), at the positions loss_mask (B, T) marks (a model's
        `token_nll`); summed in float64."""
        counted = np.asarray(nll)[np.asarray(loss_mask, dtype=bool)]
        self.total_nll += float(counted.astype(np.float64).sum())
        self.count += int(counted.size)

    @property
    def mean_nll(self) -> float:
        """Mean negative log-likelihood per counted token (nats); NaN before any token was counted."""
        return self.total_nll / self.count if self.count else math.nan

    @property
    def ppl(self) -> float:
        """Perplexity exp(mean_nll) (`perplexity`: inf when it overflows)."""
        return perplexity(self.mean_nll)


class TokenAccuracyMeter:
    """Counts the positions a `loss_mask` marks where argmax over the vocabulary equals the target.

    `update(scores (B, T, V), target (B, T), loss_mask (B, T))` per batch (logits or log-probabilities: the
    argmax is the same); `.correct`, `.count` and `.accuracy` read the running totals.
    """

    def __init__(self) -> None:
        self.correct = 0
        self.count = 0

    def update(self, scores: np.ndarray, target: np.ndarray, loss_mask: np.ndarray) -> None:
        b, t = np.nonzero(np.asarray(loss_mask, dtype=bool))
        predicted = np.argmax(np.asarray(scores)[b, t], axis=-1)
        self.correct += int(np.count_nonzero(predicted == np.asarray(target)[b, t]))
        self.count += int(b.size)

    @property
    def accuracy(self) -> float:
        """correct / count; NaN before any position was counted."""
        return self.correct / self.count if self.count else math.nan


class ExactMatch(NamedTuple):
    """Result of greedy decoding over a set of records."""

    rate: float  # correct / total
    correct: int
    total: int


class Tokenizer(Protocol):
    """The part of `minitrain.data.tokenizer.CharTokenizer` that decoding needs."""

    bos_id: int
    eos_id: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


def answer_prompt(text: str) -> str:
    """The prompt part of a corpus line: everything up to and including the last `|` (`caminar|P1|`)."""
    return text[: text.rindex("|") + 1]


def greedy_decode(
    next_log_probs: NextLogProbs, prefixes: list[list[int]], eos_id: int, max_new_tokens: int
) -> list[list[int]]:
    """Extend every prefix greedily (argmax, ties to the lowest id) until EOS or `max_new_tokens`.

    All unfinished sequences are advanced together, one `next_log_probs` call per step. Returns the generated
    ids of each prefix without the EOS.
    """
    sequences = [list(p) for p in prefixes]
    generated: list[list[int]] = [[] for _ in prefixes]
    active = list(range(len(prefixes)))
    for _ in range(max_new_tokens):
        if not active:
            break
        choice = np.argmax(next_log_probs([sequences[i] for i in active]), axis=-1)
        still_active = []
        for i, token in zip(active, choice.tolist(), strict=True):
            if token == eos_id:
                continue
            sequences[i].append(token)
            generated[i].append(token)
            still_active.append(i)
        active = still_active
    return generated


def greedy_exact_match(next_log_probs: NextLogProbs, records: Sequence[dict], tokenizer: Tokenizer,
                       max_new_tokens: int = 32) -> ExactMatch:
    """Fraction of records whose greedily decoded answer equals `record["form"]`.

    The prompt is `[BOS] + encode(answer_prompt(record["text"]))`, e.g. BOS + `caminar|P1|`.
    """
    prefixes = [[tokenizer.bos_id, *tokenizer.encode(answer_prompt(r["text"]))] for r in records]
    outputs = greedy_decode(next_log_probs, prefixes, tokenizer.eos_id, max_new_tokens)
    correct = sum(tokenizer.decode(out) == r["form"] for out, r in zip(outputs, records, strict=True))
    total = len(records)
    return ExactMatch(rate=correct / total if total else math.nan, correct=correct, total=total)
