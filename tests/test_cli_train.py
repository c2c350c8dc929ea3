"""End to end through the command line: init → validate → train --dry-run → a short train → info."""

from __future__ import annotations

import json

import pytest
import yaml
from test_cli import run
from test_config_data import make_corpus

from minitrain import artifacts


@pytest.mark.slow
@pytest.mark.parametrize(("template", "steps_home"), [("minimal", "training"), ("lab01", "scheduler")])
def test_init_validate_dry_run_train(tmp_path, capsys, monkeypatch, template, steps_home):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(artifacts, "DEFAULT_MODELS_DIR", tmp_path / "models")  # keep the repo's models/ clean
    make_corpus(tmp_path / "d")
    assert run(["init", "--template", template, "--data", "d", "-o", "c.yaml"], capsys)[0] == 0
    assert run(["validate", "c.yaml"], capsys)[0] == 0

    settings = [f"{steps_home}.total_steps=4", "scheduler.warmup_steps=0", "training.batch_size=2",
                "training.val_every=2", "optimizer.lr_max=2e-3"]
    short = [arg for setting in settings for arg in ("--set", setting)]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    code, out, _ = run(["train", "c.yaml", *short, "--dry-run"], capsys)
    assert code == 0 and out.startswith("dry run (nothing written):")
    assert "steps: 4" in out and "parameters: " in out
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before

    code, out, _ = run(["train", "c.yaml", *short, "--out-dir", "run", "--seed", "5", "--quiet"], capsys)
    assert code == 0 and "run folder: run" in out
    resolved_text = (tmp_path / "run" / "config.resolved.yaml").read_text(encoding="utf-8")
    assert "# override: --set optimizer.lr_max=2e-3" in resolved_text and "# override: --seed 5" in resolved_text
    resolved = yaml.safe_load(resolved_text)
    assert resolved[steps_home]["total_steps"] == 4 and resolved["training"]["rng_seed"] == 5
    assert (tmp_path / "run" / "config.yaml").read_text(encoding="utf-8") == (tmp_path / "c.yaml").read_text()
    rows = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 0 and rows[0]["lr"] == pytest.approx(2e-3)  # the --set value really trained
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    assert results["steps"] == 4
    for name in ("metrics.csv", "report.md", "manifest.json", "loss_curve.png"):
        assert (tmp_path / "run" / name).is_file(), name
    assert "## Training quality:" in (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    code, out, _ = run(["info", "run"], capsys)
    assert code == 0 and "quality: " in out and "steps: 4" in out
