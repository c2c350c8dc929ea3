"""A run-folder item grades the run only when it trained with the lab files as they are now: a run records the
sha256 of each lab file it took from the workspace (training/artifacts.py, seam.file_digests), and the checker
compares them with the files on disk (course/runs.py check_manifest)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minitrain import seam
from minitrain.course.checks import Failed
from minitrain.course.labs import LABS, LabUnderTest
from minitrain.course.runs import check_manifest

REPO = Path(__file__).resolve().parents[2]
STOPPING = "minitrain/monitor/early_stopping.py"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A workspace holding the library's early_stopping.py and a 12-step run trained with it."""
    ws = tmp_path_factory.mktemp("fresh") / "ws"
    (ws / STOPPING).parent.mkdir(parents=True)
    shutil.copy(REPO / STOPPING, ws / STOPPING)
    env = {**os.environ, seam.LAB_DIR_VARIABLE: str(ws)}
    done = subprocess.run([sys.executable, "-m", "minitrain.cli", "train", "experiments/18-train-mini/config.yaml",
                           "--out-dir", str(ws / "run"), "--models-dir", str(ws / "run" / "models"), "--quiet",
                           "--set", "scheduler.total_steps=12", "--set", "scheduler.warmup_steps=2",
                           "--set", "training.val_every=6"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return ws


def subject(ws: Path, run: Path | None = None) -> LabUnderTest:
    return LabUnderTest(LABS["04"], ws, run or ws / "run", shown="labs/04")


def test_a_run_records_the_digest_of_each_lab_file_it_trained_with(trained):
    lab_files = json.loads((trained / "run" / "manifest.json").read_text())["lab_files"]
    assert lab_files["files"] == [STOPPING]
    assert lab_files["sha256"] == seam.file_digests(trained, [STOPPING])
    assert len(lab_files["sha256"][STOPPING]) == 64
    check_manifest(subject(trained), files=(STOPPING,))  # the files as they are now: the item may pass


def test_a_lab_file_edited_after_the_run_fails_the_run_folder_item_and_says_to_train_again(trained, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(trained, ws)
    with (ws / STOPPING).open("a", encoding="utf-8") as file:
        file.write("# broken again after the run\n")
    with pytest.raises(Failed, match=r"trained with an earlier minitrain/monitor/early_stopping\.py.*train again: "
                                     r"MINITRAIN_LAB_DIR=labs/04 "):
        check_manifest(subject(ws), files=(STOPPING,))


def test_a_run_that_recorded_no_digest_is_not_taken_for_the_files_on_disk(trained, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(trained, ws)
    manifest = json.loads((ws / "run" / "manifest.json").read_text())
    del manifest["lab_files"]["sha256"]  # a run made before runs recorded them
    (ws / "run" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(Failed, match="trained with an earlier"):
        check_manifest(subject(ws), files=(STOPPING,))
