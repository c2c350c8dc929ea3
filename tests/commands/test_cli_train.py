"""End to end through the command line: init → validate → train --dry-run → a short train → info."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_cli import run
from test_config_data import make_corpus
from test_run import log_rows

from minitrain.config import config_from_dict, load_config
from minitrain.course.fixtures import write_tiny_run
from minitrain.training import artifacts


@pytest.mark.slow
@pytest.mark.parametrize(("template", "steps_home"), [("minimal", "training"), ("lab01", "scheduler")])
def test_init_validate_dry_run_train(tmp_path, capsys, monkeypatch, template, steps_home):
    monkeypatch.chdir(tmp_path)
    make_corpus(tmp_path / "d")
    assert run(["init", "--template", template, "--data", "d", "-o", "c.yaml"], capsys)[0] == 0
    assert run(["validate", "c.yaml"], capsys)[0] == 0

    settings = [f"{steps_home}.total_steps=4", "scheduler.warmup_steps=0", "training.batch_size=2",
                "training.val_every=2", "optimizer.lr_max=2e-3"]
    short = [arg for setting in settings for arg in ("--set", setting)]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    code, out, err = run(["train", "c.yaml", *short, "--dry-run"], capsys)
    assert code == 0 and out.startswith("dry run (nothing written):")
    assert err.splitlines()[:3] == ["dry run: checking the data", "dry run: building the model, optimizer and "
                                    "batches", "dry run: timing one forward/backward of one micro-batch (2 rows)"]
    assert "estimated_from: one forward/backward of one micro-batch, measured: " in out
    assert "steps: 4" in out and "parameters: " in out
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before

    code, out, _ = run(["train", "c.yaml", *short, "--out-dir", "run", "--seed", "5", "--quiet"], capsys)
    assert code == 0 and "run folder: run" in out
    resolved_text = (tmp_path / "run" / "config.resolved.yaml").read_text(encoding="utf-8")
    assert "# override: --set optimizer.lr_max=2e-3" in resolved_text and "# override: --seed 5" in resolved_text
    resolved = yaml.safe_load(resolved_text)
    assert resolved[steps_home]["total_steps"] == 4 and resolved["training"]["rng_seed"] == 5
    assert (tmp_path / "run" / "config.yaml").read_text(encoding="utf-8") == (tmp_path / "c.yaml").read_text()
    rows = log_rows(tmp_path / "run")
    assert rows[0]["step"] == 0 and rows[0]["lr"] == pytest.approx(2e-3)  # the --set value really trained
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    assert results["steps"] == 4
    for name in ("metrics.csv", "report.md", "manifest.json", "loss_curve.png"):
        assert (tmp_path / "run" / name).is_file(), name
    assert "## Training quality:" in (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    code, out, _ = run(["info", "run"], capsys)
    assert code == 0 and "quality: " in out and "steps: 4" in out


@pytest.mark.slow
def test_models_dir_flag_puts_the_model_there_and_nowhere_else(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MINITRAIN_MODELS_DIR", str(tmp_path / "env-models"))
    config = write_tiny_run(tmp_path, "output: {models_dir: config-models}\n", plots=True)  # the flag beats the config
    before = sorted(p for p in tmp_path.rglob("*") if p.is_file())

    code, _, err = run(["train", config, "--out-dir", "run", "--models-dir", "run/models", "--quiet"], capsys)
    assert code == 0, err
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    model = tmp_path / results["model_path"]  # relative to the folder it ran from (manifest.json's working_dir)
    assert model.parent == tmp_path / "run" / "models" and model.is_file()
    new = [p for p in tmp_path.rglob("*") if p.is_file() and p not in before]
    assert [p for p in new if p.suffix == ".safetensors" and p.parent.name != "checkpoints"] == [model]
    for folder in ("default-models", "env-models", "config-models"):
        assert not (tmp_path / folder).exists(), folder
    resolved_text = (tmp_path / "run" / "config.resolved.yaml").read_text(encoding="utf-8")
    assert "# override: --models-dir run/models" in resolved_text
    assert yaml.safe_load(resolved_text)["output"]["models_dir"] == "run/models"


def test_models_dir_resolution_order(tmp_path, monkeypatch):
    # Explicit argument (or --models-dir) > output.models_dir > $MINITRAIN_MODELS_DIR > the run folder's models/.
    monkeypatch.delenv("MINITRAIN_MODELS_DIR", raising=False)
    assert artifacts.models_dir(None, "runs/x") == Path("runs/x/models")
    monkeypatch.setenv("MINITRAIN_MODELS_DIR", str(tmp_path / "env"))
    assert artifacts.models_dir(None, "runs/x") == tmp_path / "env"
    assert artifacts.models_dir("from-config", "runs/x") == Path("from-config")
    cfg = load_config(write_tiny_run(tmp_path, "output: {models_dir: cfg-models}\n", plots=True),
                      values={"output.models_dir": "flag-models"})
    assert cfg.output.models_dir == "flag-models" and "--models-dir flag-models" in cfg.source.overrides
    assert load_config(tmp_path / "config.yaml").output.models_dir == "cfg-models"
    assert config_from_dict({"training": {"total_steps": 5}}).output.models_dir is None  # the default


@pytest.mark.slow
def test_a_stopped_run_prints_the_minitrain_command_that_was_typed(tmp_path):
    """`.venv/bin/minitrain train ...` stopped by an alert says to resume with that same program and flags."""
    import os
    import shlex
    import subprocess
    import sys

    config = write_tiny_run(tmp_path)
    program = Path(sys.executable).parent / "minitrain"
    typed = [str(program), "train", str(config), "--out-dir", "run", "--set",
             "monitoring.alerts=['step >= 3: halt']", "--quiet"]
    env = {**os.environ, "MINITRAIN_MODELS_DIR": str(tmp_path / "models")}
    done = subprocess.run(typed, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 4, done.stderr
    printed = shlex.split(done.stderr.split("resume with: ")[1])
    assert printed[0] in (str(program), "minitrain") and printed[1:] == [*typed[1:], "--resume",
                                                                         "run/checkpoints/step-5.safetensors"]


def test_a_run_in_the_specs_output_folder_saves_model_safetensors_and_final_model_json(tmp_path, capsys, monkeypatch):
    # publish spec §4.1: `train config.yaml` saves ./output/model.safetensors and ./output/final_model.json, and
    # `publish --repo R` (no folder) publishes ./output
    import hashlib

    monkeypatch.chdir(tmp_path)
    make_corpus(tmp_path / "d")
    assert run(["init", "--data", "d", "-o", "c.yaml"], capsys)[0] == 0
    short = ["--set", "training.total_steps=2", "--set", "training.batch_size=2", "--set", "scheduler.warmup_steps=0"]
    assert run(["train", "c.yaml", *short, "--out-dir", "elsewhere", "--quiet"], capsys)[0] == 0
    assert not (tmp_path / "elsewhere" / "final_model.json").exists()  # only the spec's folder gets them
    code, out, err = run(["train", "c.yaml", *short, "--out-dir", "./output", "--quiet"], capsys)
    assert code == 0 and "saved: output/model.safetensors" in out, err
    results = json.loads((tmp_path / "output" / "results.json").read_text())
    facts = json.loads((tmp_path / "output" / "final_model.json").read_text())
    weights = (tmp_path / "output" / "model.safetensors").read_bytes()
    assert hashlib.sha256(weights).hexdigest() == results["model_sha256"] == facts["sha256"]
    assert weights == Path(results["model_path"]).read_bytes()
    assert facts["method"] == "scratch" and facts["holds"] == "the whole model" and facts["base"] is None
    assert {k: facts[k] for k in ("run_id", "status", "steps", "val_loss")} == {
        k: results[k] for k in ("run_id", "status", "steps", "val_loss")}
    assert not list((tmp_path / "output").glob(".*tmp"))  # nothing half written is left
    code, out, _ = run(["publish", "--repo", "alice/m", "--dry-run"], capsys)
    assert code == 0 and "Publishing ./output (the default folder)" in out
