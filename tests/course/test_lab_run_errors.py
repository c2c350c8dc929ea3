"""A student's unfinished or broken lab file in a real run (minitrain/seam.py, cli.py, training/stopping.py,
runs/run_dir.py): one `error:` line naming the file, function and line, never a traceback; the run folder is
marked failed; and once the file is fixed, the next run into that folder needs no --overwrite."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minitrain import seam
from minitrain.common.errors import UserError
from minitrain.course.labs import start
from minitrain.runs.run_dir import check_new_run

REPO = Path(__file__).resolve().parents[2]
CHECKPOINT = "minitrain/checkpoint.py"
# lab 01's config cut to 30 steps, a checkpoint every 10: the starter's save_checkpoint is reached at step 10
SHORT = ["--set", "scheduler.total_steps=30", "--set", "scheduler.warmup_steps=5", "--set",
         "training.checkpoint.save_every=10", "--quiet"]


def train(workspace: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, seam.LAB_DIR_VARIABLE: str(workspace)}
    return subprocess.run([sys.executable, "-m", "minitrain.cli", "train", "experiments/18-train-mini/config.yaml",
                           "--out-dir", str(out), "--models-dir", str(out / "models"), *SHORT], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def test_a_todo_stub_in_a_run_is_one_error_line_and_the_fixed_file_trains_into_the_same_folder(tmp_path):
    ws = tmp_path / "ws"
    start("02", ws)
    stub = (ws / CHECKPOINT).read_text(encoding="utf-8").splitlines()
    line = stub.index('    raise NotImplementedError("TODO lab 02: write save_checkpoint")') + 1
    done = train(ws, ws / "run")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (f"error: NotImplementedError in save_checkpoint ({ws / CHECKPOINT}, line "
                                            f"{line}): TODO lab 02: write save_checkpoint")
    manifest = json.loads((ws / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "failed" and manifest["failed_in_lab_file"] is True
    assert manifest["error"] == done.stderr.splitlines()[-1][len("error: "):]

    shutil.copy(REPO / CHECKPOINT, ws / CHECKPOINT)  # the student writes it; the same folder, no --overwrite
    again = train(ws, ws / "run")
    assert again.returncode == 0, again.stderr
    manifest = json.loads((ws / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "completed" and "failed_in_lab_file" not in manifest
    assert manifest["lab_files"]["files"] == [CHECKPOINT]


def raise_from(folder: Path, relative: str, monkeypatch) -> BaseException:
    """An exception raised by a function in the file `folder/relative`, with MINITRAIN_LAB_DIR=folder."""
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("def save_checkpoint():\n    raise KeyError('step')\n", encoding="utf-8")
    monkeypatch.setenv(seam.LAB_DIR_VARIABLE, str(folder))
    spec = importlib.util.spec_from_file_location(f"_lab_file_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(KeyError) as caught:
        module.save_checkpoint()
    return caught.value


def test_the_error_line_names_a_lab_file_and_nothing_else(tmp_path, monkeypatch):
    error = raise_from(tmp_path, CHECKPOINT, monkeypatch)
    assert seam.lab_error_line(error) == (f"KeyError in save_checkpoint ({tmp_path / CHECKPOINT}, line 2): 'step'")
    other = raise_from(tmp_path, "minitrain/elsewhere.py", monkeypatch)  # in the workspace, but no lab's file
    assert seam.lab_error_line(other) is None
    monkeypatch.delenv(seam.LAB_DIR_VARIABLE)
    assert seam.lab_error_line(error) is None  # without a workspace, a traceback's file is the library's


@pytest.mark.parametrize(("manifest", "refused"), [
    ({"status": "failed", "failed_in_lab_file": True}, False),
    ({"status": "failed", "error": "ValueError: a bug"}, True),  # not the student's file: the run stays
    ({"status": "completed", "failed_in_lab_file": True}, True),
    ({"status": "running"}, True),
])
def test_only_a_run_that_failed_in_a_lab_file_is_replaced_without_overwrite(manifest, refused, tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (tmp_path / "train_log.jsonl").write_text("", encoding="utf-8")
    if refused:
        with pytest.raises(UserError, match="holds another run"):
            check_new_run(tmp_path, None, overwrite=False)
    else:
        check_new_run(tmp_path, None, overwrite=False)
