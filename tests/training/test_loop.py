"""The training loop (lab 01): evaluation accounting, step numbering, gradient accumulation, overfitting one
batch, and the pitfalls the loop must catch (divergence, high loss, signals, alerts, early stopping)."""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
from pathlib import Path

import numpy as np
import pytest

from minitrain.data.batch import take, trim_padding
from minitrain.data.batcher import EvalBatcher, TrainBatcher, encode_split
from minitrain.data.corpus import load_records
from minitrain.data.tokenizer import CharTokenizer
from minitrain.evaluation.alerts import AlertMonitor
from minitrain.loop import evaluate, train_step
from minitrain.models.minigpt import MiniGPT
from minitrain.models.sampling import next_log_probs_fn
from minitrain.monitor.early_stopping import EarlyStopping
from minitrain.optim import build_optimizer
from minitrain.optim.schedule import build_scheduler
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.run_files import DIVERGED, EARLY_STOPPED, HALTED, INTERRUPTED
from minitrain.training.engine import train
from minitrain.training.loop_inputs import Bookkeeping, Checkpointing, LoopData, LoopSettings

pytestmark = pytest.mark.lab01

DATA = Path(__file__).resolve().parents[2] / "data" / "processed"


@pytest.fixture(scope="module")
def tokenizer() -> CharTokenizer:
    return CharTokenizer.load(DATA / "vocab.json")


@pytest.fixture(scope="module")
def split(tokenizer):
    """48 real training records, encoded once: an (N, 32) Batch."""
    return encode_split(load_records(DATA / "train.jsonl")[:48], tokenizer, 32)


def tiny_model(seed: int = 0, dropout: float = 0.0) -> MiniGPT:
    model = MiniGPT(n_layer=1, n_head=2, d_model=16, d_ff=32, vocab_size=64, max_seq_len=32, dropout=dropout,
                    rng=seed)
    model.pack_parameters()
    return model


def adamw(model: MiniGPT, lr: float = 1e-2, **keys):
    optimizer = build_optimizer("adamw", model.named_parameters(), buffer=model.buffer, lr=lr, **keys)
    return optimizer, build_scheduler("constant", optimizer, lr_max=lr)


def rows(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


# ------------------------------------------------------------------------------------------------ evaluate


def test_evaluate_counts_exactly_the_loss_mask_positions(split):
    model = tiny_model()
    val_loss, val_ppl = evaluate(model, EvalBatcher(split, 20))  # 20, 20, 8: the last batch is partial
    # Direct computation over the whole split in float64, counting only the loss_mask positions.
    logits, _ = model(split.input, attn_pad_mask=split.attn_pad_mask)
    z = logits.data.astype(np.float64)
    log_probs = z - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)) - z.max(-1, keepdims=True)
    picked = np.take_along_axis(log_probs, split.target[..., None], axis=-1)[..., 0]
    expected = -picked[split.loss_mask].mean()
    assert val_loss == pytest.approx(expected, rel=1e-5)
    assert val_ppl == pytest.approx(math.exp(expected), rel=1e-5)
    # Counting every real target instead (the prompt too) would give a clearly different number.
    assert abs(-picked[split.attn_pad_mask].mean() - expected) > 1e-3


def test_evaluate_does_not_depend_on_batching_and_restores_train_mode(split):
    model = tiny_model(dropout=0.5)
    model.train()
    a = evaluate(model, EvalBatcher(split, 7))
    b = evaluate(model, EvalBatcher(split, 48))
    assert model.training  # back in train mode
    assert a == pytest.approx(b, rel=1e-6)  # and dropout was off: otherwise the two passes would differ


def test_trim_padding_keeps_real_positions_and_the_loss(split):
    batch = take(split, slice(0, 8))
    trimmed = trim_padding(batch)
    width = trimmed.input.shape[1]
    assert width < batch.input.shape[1]
    assert batch.attn_pad_mask[:, width - 1].any() and not batch.attn_pad_mask[:, width:].any()
    model = tiny_model()
    _, full = model(*batch)
    _, short = model(*trimmed)
    assert short.item() == pytest.approx(full.item(), rel=1e-6)


def test_next_log_probs_matches_the_full_forward_at_the_last_prefix_position(split):
    model = tiny_model(1)
    prefixes = [list(split.input[i, : n]) for i, n in ((0, 5), (1, 12), (2, 1))]
    got = next_log_probs_fn(model)(prefixes)
    for row, prefix in enumerate(prefixes):
        logits, _ = model(np.array([prefix]))
        z = logits.data[0, -1].astype(np.float64)
        want = z - np.log(np.exp(z - z.max()).sum()) - z.max()
        np.testing.assert_allclose(got[row], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.exp(got).sum(-1), 1.0, rtol=1e-6)


# ------------------------------------------------------------------------------------------------ training


