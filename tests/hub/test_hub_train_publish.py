"""The config's `publish:` section: `minitrain train` publishes after a successful run only, against the
stand-in Hub. A run that diverges uploads nothing; without a token the run folder is kept complete and the error
says how to publish it later."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakehub import serving
from test_cli import run
from test_run import RUN_FILES

from minitrain.course.fixtures import write_tiny_run
from minitrain.hub.export_hf import EXPORT_FILES, export_model

pytestmark = pytest.mark.slow

TOKEN = "hf_trainPublishToken4Qz"
REPO = "alice/minigpt-from-yaml"
PUBLISH = f"publish: {{repo: {REPO}}}\n"


@pytest.fixture(autouse=True)
def models_kept_in_tmp(tmp_path, monkeypatch):
    monkeypatch.delenv("MINITRAIN_MODELS_DIR", raising=False)


def train(config, tmp_path, capsys, *flags: str) -> tuple[int, str, str]:
    return run(["train", config, "--out-dir", tmp_path / "run", "--quiet", *flags], capsys)


def test_a_successful_run_is_published(tmp_path, monkeypatch, capsys):
    config = write_tiny_run(tmp_path, PUBLISH)
    with serving(monkeypatch, tmp_path / "hf", TOKEN, {TOKEN: "alice"}) as hub:
        code, out, err = train(config, tmp_path, capsys)
    assert code == 0, err
    assert "warning" not in err and "error" not in err  # a token is set: no warning (stderr has the upload bar)
    assert f"Publishing to {REPO}" in out and f"Published: {hub.url}/{REPO}" in out
    # What was uploaded is the export of the finished run folder, byte for byte.
    export_model(tmp_path / "run", tmp_path / "local", repo_id=REPO)
    assert sorted(hub.repos[REPO].files) == sorted(EXPORT_FILES)
    for name in EXPORT_FILES:
        assert hub.repos[REPO].files[name] == (tmp_path / "local" / name).read_bytes(), name
    for path in (tmp_path / "run").rglob("*"):
        assert not path.is_file() or TOKEN.encode() not in path.read_bytes(), path


def test_a_diverged_run_uploads_nothing(tmp_path, monkeypatch, capsys):
    config = write_tiny_run(tmp_path, PUBLISH)
    absurd = ["optimizer.lr_max=1.0e+30", "optimizer.clip=null", "scheduler.warmup_steps=0", "optimizer.lr_min=0.0"]
    with serving(monkeypatch, tmp_path / "hf", TOKEN, {TOKEN: "alice"}) as hub:
        code, out, err = train(config, tmp_path, capsys, *[a for s in absurd for a in ("--set", s)])
    assert code == 3 and err.startswith("error: training diverged")
    assert "Publishing" not in out
    assert hub.requests == [] and hub.repos == {}
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["status"] == "diverged"


def test_no_token_keeps_the_run_folder_complete_and_uploads_nothing(tmp_path, monkeypatch, capsys):
    config = write_tiny_run(tmp_path, PUBLISH, plots=True)  # the complete folder, plots included
    with serving(monkeypatch, tmp_path / "hf", None, {TOKEN: "alice"}) as hub:
        code, _, err = train(config, tmp_path, capsys)
    assert code == 1 and "Traceback" not in err
    warning, error = err.strip().splitlines()
    assert warning.startswith(f"warning: publish to {REPO}: no Hugging Face token found") and "goes ahead" in warning
    assert error.startswith(f"error: publish to {REPO}: no Hugging Face token found")
    assert f"run folder {tmp_path / 'run'} is complete" in error
    assert f"publish it later with: minitrain publish --repo {REPO} {tmp_path / 'run'}" in error
    assert hub.requests == [] and hub.repos == {}
    for name in RUN_FILES:
        assert (tmp_path / "run" / name).is_file(), name
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["status"] == "completed" and Path(results["model_path"]).is_file()


def test_the_later_publish_command_keeps_the_sections_settings(tmp_path, monkeypatch, capsys):
    config = write_tiny_run(tmp_path, f"publish: {{repo: {REPO}, private: true, model_card: false}}\n")
    with serving(monkeypatch, tmp_path / "hf", None, {TOKEN: "alice"}):
        code, _, err = train(config, tmp_path, capsys)
    assert code == 1 and "Traceback" not in err
    assert f"later with: minitrain publish --repo {REPO} --private --no-model-card {tmp_path / 'run'}" in err
    assert "model_card: false" in (tmp_path / "run" / "config.resolved.yaml").read_text()


def test_the_dry_run_names_the_repo_and_publishes_nothing(tmp_path, monkeypatch, capsys):
    config = write_tiny_run(tmp_path, PUBLISH)
    with serving(monkeypatch, tmp_path / "hf", TOKEN, {TOKEN: "alice"}) as hub:
        code, out, _ = train(config, tmp_path, capsys, "--dry-run")
    assert code == 0 and f"publish_to: {REPO}" in out
    assert hub.requests == [] and not (tmp_path / "run").exists()
