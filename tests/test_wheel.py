"""`pip install minitrain` is the whole product: a wheel built from this checkout, installed into a fresh venv and
used from an empty folder, runs the course (labs 00 and 01: start; check the workspaces' TODO stubs, and the
library against its packaged reference run), lab 01's training run (what `make train` runs, cut to 120 steps, just
past its 100-step warm-up), `init`, `validate`, `eval`, `sample`, `export` and `publish --dry-run`, with no file of
the checkout in reach.

The wheel is built from a copy of the tracked files with uv (`uv build`: an sdist, then the wheel from it) or
else pip; the venv has no packages of its own but sees the running interpreter's site-packages through a .pth
file, so the dependencies are the ones already installed and nothing is downloaded beyond the build backend
(setuptools, from the package index or uv's cache). The child processes get no PYTHONPATH: they import minitrain
from the wheel alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def tracked_copy(dest: Path) -> Path:
    """The checkout's tracked files, copied (links as links): a build writes build/ and *.egg-info beside its
    sources, and other tests check that nothing writes into the checkout while they run."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in filter(None, names.split("\0")):
        source, target = ROOT / name, dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)
    return dest


def build_wheel(out: Path, source: Path) -> Path:
    uv = shutil.which("uv", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    command = [uv, "build", "-q", "--out-dir", str(out), str(source)] if uv else \
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("minitrain-*.whl")
    return wheel


def fresh_venv(folder: Path, wheel: Path) -> Path:
    """A venv holding only minitrain from `wheel`, the running interpreter's site-packages behind it (the .pth is
    written after installing: pip would take the checkout's editable minitrain there for this one)."""
    venv.EnvBuilder(with_pip=False).create(folder)
    python = folder / "bin" / "python"
    # --ignore-installed: a minitrain on the path (the checkout's, its egg-info) is no reason to skip; none is removed
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    "--ignore-installed", str(wheel)], check=True, capture_output=True, timeout=300)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    theirs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "dependencies.pth").write_text("\n".join(sorted(theirs)) + "\n", encoding="utf-8")
    return folder / "bin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the wheel, the venv's bin/)."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(tmp / "dist", tracked_copy(tmp / "source"))
    return wheel, fresh_venv(tmp / "venv", wheel)


def run(bin_dir: Path, cwd: Path, *args: str, code: int = 0, program: str = "minitrain") -> str:
    """`program ARGS` from the venv, in `cwd`, without PYTHONPATH or MINITRAIN_* settings; its stdout, then its
    stderr."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("MINITRAIN_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", HF_HUB_OFFLINE="1")
    done = subprocess.run([str(bin_dir / program), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == code, f"{program} {' '.join(args)}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def test_the_wheel_holds_the_course_and_no_weights(installed):
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    for name in ("data/processed/train.jsonl", "lab/01-train-mini.md", "scripts/train_mini.py",
                 "experiments/14-ngram-baseline/results.json", "experiments/18-train-mini/manifest.json",
                 "solutions/01-train-mini-ref.md"):
        assert f"minitrain/_course/{name}" in names
    assert not [n for n in names if n.endswith(".safetensors")]
    print(f"\nwheel {wheel.name}: {wheel.stat().st_size:,} bytes, {len(names)} files")


def test_the_installed_wheel_runs_the_course_and_the_commands_from_an_empty_folder(installed, tmp_path):
    _, bin_dir = installed
    here, other = tmp_path / "here", tmp_path / "other"
    here.mkdir(), other.mkdir()
    where = run(bin_dir, here, "-c", "import minitrain; print(minitrain.__file__)", program="python")
    assert where.startswith(str(bin_dir.parent)) and str(ROOT) not in where

    assert "`minitrain lab start 00 labs/00` copies the course's corpus there" in run(bin_dir, here, "init", code=2)
    run(bin_dir, here, "lab", "start", "00", "labs/00")
    assert (here / "data/processed/vocab.json").read_bytes() == (ROOT / "data/processed/vocab.json").read_bytes()
    assert "0 of 11 passed" in run(bin_dir, here, "lab", "check", "00", "labs/00", code=1)  # the TODO stubs
    run(bin_dir, here, "lab", "start", "01", "labs/01")
    assert (here / "labs/01/scripts/train_mini.py").is_file() and (here / "lab/01-train-mini.md").is_file()
    assert "0 of 16 passed" in run(bin_dir, here, "lab", "check", "01", "labs/01", code=1)
    # the library and its packaged reference run, whose model file the wheel leaves out with every weight: the
    # item that scores that file fails, saying so, and every other passes
    library = run(bin_dir, here, "lab", "check", "01", code=1)
    assert "15 of 16 passed" in library and "  ✗ run folder: its model file, scored here on the val split" in library
    assert "no model file found" in library

    run(bin_dir, here, "train", "experiments/18-train-mini/config.yaml", "--out-dir", "runs/lab01", "--models-dir",
        "runs/lab01/models", "--seed", "42", "--set", "scheduler.total_steps=120", "--quiet")
    results = json.loads((here / "runs/lab01/results.json").read_text())
    assert results["ngram_baseline_val_ppl"] == pytest.approx(5.799501)  # the packaged n-gram baseline was found
    run(bin_dir, here, "init", "-o", "config.yaml")
    assert "config is valid" in run(bin_dir, here, "validate", "config.yaml")
    assert "ppl" in run(bin_dir, here, "eval", "runs/lab01", "--data", "data/processed/val.jsonl")
    assert run(bin_dir, here, "sample", "runs/lab01", "--prompt", "caminar|P1|", "--seed", "0").startswith("caminar")
    run(bin_dir, here, "export", "runs/lab01", "export")
    assert "config.json" in run(bin_dir, here, "publish", "runs/lab01", "--repo", "alice/minigpt", "--dry-run")
    # the run folder's paths resolve from another folder (manifest.json's working_dir)
    run(bin_dir, other, "export", str(here / "runs/lab01"), "export")
    assert (other / "export" / "vocab.json").read_bytes() == (here / "export" / "vocab.json").read_bytes()
