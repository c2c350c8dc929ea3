"""evaluation.text_loss.evaluate_text, a text run's validation: the lab's loop.evaluate bytes while a batch's
logits fit MAX_LOGITS, a decoder's blockwise token_nll (the same loss to float32 rounding) beyond it."""

import numpy as np

from minitrain.data.batch import Batch
from minitrain.data.batcher import EvalBatcher
from minitrain.evaluation import text_loss
from minitrain.loop import evaluate
from minitrain.models.llama import Llama


def batches():
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 50, (5, 9))
    pad = np.ones((5, 9), dtype=bool)
    pad[3, 6:] = False
    loss_mask = pad & (rng.random((5, 9)) < 0.7)
    return EvalBatcher(Batch(idx, np.roll(idx, -1, axis=1), pad, loss_mask), 2)


def test_small_batches_are_loop_evaluates_and_big_ones_its_loss_by_blocks(monkeypatch):
    model = Llama(n_layer=1, n_head=2, d_model=8, d_ff=12, vocab_size=50, max_seq_len=16, rng=0)
    for _, p in model.named_parameters():  # weights far from init, so the tokens' losses differ
        p.data += np.random.default_rng(1).normal(0, 0.5, p.shape).astype(np.float32)
    expected = evaluate(model, batches())
    assert text_loss.evaluate_text(model, batches()) == expected  # 2 × 9 × 50 logits: whole, as the loop
    called = []
    monkeypatch.setattr(text_loss, "MAX_LOGITS", 100)
    monkeypatch.setattr(model, "token_nll", lambda *a: called.append(1) or Llama.token_nll(model, *a))
    loss, ppl = text_loss.evaluate_text(model, batches())
    assert len(called) == 3  # every batch by blocks
    np.testing.assert_allclose([loss, ppl], expected, rtol=1e-6)
