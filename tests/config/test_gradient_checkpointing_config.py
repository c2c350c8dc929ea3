"""training.gradient_checkpointing: the key reaches the model, changes no number (the same train_log.jsonl bytes
and model file), stays out of the config hash (a resume may switch it), and is refused for a family without it."""

from __future__ import annotations

from pathlib import Path

import matplotlib.figure
import pytest
import yaml

import minitrain.models.decoder as decoder_module
from minitrain.common.errors import UserError
from minitrain.config import load_config
from minitrain.course.fixtures import write_tiny_data
from minitrain.models.registry import FAMILIES
from minitrain.training.parts import training_config_hash
from minitrain.training.run import run_training

ON = ["training.gradient_checkpointing=true"]


@pytest.fixture(autouse=True)
def no_figures(monkeypatch):
    """Figures are not drawn (they read the log, compared here byte for byte): most of a tiny run's time."""
    monkeypatch.setattr(matplotlib.figure.Figure, "tight_layout", lambda fig, **keys: None)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda fig, f, **keys: f.write(b"\x89PNG\r\n\x1a\n"))


def write_config(folder: Path, family: str = "llama") -> Path:
    """4 steps of the family's example model, dropout on (a checkpointed layer must replay its masks)."""
    folder.mkdir(parents=True, exist_ok=True)
    data_dir = write_tiny_data(folder, baseline_ppl=1000.0)
    config = {
        "model": {**FAMILIES[family].example, "dropout": 0.1},
        "optimizer": {"type": "adamw", "lr_max": 1e-3},
        "scheduler": {"warmup_steps": 1, "total_steps": 4},
        "training": {"batch_size": 8, "val_every": 2, "log_every": 1, "rng_seed": 3, "data_seed": 5,
                     "checkpoint": {"save_every": 2}},
        "data": {"train_path": f"{data_dir}/train.jsonl", "val_path": f"{data_dir}/val.jsonl",
                 "vocab_path": f"{data_dir}/vocab.json"},
        "monitoring": {"progress": "none"},
    }
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def train(config: Path, out_dir: Path, overrides: list[str], **keys) -> dict:
    return run_training(load_config(config, overrides), out_dir, progress=False, models_dir=config.parent / "models",
                        baseline_path=config.parent / "baseline.json", **keys)


@pytest.fixture
def checkpointed_layers(monkeypatch) -> list[int]:
    """Counts the layers Llama (its decoder) runs through minitrain.autograd.recompute (one entry per call)."""
    calls: list[int] = []
    real = decoder_module.checkpoint

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(decoder_module, "checkpoint", counting)
    return calls


def test_the_same_log_and_model_with_and_without_it(tmp_path, checkpointed_layers):
    config = write_config(tmp_path)
    plain = train(config, tmp_path / "plain", [])
    assert checkpointed_layers == []
    recomputed = train(config, tmp_path / "recomputed", ON)
    n_layer = FAMILIES["llama"].example["n_layer"]
    assert len(checkpointed_layers) >= 4 * n_layer  # every layer of every training step went through it
    log = "train_log.jsonl"
    assert (tmp_path / "recomputed" / log).read_bytes() == (tmp_path / "plain" / log).read_bytes()
    assert recomputed["model_path"] == plain["model_path"]  # named by its content's hash: the same bytes


def test_it_is_not_hashed_so_a_resume_may_switch_it(tmp_path):
    config = write_config(tmp_path)
    assert training_config_hash(load_config(config, ON)) == training_config_hash(load_config(config, []))
    whole = train(config, tmp_path / "whole", [])
    with pytest.raises(UserError, match="halted after 2 steps"):
        train(config, tmp_path / "parts", ["monitoring.alerts=['step >= 1: halt']"])
    resumed = train(config, tmp_path / "parts", ON, resume=tmp_path / "parts")
    log = "train_log.jsonl"
    assert (tmp_path / "parts" / log).read_bytes() == (tmp_path / "whole" / log).read_bytes()
    assert resumed["model_path"] == whole["model_path"]


def test_a_family_without_it_is_refused(tmp_path):
    config = write_config(tmp_path, "minigpt")
    with pytest.raises(UserError, match=r"training\.gradient_checkpointing: model.type minigpt cannot recompute its "
                                        r"layers in backward \(.*; only llama, gemma can\); set it to false"):
        load_config(config, ON)
    assert not load_config(config, ["training.gradient_checkpointing=false"]).training.gradient_checkpointing
