"""`--resume RUN` continues the run in its folder with its recorded config, and refuses a folder whose files are
another run's (issue 26: item 4 and the resume deviation)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from test_cli import run

from minitrain.course.fixtures import write_tiny_run

pytestmark = pytest.mark.slow
HALT = ["--set", "monitoring.alerts=['step >= 9: halt']"]
TABLE_LOG = ('{"step": 0, "loss": 9.7, "lr": 0.005, "grad_norm": 37.9}\n{"step": 0, "val_loss": 5.89}\n'
             '{"step": 5, "val_loss": 2.1}\n')


@pytest.fixture
def halted(tmp_path, monkeypatch, capsys) -> Path:
    """A run halted at step 9 (checkpoint step-8 kept), trained with one --set that the config hash covers."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MINITRAIN_MODELS_DIR", raising=False)
    write_tiny_run(tmp_path)
    code, _, err = run(["train", "config.yaml", "--set", "optimizer.lr_max=2e-3", *HALT, "--out-dir", "run",
                        "--quiet"], capsys)
    assert code == 4, err
    return tmp_path / "run"


def test_resume_without_a_config_continues_the_run_in_its_folder(halted, capsys):
    code, out, err = run(["train", "--resume", "run", "--set", "monitoring.alerts=[]", "--quiet"], capsys)
    assert code == 0, err
    assert "run folder: run" in out and not Path("runs").exists()  # no new folder
    results = json.loads((halted / "results.json").read_text(encoding="utf-8"))
    # model_path: relative to the folder the run started in
    assert results["steps"] == 24 and (halted.parent / results["model_path"]).parent == halted / "models"
    manifest = json.loads((halted / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["overrides"][0] == "--set optimizer.lr_max=2e-3"  # the run's own record, kept
    assert "# override: --set optimizer.lr_max=2e-3" in (halted / "config.resolved.yaml").read_text()


def test_a_config_that_differs_from_the_recorded_one_is_refused_naming_the_key(halted, capsys):
    code, _, err = run(["train", "config.yaml", "--resume", "run", "--quiet"], capsys)
    assert code == 2
    assert err.startswith("error: run/config.resolved.yaml: the run was recorded with optimizer.lr_max = 0.002")
    assert err.count("\n") == 1 and not (halted / "results.json").exists()


def test_a_foreign_log_is_refused_before_anything_is_written(halted, capsys):
    (halted / "train_log.jsonl").write_text(TABLE_LOG, encoding="utf-8")  # a table run's: no val_ppl
    before = {p.name: p.read_bytes() for p in halted.iterdir() if p.is_file()}
    code, _, err = run(["train", "--resume", "run", "--quiet"], capsys)
    assert code == 2 and err.startswith("error: run/train_log.jsonl: not the log of the run"), err
    assert err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in halted.iterdir() if p.is_file()} == before


def test_a_foreign_manifest_is_refused(halted, tmp_path, capsys):
    manifest = json.loads((halted / "manifest.json").read_text(encoding="utf-8"))
    manifest["config_hash"] = "0" * 64
    (halted / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    code, _, err = run(["train", "--resume", "run", "--quiet"], capsys)
    assert code == 2 and err.startswith("error: run/manifest.json: belongs to another run"), err
    shutil.rmtree(halted / "checkpoints")
    code, _, err = run(["train", "--resume", "run", "--quiet"], capsys)
    assert code == 2 and "error: " in err


def _cosine(step: int, total: int) -> float:
    """The tiny run's schedule as lab 01 and torch define it: warm-up 6 steps to 2e-3, cosine down to 3e-4."""
    if step < 6:
        return 2e-3 * (step + 1) / 6
    return 3e-4 + 0.5 * (2e-3 - 3e-4) * (1 + math.cos(math.pi * (step - 6) / (total - 6)))


def test_a_resume_extends_the_run_on_the_schedule_rebuilt_for_the_new_total(halted, capsys):
    kept = (halted / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    code, _, err = run(["train", "--resume", "run", "--set", "training.total_steps=30",
                        "--set", "monitoring.alerts=['step >= 17: halt']", "--quiet"], capsys)
    assert code == 4, err  # halted again: and resumed below without restating the new total
    resolved = (halted / "config.resolved.yaml").read_text(encoding="utf-8")
    assert "# override: --set optimizer.lr_max=2e-3\n" in resolved and "# override: --set training.total_steps=30" \
        in resolved and "\n  total_steps: 30\n" in resolved
    code, _, err = run(["train", "--resume", "run", "--set", "monitoring.alerts=[]", "--quiet"], capsys)
    assert code == 0, err
    assert json.loads((halted / "results.json").read_text(encoding="utf-8"))["steps"] == 30
    resumed_at = json.loads((halted / "manifest.json").read_text(encoding="utf-8"))["resumes"][0]["step"]
    rows = [json.loads(line) for line in (halted / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    lrs = {row["step"]: row["lr"] for row in rows if "lr" in row}
    assert max(lrs) == 29 and min(lrs) == 0
    for step, lr in lrs.items():  # the steps taken keep the old curve, the rest follow the new total's
        assert lr == pytest.approx(_cosine(step, 24 if step < resumed_at else 30), rel=1e-6), step
    now = (halted / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    assert [line for line in now if json.loads(line)["step"] < resumed_at] == \
        [line for line in kept if json.loads(line)["step"] < resumed_at]  # byte for byte


def test_a_resume_shortens_the_run_but_not_below_its_checkpoint(halted, capsys):
    code, _, err = run(["train", "--resume", "run", "--set", "training.max_steps=7", "--quiet"], capsys)
    assert code == 2 and err.startswith("error: ") and "saved after step 11, past the new total_steps 7" in err, err
    assert err.count("\n") == 1 and not (halted / "results.json").exists()
    code, _, err = run(["train", "--resume", "run", "--set", "training.max_steps=16", "--set", "monitoring.alerts=[]",
                        "--quiet"], capsys)
    assert code == 0, err
    assert json.loads((halted / "results.json").read_text(encoding="utf-8"))["steps"] == 16


def test_a_resume_cut_short_before_its_first_checkpoint_still_resumes(halted, capsys, monkeypatch):
    """A move of the stopping point is recorded at the start (config.resolved.yaml, the manifest), before any
    checkpoint under the new config exists: if that resume dies first, the older checkpoints must still resume
    the run (the manifest keeps the hashes they were written under)."""
    import minitrain.training.run as run_module

    def dies(*args, **kwargs):
        raise MemoryError("killed before its first checkpoint")

    with monkeypatch.context() as m:
        m.setattr(run_module, "train", dies)
        code, _, err = run(["train", "--resume", "run", "--set", "training.total_steps=30", "--quiet"], capsys)
    assert code != 0 and "memory" in err.lower(), err
    assert "\n  total_steps: 30\n" in (halted / "config.resolved.yaml").read_text(encoding="utf-8")
    code, _, err = run(["train", "--resume", "run", "--set", "monitoring.alerts=[]", "--quiet"], capsys)
    assert code == 0, err
    assert json.loads((halted / "results.json").read_text(encoding="utf-8"))["steps"] == 30
