"""The shared token accounting: PerplexityMeter and greedy exact match."""

from __future__ import annotations

import math

import numpy as np
import pytest

from minitrain.evaluation.metrics import PerplexityMeter, answer_prompt, greedy_decode, greedy_exact_match


def random_log_probs(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    logits = rng.normal(size=shape) * 3
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def test_meter_matches_direct_computation():
    rng = np.random.default_rng(0)
    b, t, v = 4, 7, 11
    lp = random_log_probs(rng, (b, t, v)).astype(np.float32)
    target = rng.integers(0, v, size=(b, t))
    mask = rng.random((b, t)) < 0.6
    # Direct: loop over every counted position and average -log p(target).
    nll = [-float(lp[i, j, target[i, j]]) for i in range(b) for j in range(t) if mask[i, j]]
    meter = PerplexityMeter()
    meter.update(lp, target, mask)
    assert meter.count == len(nll) == mask.sum()
    assert meter.mean_nll == pytest.approx(sum(nll) / len(nll), rel=1e-12)
    assert meter.ppl == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-12)


def test_meter_is_a_per_token_mean_independent_of_batching():
    rng = np.random.default_rng(1)
    lp = random_log_probs(rng, (6, 5, 9))
    target = rng.integers(0, 9, size=(6, 5))
    mask = rng.random((6, 5)) < 0.5
    mask[0] = True  # batches with very different counts: a mean of batch means would differ
    whole = PerplexityMeter()
    whole.update(lp, target, mask)
    parts = PerplexityMeter()
    for lo, hi in [(0, 1), (1, 4), (4, 6)]:
        parts.update(lp[lo:hi], target[lo:hi], mask[lo:hi])
    assert parts.count == whole.count
    assert parts.mean_nll == pytest.approx(whole.mean_nll, rel=1e-12)
    batch_means = [-lp[lo:hi][mask[lo:hi]].mean() for lo, hi in [(0, 1), (1, 4), (4, 6)]]
    assert not math.isclose(np.mean(batch_means), whole.mean_nll, rel_tol=1e-6)


def test_meter_ignores_uncounted_positions_even_if_nan():
    lp = np.log(np.full((1, 3, 4), 0.25))
    lp[0, 2] = np.nan  # e.g. a padding position
    meter = PerplexityMeter()
    meter.update(lp, np.array([[1, 2, 0]]), np.array([[True, True, False]]))
    assert meter.count == 2
    assert meter.ppl == pytest.approx(4.0)


def test_meter_rejects_mismatched_shapes_and_starts_empty():
    meter = PerplexityMeter()
    assert meter.count == 0 and math.isnan(meter.mean_nll)
    with pytest.raises(ValueError, match="log_probs"):
        meter.update(np.zeros((2, 3, 4)), np.zeros((2, 4), dtype=int), np.ones((2, 4), dtype=bool))


class FakeTokenizer:
    """Ids 0..2 are PAD, BOS, EOS; then one id per character."""

    bos_id, eos_id = 1, 2
    chars = "abc|P1"

    def encode(self, text: str) -> list[int]:
        return [3 + self.chars.index(ch) for ch in text]

    def decode(self, ids) -> str:
        return "".join(self.chars[i - 3] for i in ids if i >= 3)


def scripted_model(answers: dict[str, str], tok: FakeTokenizer, vocab_size: int = 9):
    """A next_log_probs that writes the scripted answer after each prompt, then EOS; records each call's size."""
    calls: list[int] = []

    def next_log_probs(prefixes: list[list[int]]) -> np.ndarray:
        calls.append(len(prefixes))
        out = np.full((len(prefixes), vocab_size), -10.0)
        for row, prefix in enumerate(prefixes):
            text = tok.decode(prefix)
            prompt = answer_prompt(text) if "|" in text else text
            answer = answers[prompt]
            produced = text[len(prompt):]
            nxt = tok.encode(answer[len(produced)])[0] if len(produced) < len(answer) else tok.eos_id
            out[row, nxt] = 0.0
        return out

    return next_log_probs, calls


def test_answer_prompt_keeps_everything_up_to_the_last_bar():
    assert answer_prompt("caminar|P1|camino") == "caminar|P1|"


def test_greedy_exact_match_counts_right_and_wrong_forms_batched():
    tok = FakeTokenizer()
    records = [
        {"text": "ab|P1|ba", "form": "ba"},
        {"text": "ca|P1|acc", "form": "acc"},
        {"text": "bb|P1|c", "form": "c"},
    ]
    # The model gets the first two right and answers "cc" instead of "c" for the third.
    next_log_probs, calls = scripted_model({"ab|P1|": "ba", "ca|P1|": "acc", "bb|P1|": "cc"}, tok)
    result = greedy_exact_match(next_log_probs, records, tok)
    assert (result.correct, result.total) == (2, 3)
    assert result.rate == pytest.approx(2 / 3)
    # One call per step over the unfinished sequences: the 2-character answers end (EOS) at the third call,
    # the 3-character one at the fourth.
    assert calls == [3, 3, 3, 1]


def test_greedy_decode_stops_at_max_new_tokens():
    tok = FakeTokenizer()
    next_log_probs, _ = scripted_model({"ab|P1|": "abcabc"}, tok)
    prefix = [tok.bos_id, *tok.encode("ab|P1|")]
    (out,) = greedy_decode(next_log_probs, [prefix], tok.eos_id, max_new_tokens=4)
    assert tok.decode(out) == "abca"
