"""The course seam (minitrain/seam.py): with MINITRAIN_LAB_DIR set, a workspace's lab files stand in for the
library's, the rest of minitrain runs on them, and the run's manifest says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minitrain import seam
from minitrain.course.fixtures import write_tiny_run

REPO = Path(__file__).resolve().parents[1]


def python(code: str, lab_dir: Path | str | None, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != seam.LAB_DIR_VARIABLE}
    if lab_dir is not None:
        env[seam.LAB_DIR_VARIABLE] = str(lab_dir)
    return subprocess.run([sys.executable, *(["-c", code] if code else []), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def counting_loop(workspace: Path) -> Path:
    """A workspace whose loop.py is the library's, plus a line that counts train_step calls in a file."""
    target = workspace / "minitrain" / "loop.py"
    target.parent.mkdir(parents=True)
    source = (REPO / "minitrain" / "loop.py").read_text(encoding="utf-8")
    marker = '    optimizer.zero_grad()\n'
    assert marker in source
    count = workspace / "calls.txt"
    target.write_text(source.replace(marker, f"    open({str(count)!r}, 'a').write('x')\n" + marker, 1),
                      encoding="utf-8")
    return count


def test_the_workspace_file_is_the_module_and_others_come_from_the_library(tmp_path):
    counting_loop(tmp_path)
    code = ("import minitrain.loop, minitrain.training.engine, minitrain.checkpoint\nfrom minitrain import seam\n"
            "print(minitrain.loop.__file__); print(minitrain.training.engine.train_step.__module__, "
            "minitrain.training.engine.train_step.__code__.co_filename); print(minitrain.checkpoint.__file__); "
            "print(seam.replaced())")
    done = python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    loop_file, step, checkpoint_file, replaced = done.stdout.splitlines()
    assert loop_file == str(tmp_path / "minitrain" / "loop.py")
    assert step == f"minitrain.loop {tmp_path / 'minitrain' / 'loop.py'}"  # the engine calls the student's step
    assert checkpoint_file == str(REPO / "minitrain" / "checkpoint.py")  # not in the workspace: the library's
    assert replaced == "['minitrain/loop.py']"
    plain = python("import minitrain.loop; print(minitrain.loop.__file__)", None)
    assert plain.stdout.strip() == str(REPO / "minitrain" / "loop.py")


def test_a_run_trains_with_the_workspace_and_records_it(tmp_path):
    config = write_tiny_run(tmp_path)
    count = counting_loop(tmp_path / "ws")
    done = python("", tmp_path / "ws", "-m", "minitrain.cli", "train", str(config), "--out-dir",
                  str(tmp_path / "run"), "--models-dir", str(tmp_path / "models"), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"training with your lab files from {tmp_path / 'ws'}: minitrain/loop.py" in done.stderr
    assert count.read_text() == "x" * 24  # one train_step per step of the tiny 24-step run
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["lab_files"] == {"lab_dir": str(tmp_path / "ws"), "files": ["minitrain/loop.py"],
                                     "sha256": seam.file_digests(tmp_path / "ws", ["minitrain/loop.py"])}
    assert manifest["status"] == "completed"


def test_a_lab_dir_that_does_not_exist_is_one_error_line(tmp_path):
    config = write_tiny_run(tmp_path)
    done = python("", tmp_path / "nowhere", "-m", "minitrain.cli", "train", str(config), "--quiet", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (f"error: MINITRAIN_LAB_DIR={tmp_path / 'nowhere'}: no such folder (a workspace is made "
                           "by `minitrain lab start NN DIR`)\n")


@pytest.mark.parametrize(("path", "name"), [("minitrain/loop.py", "minitrain.loop"),
                                            ("minitrain/data/batcher.py", "minitrain.data.batcher"),
                                            ("scripts/train_mini.py", None)])
def test_module_names(path, name):
    assert seam.module_name(path) == name
