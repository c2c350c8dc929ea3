"""The contract every model family keeps, tested for every registered family with every registered optimizer:
build it from YAML, train, save, load the file back, sample (text) or predict (tables), resume bit-exactly from
a checkpoint, and summarise the run folder with `info`. A family added to minitrain/models/registry.py is tested
here with no new test: its record's `example` is the model it trains."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.figure
import numpy as np
import pytest
import yaml

from minitrain import cli
from minitrain.common.errors import UserError
from minitrain.config import load_config
from minitrain.course.fixtures import write_tiny_data
from minitrain.models.registry import FAMILIES, build_model, model_keys
from minitrain.optim.factory import OPTIMIZERS
from minitrain.runs.model_files import load_model_file
from minitrain.training.run import run_training

pytestmark = pytest.mark.slow
DIGITS = Path(__file__).resolve().parents[2] / "data" / "digits" / "digits.csv"
STEPS = 4
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def write_config(folder: Path, family: str, optimizer: str, *extra: str) -> Path:
    """A config of `family`'s example model and `optimizer`: 4 steps, a checkpoint every 2, every row logged."""
    folder.mkdir(parents=True, exist_ok=True)
    if FAMILIES[family].reads == "text":
        data_dir = write_tiny_data(folder, baseline_ppl=1000.0)
        data = {"train_path": f"{data_dir}/train.jsonl", "val_path": f"{data_dir}/val.jsonl",
                "vocab_path": f"{data_dir}/vocab.json"}
    else:
        data = {"source": str(DIGITS), "split": {"train": 0.8, "val": 0.1, "test": 0.1, "stratify": "label"},
                "preprocessing": [{"normalize": {"method": "minmax"}}]}
    # Dropout on where the family has it, so the training RNG is part of what a resume must bring back.
    dropout = {"dropout": 0.1} if "dropout" in model_keys(family) else {}
    # A full-batch optimizer (L-BFGS, CG) takes every training row in its one batch: the digits' 80 % split.
    config = {
        "model": {**FAMILIES[family].example, **dropout},
        "optimizer": {"type": optimizer, "lr_max": 1e-3},
        "scheduler": {"warmup_steps": 1, "total_steps": STEPS},
        # A full-batch optimizer (L-BFGS, CG) takes every training row in one batch: the digits' 80 % split.
        "training": {"batch_size": 1437 if OPTIMIZERS[optimizer].full_batch else 8, "val_every": 2, "log_every": 1,
                     "rng_seed": 3, "data_seed": 5, "checkpoint": {"save_every": 2}},
        "data": data,
        "monitoring": {"progress": "none"},
    }
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def train(config: Path, out_dir: Path, overrides: list[str] = (), **keys) -> dict:
    return run_training(load_config(config, list(overrides)), out_dir, progress=False,
                        models_dir=config.parent / "models", baseline_path=config.parent / "baseline.json", **keys)


def halted_then_resumed(config: Path, folder: Path, whole_dir: Path, whole: dict) -> None:
    """Stop a run after step 1 (a halt alert), resume it: the same log and model file as the uninterrupted run."""
    with pytest.raises(UserError, match="halted after 2 steps"):
        train(config, folder, ["monitoring.alerts=['step >= 1: halt']"])
    resumed = train(config, folder, resume=folder)
    assert (folder / "train_log.jsonl").read_bytes() == (whole_dir / "train_log.jsonl").read_bytes()
    assert resumed["model_path"] == whole["model_path"]  # named by its content's hash: the same bytes


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_trains_saves_loads_serves_and_resumes(tmp_path, capsys, family):
    config = write_config(tmp_path, family, "adamw")
    whole = train(config, tmp_path / "whole")
    assert whole["status"] == "completed" and whole["steps"] == STEPS
    rows = [json.loads(line) for line in (tmp_path / "whole" / "train_log.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if "loss" in row] == list(range(STEPS))
    assert all(np.isfinite(row["loss"]) for row in rows if "loss" in row)

    # The file: a model of this family, whose weights rebuild the same model.
    tensors, model_config, _ = load_model_file(whole["model_path"])
    assert model_config.get("type", "minigpt") == family
    model = build_model(model_config)
    model.load_state_dict(tensors)
    # The record's shapes, computed without building a model, are the built model's.
    assert [(n, tuple(p.shape)) for n, p in model.named_parameters()] == FAMILIES[family].parameter_shapes(model_config)

    # Served: sampled from the run folder (text), or rows predicted with the saved pipeline (tables).
    capsys.readouterr()
    if FAMILIES[family].reads == "text":
        text = json.loads((tmp_path / "data" / "val.jsonl").read_text().splitlines()[0])["text"]
        prompt = text[: text.rindex("|") + 1]  # "caminar|P1|": the verb and the slot, the form to come
        assert cli.main(["sample", str(tmp_path / "whole"), "--prompt", prompt, "--max-new-tokens", "6"]) == 0
        assert capsys.readouterr().out.strip()
    else:
        lines = DIGITS.read_text(encoding="utf-8").splitlines()[:6]  # the header and five rows
        rows_file, out = tmp_path / "rows.csv", tmp_path / "predictions.csv"
        rows_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert cli.main(["predict", str(tmp_path / "whole"), str(rows_file), "-o", str(out)]) == 0
        assert len(out.read_text().splitlines()) == len(lines)  # a header and one line per row
    assert cli.main(["info", str(tmp_path / "whole")]) == 0
    assert "completed" in capsys.readouterr().out

    halted_then_resumed(config, tmp_path / "parts", tmp_path / "whole", whole)


@pytest.mark.parametrize(("family", "optimizer"), [
    (family, optimizer) for optimizer in OPTIMIZERS if optimizer != "adamw" for family in FAMILIES
    if not OPTIMIZERS[optimizer].full_batch or FAMILIES[family].reads == "table"])
def test_every_family_resumes_bit_exactly_with_every_optimizer(tmp_path, monkeypatch, family, optimizer):
    """The optimizer's state goes into the checkpoint and comes back. (Figures are not drawn here: they do not
    depend on the optimizer, and the test above draws them.) A full-batch optimizer trains only a table model:
    a language model's run refuses it (tests/optim/test_full_batch.py)."""
    monkeypatch.setattr(matplotlib.figure.Figure, "tight_layout", lambda fig, **keys: None)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda fig, f, **keys: f.write(PNG_SIGNATURE))
    config = write_config(tmp_path, family, optimizer)
    whole = train(config, tmp_path / "whole")
    assert whole["status"] == "completed" and whole["steps"] == STEPS
    halted_then_resumed(config, tmp_path / "parts", tmp_path / "whole", whole)


def test_the_schema_takes_each_family_keys_in_the_order_resolved_configs_have_always_had():
    from minitrain.config.data_section import DataConfig
    from minitrain.config.schema import ModelConfig
    from minitrain.data.formats import TABLE_FORMATS

    assert list(ModelConfig.model_fields)[:17] == [
        "type", "n_layer", "n_head", "d_model", "d_ff", "vocab_size", "max_seq_len", "dropout", "init_from", "dtype",
        "attn_scale", "context", "d_embed", "hidden", "activation", "freeze", "layers"]  # config.resolved.yaml's bytes
    for name, family in FAMILIES.items():
        assert set(family.keys.model_fields) <= set(model_keys(name)), f"{name}: a key its model does not take"
        assert family.file_prefix and family.reads in ("text", "table")
    assert ModelConfig.model_fields["type"].annotation.__args__ == tuple(FAMILIES)
    assert set(DataConfig.model_fields["format"].annotation.__args__) == {*TABLE_FORMATS, "auto"}
