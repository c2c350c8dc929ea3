"""A YAML run of a table model with a full-batch optimizer (optimizer.type lbfgs or cg): it trains on one batch of
every training row and, the line search accepting no worse point, its loss never rises; a batch smaller than the
split is refused naming optimizer.type."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from minitrain.config import ConfigError, load_config
from minitrain.config.datacheck import check_data
from minitrain.training.run import run_training

ROWS = 50  # the table's rows; 40 train (80 %)


def write_run(folder: Path, optimizer: str, batch_size: int) -> Path:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, 3))
    label = (x @ np.array([1.0, -2.0, 0.5]) + 0.3 * rng.normal(size=ROWS) > 0).astype(int)
    lines = ["a,b,c,label", *(f"{r[0]:.6f},{r[1]:.6f},{r[2]:.6f},{y}" for r, y in zip(x, label, strict=True))]
    (folder / "rows.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = folder / "config.yaml"
    config.write_text(f"""\
data:
  source: {folder / "rows.csv"}
  split: {{train: 0.8, val: 0.2, seed: 0}}
task: classification
model:
  type: sequential
  layers: [{{linear: {{out_features: 2}}}}]
optimizer: {{type: {optimizer}, weight_decay: 0.01}}
scheduler: {{type: constant}}
training: {{total_steps: 6, batch_size: {batch_size}, log_every: 1, val_every: 6}}
monitoring: {{progress: none}}
output: {{plots: false}}
""", encoding="utf-8")
    return config


@pytest.mark.parametrize("optimizer", ["lbfgs", "cg"])
def test_a_table_run_trains_full_batch_and_its_loss_never_rises(tmp_path, optimizer):
    config = write_run(tmp_path, optimizer, batch_size=40)
    outcome = run_training(load_config(config), tmp_path / "run", progress=False, models_dir=tmp_path / "models")
    assert outcome["status"] == "completed"
    rows = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in rows if "loss" in row]
    assert len(losses) == 6 and losses[-1] < 0.7 * losses[0]
    assert all(later <= earlier + 1e-6 for earlier, later in pairwise(losses)), losses


def test_a_batch_smaller_than_the_split_is_refused_naming_the_optimizer(tmp_path):
    config = write_run(tmp_path, "lbfgs", batch_size=8)
    with pytest.raises(ConfigError, match=r"optimizer\.type: lbfgs is a full-batch method: one step must hold all "
                                          r"40 training rows \(set training\.batch_size: 40\)"):
        check_data(load_config(config))


@pytest.mark.parametrize(("change", "key", "words"), [
    (("layers: [{linear: {out_features: 2}}]", "layers: [{dropout: 0.5}, {linear: {out_features: 2}}]"),
     "model.layers[0].dropout", "dropout draws another at each evaluation"),
    (("output: {plots: false}", "output: {plots: false}\npruning: {enabled: true, sparsity: 0.5}"),
     "pruning.enabled", "the pruning mask does not reach"),
])
def test_dropout_or_pruning_with_a_full_batch_optimizer_is_refused_naming_the_key(tmp_path, change, key, words):
    """Each changes the objective or its gradient between two of the line search's evaluations: the loss it
    compares would not be one function's (a run with dropout 0.5 rose from 0.608 to 0.609 and 0.536 to 0.606)."""
    config = write_run(tmp_path, "lbfgs", batch_size=40)
    config.write_text(config.read_text().replace(*change), encoding="utf-8")
    with pytest.raises(ConfigError, match=words) as info:
        load_config(config)
    assert key in str(info.value)
