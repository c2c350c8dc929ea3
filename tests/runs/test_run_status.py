"""The manifest says what really happened: a signal while the run is finished, a full models folder, a run
folder that stops taking writes. `minitrain info` agrees with it."""

from __future__ import annotations

import json
import os
import shutil
import signal

import pytest
from test_run import train_tiny, write_tiny_run

import minitrain.training.artifacts
import minitrain.training.engine
import minitrain.training.run
import minitrain.training.scoring
from minitrain.cli import main
from minitrain.common.errors import UserError

pytestmark = pytest.mark.slow


def manifest_of(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


def info(run_dir, capsys) -> str:
    assert main(["info", str(run_dir)]) == 0
    return capsys.readouterr().out


def test_sigterm_while_the_run_is_finished_is_recorded_and_resumable(tmp_path, monkeypatch, capsys):
    config = write_tiny_run(tmp_path)
    seen = []

    def sigterm(model, tokenizer, records):  # during the final evaluation, after the last checkpoint
        seen.append(manifest_of(tmp_path / "run")["status"])
        os.kill(os.getpid(), signal.SIGTERM)
        return 0.5

    monkeypatch.setattr(minitrain.training.scoring, "exact_match", sigterm)
    with pytest.raises(UserError) as stopped:
        train_tiny(config, tmp_path / "run")
    final = tmp_path / "run" / "checkpoints" / "step-24.safetensors"
    assert seen == ["finishing"]  # training was done, the run was not
    assert stopped.value.exit_code == 143
    assert str(stopped.value).startswith(f"SIGTERM: interrupted after 24 steps; checkpoint {final}; resume with: ")
    manifest = manifest_of(tmp_path / "run")
    assert manifest["status"] == "interrupted" and manifest["signal"] == "SIGTERM"
    assert not (tmp_path / "run" / "results.json").exists()
    assert "status: interrupted" in info(tmp_path / "run", capsys)

    monkeypatch.undo()
    train_tiny(config, tmp_path / "run", resume=final)
    manifest = manifest_of(tmp_path / "run")
    assert manifest["status"] == "completed" and "signal" not in manifest


def test_a_full_models_folder_fails_the_run_honestly(tmp_path, monkeypatch, capsys):
    config = write_tiny_run(tmp_path)

    def disk_full(path, *args, **keys):
        raise UserError(f"{path}: cannot write (No space left on device)")

    monkeypatch.setattr(minitrain.training.run, "save_model_file", disk_full)
    with pytest.raises(UserError) as failed:
        train_tiny(config, tmp_path / "run")
    final = tmp_path / "run" / "checkpoints" / "step-24.safetensors"
    assert failed.value.exit_code == 1
    assert str(failed.value).endswith(f"cannot write (No space left on device); the last checkpoint is {final}")
    manifest = manifest_of(tmp_path / "run")
    assert manifest["status"] == "failed" and "No space left on device" in manifest["error"]
    assert not (tmp_path / "run" / "results.json").exists()
    shown = info(tmp_path / "run", capsys)
    assert "status: failed" in shown and "error: " in shown and "warning" not in shown

    monkeypatch.undo()
    train_tiny(config, tmp_path / "run", resume=tmp_path / "run")
    assert manifest_of(tmp_path / "run")["status"] == "completed" and "error" not in manifest_of(tmp_path / "run")


def test_a_run_folder_that_stops_taking_writes_mid_run(tmp_path, monkeypatch, capsys):
    config = write_tiny_run(tmp_path)
    appended = []
    real_append = minitrain.training.engine.append_line

    def read_only_after_ten(path, line):
        appended.append(line)
        if len(appended) > 10:  # the 11th row is step 12's: checkpoints up to step-12 were saved
            raise UserError(f"{path}: cannot write (Read-only file system)")
        real_append(path, line)

    monkeypatch.setattr(minitrain.training.engine, "append_line", read_only_after_ten)
    with pytest.raises(UserError) as failed:
        train_tiny(config, tmp_path / "run")
    assert failed.value.exit_code == 1 and "Read-only file system" in str(failed.value)
    manifest = manifest_of(tmp_path / "run")
    assert manifest["status"] == "failed"
    assert manifest["checkpoint"] == str(tmp_path / "run" / "checkpoints" / "step-12.safetensors")

    # Worse: the manifest cannot be rewritten either. It still says "running", the error says so, and info,
    # seeing no process write the folder, does not believe it.
    appended.clear()
    real_write = minitrain.training.artifacts.write_manifest

    def first_write_only(path, manifest):
        if manifest["status"] != "running":
            raise UserError(f"{path}: cannot write (Read-only file system)")
        real_write(path, manifest)

    monkeypatch.setattr(minitrain.training.artifacts, "write_manifest", first_write_only)
    with pytest.raises(UserError) as failed:
        train_tiny(config, tmp_path / "again")
    assert f"{tmp_path / 'again' / 'manifest.json'} could not record the failure either" in str(failed.value)
    assert manifest_of(tmp_path / "again")["status"] == "running"
    assert "warning: the manifest says 'running', but no process is writing this run" in info(tmp_path / "again",
                                                                                             capsys)


def test_info_on_a_run_killed_before_its_first_checkpoint_offers_no_resume_and_no_grade(tmp_path, capsys):
    config = write_tiny_run(tmp_path)
    run = tmp_path / "run"
    train_tiny(config, run)
    # What `kill -9` before the first checkpoint leaves: the log so far and a manifest that still says running.
    manifest = manifest_of(run)
    manifest["status"] = "running"
    manifest.pop("checkpoint", None)
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    shutil.rmtree(run / "checkpoints")
    (run / "results.json").unlink()
    out = info(run, capsys)
    assert "--resume" not in out and "it stopped before its first checkpoint: nothing to resume" in out, out
    assert "quality: not graded: the run did not finish" in out and "/ 100, grade" not in out, out