def test_one_batch_overfits_to_near_zero_loss(split):
    batch = take(split, slice(0, 8))
    model = tiny_model()
    optimizer, scheduler = adamw(model, weight_decay=0.0)
    out = train(model, optimizer, scheduler, LoopData(itertools.repeat(batch), [batch]), LoopSettings(300, 100, 50, 0))
    assert out["status"] == "completed" and out["steps_done"] == 300
    assert out["loss"] < 0.05 and out["val_loss"] < 0.05


def test_grad_accumulation_equals_one_big_batch(split):
    # Micro-batches with different numbers of counted tokens: a plain mean of their means would be wrong.
    micro = [take(split, slice(i, i + 4)) for i in range(0, 24, 4)]
    big = [take(split, slice(i, i + 8)) for i in range(0, 24, 8)]
    assert len({int(b.loss_mask.sum()) for b in micro}) > 1
    m1, m2 = tiny_model(3), tiny_model(3)
    (o1, s1), (o2, s2) = adamw(m1, 1e-3, weight_decay=0.1), adamw(m2, 1e-3, weight_decay=0.1)
    a = train(m1, o1, s1, LoopData(iter(micro)), LoopSettings(3, 10, 1, 3, grad_accumulation=2, clip_norm=1.0))
    b = train(m2, o2, s2, LoopData(iter(big)), LoopSettings(3, 10, 1, 3, clip_norm=1.0))
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
    np.testing.assert_allclose(m1.buffer.data, m2.buffer.data, rtol=1e-4, atol=1e-6)
    # ... and the loss weighting matters: the weights moved much more than the tolerance above.
    assert np.abs(m1.buffer.data - tiny_model(3).buffer.data).max() > 1e-3


def test_train_step_logs_the_norm_before_clipping(split):
    batch = take(split, slice(0, 8))
    model = tiny_model()
    optimizer, _ = adamw(model)
    _, unclipped = train_step(model, optimizer, [batch])
    _, reported = train_step(model, optimizer, [batch], clip_norm=unclipped / 10)
    assert reported == pytest.approx(unclipped, rel=1e-6)
    assert np.sqrt((model.buffer.grad.astype(np.float64) ** 2).sum()) == pytest.approx(unclipped / 10, rel=1e-4)


def test_log_rows_follow_the_documented_numbering(split, tmp_path):
    model = tiny_model()
    optimizer, scheduler = adamw(model, 1e-3)
    batcher = TrainBatcher(split, 4, data_seed=0)
    log = tmp_path / "train_log.jsonl"
    train(model, optimizer, scheduler, LoopData(batcher, EvalBatcher(split, 48)), LoopSettings(23, 10, 4, 0),
          Bookkeeping(log_path=log))
    got = rows(log)
    assert [r["step"] for r in got if "loss" in r] == [0, 4, 8, 12, 16, 20, 22]
    assert [r["step"] for r in got if "val_loss" in r] == [0, 10, 20, 22]
    assert list(got[0]) == ["step", "loss", "lr", "grad_norm"]
    assert list(got[1]) == ["step", "val_loss", "val_ppl"]


def test_same_seed_gives_identical_log_bytes_and_dropout_uses_the_training_rng(split, tmp_path):
    def run(name: str, seed: int) -> bytes:
        model = tiny_model(seed, dropout=0.2)
        optimizer, scheduler = adamw(model, 1e-3)
        log = tmp_path / name
        train(model, optimizer, scheduler, LoopData(TrainBatcher(split, 4, 5), EvalBatcher(split, 48)),
              LoopSettings(12, 5, 1, seed), Bookkeeping(log_path=log))
        return log.read_bytes()

    assert run("a", 7) == run("b", 7)
    assert run("c", 8) != run("a", 7)


# ------------------------------------------------------------------------------------------------ pitfalls


class Poison:
    """A training iterator that sets ln_f's gain to NaN when step `at`'s batch is drawn."""

    def __init__(self, model: MiniGPT, batches, at: int) -> None:
        self.model, self.batches, self.at, self.drawn = model, batches, at, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.drawn == self.at:
            self.model.transformer.ln_f.weight.data[:] = np.nan
        self.drawn += 1
        return next(self.batches)

    def state_dict(self):
        return self.batches.state_dict()


def test_nan_loss_halts_with_status_diverged_and_names_the_last_good_checkpoint(split, tmp_path):
    model = tiny_model()
    assert list(model.named_parameters())[-2][0] == "transformer.ln_f.weight"
    optimizer, scheduler = adamw(model, 1e-3)
    manager = CheckpointManager(tmp_path, keep_last=2)
    manifest, log = tmp_path / "manifest.json", tmp_path / "train_log.jsonl"
    out = train(model, optimizer, scheduler, LoopData(Poison(model, TrainBatcher(split, 4, 0), 7)),
                LoopSettings(20, 5, 1, 0),
                Bookkeeping(manifest, log_path=log, checkpointing=Checkpointing(manager, "hash", save_every=3)))
    assert out["status"] == DIVERGED and out["stopped_at"] == 7 and out["steps_done"] == 7
    assert out["checkpoint"] == str(manager.path_for(6))  # the last good one, steps 0..5 done
    assert optimizer.step_count == 7  # the NaN step's update was not applied
    assert max(r["step"] for r in rows(log)) == 6
    written = json.loads(manifest.read_text())
    assert written["status"] == DIVERGED and written["stopped_at"] == 7 and written["seed"] == 0


