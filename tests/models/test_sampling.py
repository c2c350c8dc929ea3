"""Sampling: greedy decoding, EOS, temperature and top-k, seeds, the context window."""

from __future__ import annotations

import numpy as np
import pytest

from minitrain.autograd.tensor import Tensor
from minitrain.data.tokenizer import CharTokenizer
from minitrain.models.sampling import generate, next_token

TOKENIZER = CharTokenizer(sorted(set("comer|R1í")))


class ScriptedModel:
    """A stand-in with MiniGPT's interface: at each position it favours the successor of that position's token.

    With `|`->c, c->o, o->m, m->í, í->EOS, greedy decoding after `comer|R1|` writes `comí` and stops.
    `margin` is the favoured logit (the others are 0); `calls` records every input, `modes` the train flag.
    """

    def __init__(self, max_seq_len: int = 32, margin: float = 5.0) -> None:
        self.next = {"|": "c", "c": "o", "o": "m", "m": "í", "í": None}
        self.config = {"max_seq_len": max_seq_len, "vocab_size": TOKENIZER.vocab_size}
        self.margin = margin
        self.training = True
        self.calls: list[np.ndarray] = []
        self.modes: list[bool] = []

    def eval(self) -> None:
        self.training = False

    def train(self) -> None:
        self.training = True

    def __call__(self, idx: np.ndarray, targets=None):
        self.calls.append(idx.copy())
        self.modes.append(self.training)
        logits = np.zeros((*idx.shape, TOKENIZER.vocab_size), dtype=np.float32)
        for (b, t), token in np.ndenumerate(idx):
            char = TOKENIZER.decode([token])
            if char in self.next:
                nxt = self.next[char]
                logits[b, t, TOKENIZER.eos_id if nxt is None else TOKENIZER.encode(nxt)[0]] = self.margin
        return Tensor(logits), None


def test_greedy_continues_the_prompt_and_stops_at_eos():
    model = ScriptedModel()
    assert generate(model, TOKENIZER, "comer|R1|", max_new_tokens=20) == "comí"
    # 4 characters, then the step that produced EOS: five forward passes, each on the whole prefix.
    assert len(model.calls) == 5
    assert model.calls[0].tolist() == [[TOKENIZER.bos_id, *TOKENIZER.encode("comer|R1|")]]
    assert model.calls[-1].shape == (1, 1 + len("comer|R1|") + 4)


def test_max_new_tokens_caps_the_output():
    model = ScriptedModel()
    assert generate(model, TOKENIZER, "comer|R1|", max_new_tokens=2) == "co"
    assert len(model.calls) == 2


def test_eval_mode_during_generation_and_restored_after():
    model = ScriptedModel()
    generate(model, TOKENIZER, "comer|R1|", max_new_tokens=3)
    assert model.modes == [False, False, False]
    assert model.training is True


def test_context_is_cropped_to_max_seq_len():
    model = ScriptedModel(max_seq_len=6)
    out = generate(model, TOKENIZER, "comer|R1|", max_new_tokens=20)
    assert out == "comí"
    assert all(call.shape[1] <= 6 for call in model.calls)


def test_next_token_greedy_is_argmax_and_top1_equals_greedy():
    rng = np.random.default_rng(0)
    logits = np.array([0.1, 3.0, -1.0, 2.9], dtype=np.float32)
    assert next_token(logits, 0.0, None, rng) == 1
    assert {next_token(logits, 1.0, 1, rng) for _ in range(50)} == {1}


def test_top_k_only_samples_among_the_k_largest():
    rng = np.random.default_rng(0)
    logits = np.array([0.0, 1.0, 1.2, -3.0, 1.1], dtype=np.float32)
    drawn = {next_token(logits, 1.0, 3, rng) for _ in range(400)}
    assert drawn == {1, 2, 4}


def test_temperature_sampling_follows_softmax():
    rng = np.random.default_rng(1)
    logits = np.log(np.array([0.2, 0.5, 0.3]))
    counts = np.bincount([next_token(logits, 1.0, None, rng) for _ in range(20000)], minlength=3)
    np.testing.assert_allclose(counts / counts.sum(), [0.2, 0.5, 0.3], atol=0.015)
    # A high temperature flattens the distribution towards uniform.
    hot = np.bincount([next_token(logits, 50.0, None, rng) for _ in range(20000)], minlength=3)
    np.testing.assert_allclose(hot / hot.sum(), [1 / 3] * 3, atol=0.02)


@pytest.mark.parametrize("temperature", [1e-320, 5e-324, 1e-30])
def test_a_vanishing_temperature_is_greedy_not_nan(temperature):
    # logits / 1e-320 overflows to ±inf; the probabilities must still be the limit τ → 0: all mass on the argmax.
    rng = np.random.default_rng(0)
    logits = np.array([0.5, 2.0, -1.0, 1.9], dtype=np.float32)
    assert {next_token(logits, temperature, None, rng) for _ in range(50)} == {1}
    assert {next_token(logits, temperature, 2, rng) for _ in range(50)} == {1}


def test_a_huge_temperature_is_uniform():
    rng = np.random.default_rng(0)
    counts = np.bincount([next_token(np.array([0.0, 30.0, -30.0]), 1e300, None, rng) for _ in range(6000)])
    np.testing.assert_allclose(counts / counts.sum(), [1 / 3] * 3, atol=0.03)


def test_seed_makes_sampling_reproducible_and_a_shared_generator_varies():
    model = ScriptedModel(margin=0.5)  # weak preferences: samples differ
    a = [generate(model, TOKENIZER, "comer|R1|", 8, temperature=1.5, seed=123) for _ in range(2)]
    assert a[0] == a[1]
    rng = np.random.default_rng(123)
    b = [generate(model, TOKENIZER, "comer|R1|", 8, temperature=1.5, seed=rng) for _ in range(6)]
    assert b[0] == a[0]
    assert len(set(b)) > 1


@pytest.mark.parametrize(("temperature", "top_k"), [(-0.5, None), (1.0, 0)])
def test_invalid_settings_are_rejected(temperature, top_k):
    with pytest.raises(ValueError):
        generate(ScriptedModel(), TOKENIZER, "comer|R1|", 3, temperature=temperature, top_k=top_k)


def test_ids_beyond_the_tokenizer_are_never_chosen():
    """The lab's embedding has 64 rows for a smaller vocabulary: spare rows must not be sampled."""
    class PaddedModel(ScriptedModel):
        def __call__(self, idx, targets=None):
            logits, _ = super().__call__(idx)
            padded = np.zeros((*idx.shape, 64), np.float32)
            padded[..., : TOKENIZER.vocab_size] = logits.data
            padded[..., 60] = 100.0  # a spare row the untrained model happens to like best
            return Tensor(padded), None

    model = PaddedModel()
    assert generate(model, TOKENIZER, "comer|R1|", 10) == "comí"
    assert len(generate(model, TOKENIZER, "comer|R1|", 10, temperature=5.0, seed=0)) <= 10
