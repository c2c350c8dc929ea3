"""The evaluation and loader keys in a real (tiny) run: metrics logged at each validation, validation per epoch,
dev and test scored at the end, file order, the last smaller batch, float64 (issue 14, items 5 and 6)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from test_run import DATA, log_rows, train_tiny, write_tiny_run

from minitrain.config import load_config
from minitrain.config.problems import ConfigError
from minitrain.data.batcher import EvalBatcher, encode_split
from minitrain.data.tokenizer import CharTokenizer
from minitrain.evaluation.metrics import TokenAccuracyMeter
from minitrain.models.minigpt import MiniGPT
from minitrain.training.plan import plan_run
from minitrain.training.scoring import measure

pytestmark = pytest.mark.slow


def test_chosen_metrics_are_logged_at_each_validation_and_dev_is_scored_at_the_end(tmp_path):
    config = write_tiny_run(tmp_path)
    text = config.read_text().replace("  val_every: 5\n", "  val_every: 5\n  val_metrics: [exact_match, "
                                                           "token_accuracy]\n")
    config.write_text(text)
    results = train_tiny(config, tmp_path / "run")
    val_rows = [r for r in log_rows(tmp_path / "run") if "val_loss" in r]
    assert [r["step"] for r in val_rows] == [0, 5, 10, 15, 20, 23]
    assert all(list(r) == ["step", "val_loss", "val_ppl", "val_token_accuracy", "val_exact_match"] for r in val_rows)
    assert all(0.0 <= r["val_token_accuracy"] <= 1.0 and 0.0 <= r["val_exact_match"] <= 1.0 for r in val_rows)
    assert val_rows[-1]["val_exact_match"] == results["val_exact_match"]  # the same decoding, the same weights
    # dev (8 records beside train) is scored once, at the end; there is no test split here
    assert results["dev_ppl"] > 1 and 0.0 <= results["dev_exact_match"] <= 1.0 and "test_ppl" not in results
    assert "| dev_ppl |" in (tmp_path / "run" / "report.md").read_text()
    assert "val_token_accuracy" in (tmp_path / "run" / "metrics.csv").read_text().splitlines()[0]


def test_the_logged_token_accuracy_is_the_share_of_argmax_hits(tmp_path):
    data = tmp_path / "data"
    write_tiny_run(tmp_path)
    tokenizer = CharTokenizer.load(data / "vocab.json")
    records = [json.loads(line) for line in (data / "val.jsonl").read_text().splitlines()]
    split = encode_split(records, tokenizer, 32)
    model = MiniGPT(1, 2, 16, 32, 64, 32, rng=3)
    measured = measure(model, EvalBatcher(split, 5), token_accuracy=True)
    logits, _ = model(split.input, attn_pad_mask=split.attn_pad_mask)
    hits = (np.argmax(logits.data, axis=-1) == split.target)[split.loss_mask]
    assert measured["token_accuracy"] == pytest.approx(hits.mean(), abs=1e-12)
    meter = TokenAccuracyMeter()
    meter.update(np.eye(3)[[[0, 1, 2]]], np.array([[0, 2, 2]]), np.array([[True, True, False]]))
    assert (meter.correct, meter.count, meter.accuracy) == (1, 2, 0.5)


def test_validation_every_epoch_and_a_test_split(tmp_path):
    config = write_tiny_run(tmp_path)
    shutil.copy(DATA / "dev.jsonl", tmp_path / "data" / "test.jsonl")
    text = config.read_text().replace("  val_every: 5\n", "  val_every_epoch: true\n").replace(
        "  dev_path:", f"  test_path: {tmp_path}/data/test.jsonl\n  dev_path:")
    config.write_text(text)
    results = train_tiny(config, tmp_path / "run")
    # 40 records in batches of 4: 10 steps an epoch, so validations at each epoch's last step (9, 19: after 10
    # and 20 updates) and at the run's last step; two whole epochs validate twice, the last step not again
    assert [r["step"] for r in log_rows(tmp_path / "run") if "val_loss" in r] == [9, 19, 23]
    train_tiny(config, tmp_path / "two", ["scheduler.total_steps=20"])
    assert [r["step"] for r in log_rows(tmp_path / "two") if "val_loss" in r] == [9, 19]
    assert plan_run(load_config(config, ["scheduler.total_steps=20"]))["validations"] == 2
    assert results["test_ppl"] > 1 and results["test_loss"] == pytest.approx(np.log(results["test_ppl"]))


def test_file_order_and_the_last_smaller_batch_change_the_run_and_its_hash(tmp_path):
    from minitrain.training.parts import training_config_hash

    config = write_tiny_run(tmp_path)
    base = train_tiny(config, tmp_path / "a")
    ordered = train_tiny(config, tmp_path / "b", ["training.shuffle=false", "training.drop_last=false"])
    train_tiny(config, tmp_path / "c", ["training.shuffle=false", "training.drop_last=false",
                                        "training.data_seed=99"])
    assert ordered["model_path"] != base["model_path"]
    # in file order the data seed plays no part (only the model file's metadata records it)
    assert (tmp_path / "c" / "train_log.jsonl").read_bytes() == (tmp_path / "b" / "train_log.jsonl").read_bytes()
    plain, changed = load_config(config), load_config(config, ["training.shuffle=false"])
    assert training_config_hash(plain) != training_config_hash(changed)


def test_float64_trains_and_saves_float64_weights(tmp_path):
    from minitrain.runs.model_files import load_model_file

    config = write_tiny_run(tmp_path)
    results = train_tiny(config, tmp_path / "run", ["model.dtype=float64", "scheduler.total_steps=6",
                                                    "scheduler.warmup_steps=2"])
    state, _, _ = load_model_file(results["model_path"])
    assert {a.dtype for a in state.values()} == {np.dtype(np.float64)}


def test_exact_match_needs_verb_records(tmp_path):
    config = write_tiny_run(tmp_path)
    with pytest.raises(ConfigError, match=r"training\.val_metrics: exact_match decodes the answer of verb records"):
        load_config(config, ["training.val_metrics=[exact_match]", "data.format=text", "data.loss_on=all",
                             "data.heldout_policy=none"])