def test_high_loss_after_warmup_warns_once(split, capsys):
    model = tiny_model()
    optimizer, scheduler = adamw(model, 1e-9)  # learns nothing: the loss stays near ln(64) ≈ 4.16
    out = train(model, optimizer, scheduler, LoopData(TrainBatcher(split, 4, 0)),
                LoopSettings(12, 100, 2, 0, warmup_steps=4))
    warnings = [m for m in out["messages"] if "above 4.0 after the warm-up" in m]
    assert len(warnings) == 1 and "at step 4 " in warnings[0]
    assert "above 4.0" in capsys.readouterr().err


def test_sigint_stops_at_the_step_boundary_with_a_checkpoint(split, tmp_path):
    class Interrupt:
        def __init__(self, batches):
            self.batches, self.drawn = batches, 0

        def __next__(self):
            self.drawn += 1
            if self.drawn == 5:  # while step 4 runs
                os.kill(os.getpid(), signal.SIGINT)
            return next(self.batches)

        def state_dict(self):
            return self.batches.state_dict()

    previous = signal.getsignal(signal.SIGINT)
    model = tiny_model()
    optimizer, scheduler = adamw(model, 1e-3)
    manager = CheckpointManager(tmp_path)
    out = train(model, optimizer, scheduler, LoopData(Interrupt(TrainBatcher(split, 4, 0))),
                LoopSettings(50, 100, 1, 0),
                Bookkeeping(tmp_path / "manifest.json", checkpointing=Checkpointing(manager, "hash", save_every=None)))
    assert out["status"] == INTERRUPTED and out["stopped_at"] == 4 and out["signal"] == "SIGINT"
    assert out["checkpoint"] == str(manager.path_for(5)) and manager.latest() == manager.path_for(5)
    assert json.loads((tmp_path / "manifest.json").read_text())["status"] == INTERRUPTED
    assert signal.getsignal(signal.SIGINT) is previous  # the handler is put back


def test_halt_alert_stops_the_run(split):
    model = tiny_model()
    optimizer, scheduler = adamw(model, 1e-3)
    out = train(model, optimizer, scheduler, LoopData(TrainBatcher(split, 4, 0)), LoopSettings(30, 100, 5, 0),
                Bookkeeping(alerts=AlertMonitor(["grad_norm > 0: halt"])))
    assert out["status"] == HALTED and out["stopped_at"] == 0
    assert any("grad_norm > 0" in m for m in out["messages"])


def test_early_stopping_stops_at_the_patience_th_evaluation_without_improvement(split):
    model = tiny_model()
    optimizer, scheduler = adamw(model, 1e-3)
    stopper = EarlyStopping("val_loss", patience=2, min_delta=10.0)  # nothing improves by 10 nats
    out = train(model, optimizer, scheduler, LoopData(TrainBatcher(split, 4, 0), EvalBatcher(split, 48)),
                LoopSettings(100, 5, 5, 0), Bookkeeping(early_stopping=stopper))
    # val at 0 sets the best; 5 and 10 do not improve by min_delta: stop after step 10.
    assert out["status"] == EARLY_STOPPED and out["stopped_at"] == 10 and out["steps_done"] == 11


def test_accumulation_is_the_ordered_sum_of_per_micro_batch_gradients(split):
    """The summation order data-parallel training relies on: k micro-batches give, bit for bit, the sum in order
    0..k-1 of k gradients each computed from zero in its own model copy (as k workers would), weighted n_i/N."""
    batches = [take(split, np.arange(8 * i, 8 * i + 8)) for i in range(3)]
    model = tiny_model()
    train_step(model, adamw(model)[0], batches)
    counts = [int(np.count_nonzero(trim_padding(b).loss_mask)) for b in batches]
    summed = None
    for batch, count in zip(batches, counts, strict=True):
        worker = tiny_model()
        adamw(worker)[0].zero_grad()
        b = trim_padding(batch)
        _, loss = worker(b.input, b.target, b.attn_pad_mask, b.loss_mask)
        loss.backward(np.asarray(count / sum(counts), dtype=loss.dtype))
        summed = worker.buffer.grad.copy() if summed is None else summed + worker.buffer.grad
    assert summed.tobytes() == model.buffer.grad.tobytes()
