"""Table runs end to end: a sequential classifier on the committed digits, its run folder (results, confusion matrix,
manifest with the splits' sha256, pipeline in the model file), `predict` applying the same transform, resume with
augmentation bit-exact, cross-validation, regression, a Hub dataset source, the card, and the errors `validate`
gives for widths that do not fit the data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from minitrain import cli
from minitrain.common.errors import UserError
from minitrain.config import load_config
from minitrain.data.augmentation import text_augment
from minitrain.data.batcher import encode_split
from minitrain.data.row_split import split_rows
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.card import build_card
from minitrain.hub.export_hf import export_model
from minitrain.hub.run_folder import read_run
from minitrain.runs.model_files import load_model_file
from minitrain.training.run import run_training

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "data" / "digits" / "digits.csv"
CONFIG = {
    "name": "digits-test",
    "model": {"type": "sequential", "layers": [
        {"linear": {"out_features": 32}}, {"activation": "relu"}, {"dropout": 0.1},
        {"linear": {"out_features": 10}}, {"activation": "softmax"}]},
    "data": {"source": str(DIGITS), "split": {"train": 0.8, "val": 0.1, "test": 0.1, "stratify": "label"},
             "preprocessing": [{"normalize": {"method": "minmax"}}]},
    "optimizer": {"type": "adamw", "lr_max": 0.005},
    "training": {"epochs": 3, "batch_size": 32, "val_every": 20, "log_every": 5,
                 "val_metrics": ["accuracy", "f1", "auc_roc", "confusion_matrix"],
                 "checkpoint": {"save_every": 40}},
    "monitoring": {"progress": "none"},
}


def write_config(folder: Path, config: dict, name: str = "c.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(config, sort_keys=False), "utf-8")
    return path


def train(folder: Path, config: dict, **kwargs) -> dict:
    return run_training(load_config(write_config(folder, config)), folder / "run", models_dir=folder / "models",
                        progress=False, **kwargs)


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("digits")
    return folder / "run", train(folder, CONFIG)


def test_a_digits_classifier_trains_and_leaves_a_complete_run_folder(digits_run):
    run_dir, results = digits_run
    assert results["task"] == "classification" and results["status"] == "completed"
    assert results["test_accuracy"] > 0.85 and results["val_auc_roc"] > 0.95
    assert len(results["test_confusion_matrix"]) == 10 and sum(map(sum, results["test_confusion_matrix"])) == 180
    assert results["classes"] == list(range(10))
    for name in ("confusion_matrix.png", "loss_curve.png", "metrics.csv", "report.md", "results.json"):
        assert (run_dir / name).is_file(), name
    rows = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
    val = [r for r in rows if "val_loss" in r]
    assert set(val[0]) == {"step", "val_loss", "val_accuracy", "val_f1", "val_auc_roc"}  # no perplexity
    manifest = json.loads((run_dir / "manifest.json").read_text())
    splits = manifest["data"]["splits"]
    assert {s: splits[s]["rows"] for s in splits} == {"train": 1437, "val": 180, "test": 180}
    assert manifest["data"]["files"][0]["sha256"] == "4faf08295f17d77e9a147ed5ea842ec501bd089cc6e61627f36ef15c1b48ea5b"
    _, model_config, metadata = load_model_file(results["model_path"])
    assert model_config["layers"][0]["linear"]["in_features"] == 64
    assert metadata["pipeline"]["classes"] == list(range(10))


def test_the_same_seed_gives_the_same_bytes(digits_run, tmp_path):
    run_dir, results = digits_run
    again = train(tmp_path, CONFIG)
    assert (tmp_path / "run" / "train_log.jsonl").read_bytes() == (run_dir / "train_log.jsonl").read_bytes()
    assert Path(again["model_path"]).name == Path(results["model_path"]).name  # named by its content hash


def test_predict_applies_the_saved_preprocessing(digits_run, tmp_path, capsys):
    run_dir, results = digits_run
    lines = DIGITS.read_text().splitlines()
    labels = np.array([line.rsplit(",", 1)[1] for line in lines[1:]])
    test_rows = split_rows(len(labels), {"train": 0.8, "val": 0.1, "test": 0.1}, seed=7, stratify=labels)["test"]
    rows = tmp_path / "test.csv"
    rows.write_text("\n".join([lines[0], *(lines[1 + i] for i in test_rows)]) + "\n")
    out = tmp_path / "predictions.csv"
    assert cli.main(["predict", str(run_dir), str(rows), "-o", str(out)]) == 0
    assert f"accuracy {results['test_accuracy']:.4f}" in capsys.readouterr().out  # the run's own test score
    table = out.read_text().splitlines()
    assert table[0].split(",")[:3] == ['"row"', '"prediction"', '"p_0"'] and len(table) == 181
    probabilities = np.array([[float(v) for v in line.split(",")[2:12]] for line in table[1:]])
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-9)


def test_predict_refuses_what_it_cannot_read(digits_run, tmp_path, capsys):
    run_dir, _ = digits_run
    assert cli.main(["sample", str(run_dir), "--prompt", "x"]) == 2  # and sample refuses a table model
    assert "a table model predicts rows" in capsys.readouterr().err
    missing = tmp_path / "few.csv"
    missing.write_text("pixel_0,pixel_1\n1,2\n")
    assert cli.main(["predict", str(run_dir), str(missing), "-o", str(tmp_path / "o.csv")]) == 2
    assert "has no column 'pixel_2'" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


def test_a_table_model_s_card_says_what_was_trained_and_export_refuses_it(digits_run, tmp_path):
    run_dir, _ = digits_run
    card = build_card(read_run(run_dir), None, "alice/digits")
    assert "Spanish" not in card and "verb" not in card
    assert "pipeline_tag: tabular-classification" in card and "predicts the column `label`" in card
    assert "64 → 32 → 10" in card and "| accuracy |" in card and "minitrain predict RUN_DIR" in card
    with pytest.raises(UserError, match="sequential table model: its run folder and model file hold everything"):
        export_model(run_dir, tmp_path / "export")
    assert not (tmp_path / "export").exists()


def test_resume_with_augmentation_is_bit_exact(tmp_path):
    config = {**CONFIG, "data": {**CONFIG["data"], "image_shape": [8, 8],
                                 "augmentation": [{"random_crop": {"size": [8, 8], "padding": 1}},
                                                  {"horizontal_flip": {"probability": 0.5}}]},
              "training": {**CONFIG["training"], "epochs": 2}}
    whole = train(tmp_path / "whole", config)
    stopped = tmp_path / "stopped"
    halt = {**config, "monitoring": {"progress": "none", "alerts": ["step >= 50: halt"]}}
    with pytest.raises(UserError, match="halted after 51 steps"):
        train(stopped, halt)
    resumed = train(stopped, config, resume=stopped / "run")
    assert (stopped / "run" / "train_log.jsonl").read_bytes() == (tmp_path / "whole" / "run" /
                                                                   "train_log.jsonl").read_bytes()
    assert Path(resumed["model_path"]).name == Path(whole["model_path"]).name
    plain = train(tmp_path / "plain", {**config, "data": CONFIG["data"]})
    assert plain["train_loss"] != whole["train_loss"]  # the augmentation did change the batches


def test_cross_validation_reports_each_fold_and_the_mean(tmp_path, capsys):
    config = {**CONFIG, "training": {**CONFIG["training"], "epochs": 1,
                                     "cross_validation": {"folds": 3, "stratified": True}}}
    results = train(tmp_path, config)
    run_dir = tmp_path / "run"
    folds = [json.loads((run_dir / f"fold-{i}" / "results.json").read_text()) for i in range(3)]
    accuracies = [f["val_accuracy"] for f in folds]
    assert results["mean"]["val_accuracy"] == pytest.approx(np.mean(accuracies))
    assert results["std"]["val_accuracy"] == pytest.approx(np.std(accuracies))
    assert [f["val_accuracy"] for f in results["folds"]] == accuracies
    assert sum(len(f["val_confusion_matrix"]) and sum(map(sum, f["val_confusion_matrix"])) for f in folds) == 1617
    assert "± " in (run_dir / "report.md").read_text()
    with pytest.raises(UserError, match="a cross-validation trains one run per fold"):
        train(tmp_path / "again", config, resume=run_dir / "fold-0")


def test_a_regression_run_fits_a_noisy_line(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, size=300)
    rows = "x,label\n" + "".join(f"{a},{2 * a + 1 + 0.1 * rng.standard_normal()}\n" for a in x)
    (tmp_path / "line.csv").write_text(rows)
    config = {"model": {"type": "sequential", "layers": [{"linear": {"out_features": 16}}, {"activation": "tanh"},
                                                         {"linear": {"out_features": 1}}]},
              "data": {"source": str(tmp_path / "line.csv"), "split": {"train": 0.8, "val": 0.2}},
              "optimizer": {"lr_max": 0.02}, "monitoring": {"progress": "none"},
              "training": {"epochs": 30, "batch_size": 16, "loss": "huber", "val_metrics": ["mse", "mae", "r2"],
                           "early_stopping": {"metric": "val_r2", "mode": "max", "patience": 50}}}
    results = train(tmp_path, config)
    assert results["task"] == "regression" and results["val_r2"] > 0.95 and results["val_mae"] < 0.3


def test_a_hub_dataset_trains_like_a_local_file(hub, tmp_path):
    hub.add_dataset("alice/digits", {"digits.csv": DIGITS.read_bytes()})
    config = {**CONFIG, "data": {**CONFIG["data"], "source": "hf://datasets/alice/digits/digits.csv"},
              "training": {**CONFIG["training"], "epochs": 1}}
    local = train(tmp_path / "local", {**CONFIG, "training": config["training"]})
    remote = train(tmp_path / "remote", config)
    assert remote["test_accuracy"] == local["test_accuracy"]  # the same rows, split the same way


@pytest.mark.parametrize(("layers", "line", "message"), [
    ([{"linear": {"in_features": 60, "out_features": 10}}], 6,
     "model.layers[0].linear.in_features: is 60, but the data (its number of features) gives 64"),
    ([{"linear": {"out_features": 9}}], 6, "model.layers[0].linear.out_features: is 9, but the data has 10 classes"),
    ([{"linear": {"out_features": 9}}, {"conv2d": {"out_channels": 4, "kernel_size": 3}}], 7,
     "model.layers[1].conv2d: reads (channels, height, width) per example, but its input is (9,)"),
    ([{"reshape": {"shape": [1, 8, 8]}}, {"conv2d": {"out_channels": 4, "kernel_size": 9}}, {"flatten": {}},
      {"linear": {"out_features": 10}}], 12,
     "model.layers[1].conv2d.kernel_size: 9 (dilation 1, padding 0) is larger than its input (1, 8, 8)"),
])
def test_validate_checks_the_widths_against_the_data(tmp_path, capsys, layers, line, message):
    path = write_config(tmp_path, {**CONFIG, "model": {"type": "sequential", "layers": layers}})
    assert cli.main(["validate", str(path)]) == 2
    assert f"c.yaml:{line}: {message}" in capsys.readouterr().err


def test_validate_says_what_the_table_is(tmp_path, capsys):
    assert cli.main(["validate", str(write_config(tmp_path, CONFIG))]) == 0
    assert "✓ classification of 'label' from 64 features, 10 classes" in capsys.readouterr().out


def test_text_augmentation_never_touches_the_counted_answer():
    tokenizer = CharTokenizer.from_texts(["caminar|P1|camino", "comer|R1|comí"])
    records = [{"text": "caminar|P1|camino"}, {"text": "comer|R1|comí"}]
    batch = encode_split(records, tokenizer, 24, "answer")
    augment = text_augment([("random_swap", {"probability": 0.5}), ("random_delete", {"probability": 0.3})])
    changed = augment(batch, np.random.default_rng(0))
    for row, record in enumerate(records):
        answer = record["text"].rsplit("|", 1)[1]
        counted = changed.target[row][changed.loss_mask[row]]
        assert tokenizer.decode(counted[:-1].tolist()) == answer and counted[-1] == tokenizer.eos_id
        n = int(changed.attn_pad_mask[row].sum())
        np.testing.assert_array_equal(changed.input[row, 1:n], changed.target[row, : n - 1])  # still shifted
    assert not np.array_equal(changed.input, batch.input)  # the prompts did change


@pytest.mark.parametrize("name", ["digits-mlp", "digits-cnn"])
def test_the_committed_digits_model_reproduces_its_results(name):
    experiment = ROOT / "experiments" / name
    results = json.loads((experiment / "results.json").read_text())
    info = read_run(experiment)
    assert info.model_path == ROOT / results["model_path"]
    from minitrain.config.table_check import load_table
    from minitrain.models.registry import build_model
    from minitrain.training.tasks import Classification

    table, architecture = load_table(load_config(experiment / "config.yaml"))
    assert architecture == info.model_config and table.pipeline.to_dict() == info.pipeline
    model = build_model(info.model_config)
    model.load_state_dict(info.state)
    from minitrain.data.batcher import EvalBatcher

    for split in ("val", "test"):
        scores = Classification().measure(model, EvalBatcher(table.splits[split], 256), ("accuracy", "f1"))
        assert scores["accuracy"] == results[f"{split}_accuracy"] and scores["f1"] == results[f"{split}_f1"]
    if name == "digits-mlp":
        baselines = json.loads((experiment / "baselines.json").read_text())
        assert baselines["holdout"]["minitrain"]["test"] == results["test_accuracy"]  # the benchmark's run is this one


def test_lock_dry_run_and_info_know_a_table_run(digits_run, tmp_path, capsys):
    config = {**CONFIG, "training": {**CONFIG["training"], "val_every_epoch": True}}
    del config["training"]["val_every"]
    path = write_config(tmp_path, config)
    assert cli.main(["lock", str(path)]) == 0
    lock = yaml.safe_load((tmp_path / "c.lock.yaml").read_text())
    assert lock["data"] == {str(DIGITS): "4faf08295f17d77e9a147ed5ea842ec501bd089cc6e61627f36ef15c1b48ea5b"}
    # the resolved config (with val_every_epoch) loads again, and the plan counts rows
    assert cli.main(["train", str(tmp_path / "c.lock.yaml"), "--strict", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "rows_per_step: 32" in out and "classes: 10" in out
    run_dir, _ = digits_run
    assert cli.main(["info", str(run_dir)]) == 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["data_manifest_hash"] is None  # the verb corpus's manifest says nothing of this table
