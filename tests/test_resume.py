"""Resume end to end: a run that really stopped (halted, killed with SIGKILL, interrupted by SIGINT/SIGTERM)
and was resumed ends byte-identical to a run that never stopped: same train_log.jsonl bytes, same final weights.

Dropout is on in every run here, so the training RNG is part of what must come back; the split points cover
the warm-up, mid-epoch and an epoch boundary (40 records / batch 4 = 10 steps per epoch, warm-up 6 steps).
test_run.py resumes from checkpoints of a finished run; these tests stop runs for real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_run import train_tiny

from minitrain.common.errors import UserError
from minitrain.course.fixtures import write_tiny_run
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.model_files import load_model_file

pytestmark = [pytest.mark.lab02, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "train_mini.py"
# Not hashed, so a resume may drop them: the halt alert that stops a run at a chosen step.
SHORT = ["model.dropout=0.1", "training.log_every=1", "training.checkpoint.save_every=5"]
# A longer run that checkpoints after every step, so kills and signals often land during a save.
LONG = ["model.dropout=0.1", "training.log_every=1", "scheduler.total_steps=40",
        "training.checkpoint.save_every=1", "training.checkpoint.keep_last=2"]  # fmt: skip


def log_bytes(run_dir: Path) -> bytes:
    return (run_dir / "train_log.jsonl").read_bytes()


def rows_before(run_dir: Path, step: int) -> list[str]:
    return [line for line in log_bytes(run_dir).decode().splitlines() if json.loads(line)["step"] < step]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    """The tiny corpus and config, and the uninterrupted SHORT and LONG runs to compare against."""
    root = tmp_path_factory.mktemp("resume")
    config = write_tiny_run(root)
    short = train_tiny(config, root / "short", SHORT)
    long = train_tiny(config, root / "long", LONG)
    return {"root": root, "config": config, "short": short, "long": long}


# 3: inside the warm-up; 8: mid-epoch; 10: at the epoch boundary; 13: mid-way through the second epoch.
@pytest.mark.parametrize("k", [3, 8, 10, 13])
def test_a_run_stopped_after_k_steps_resumes_bit_exactly(tiny, k):
    root, config = tiny["root"], tiny["config"]
    run_dir = root / f"split-{k}"
    with pytest.raises(UserError, match=f"halted after step {k - 1}"):
        train_tiny(config, run_dir, [*SHORT, f"monitoring.alerts=['step >= {k - 1}: halt']"])
    assert CheckpointManager(run_dir).latest().name == f"step-{k}.safetensors"
    assert rows_before(run_dir, k) == rows_before(root / "short", k)

    resumed = train_tiny(config, run_dir, SHORT, resume=run_dir)
    assert log_bytes(run_dir) == log_bytes(root / "short")  # the rows after step k too
    assert resumed["model_path"] == tiny["short"]["model_path"]  # named by content hash: identical bytes
    assert resumed["val_ppl"] == tiny["short"]["val_ppl"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["resumes"] == [{"checkpoint": str(run_dir / "checkpoints" / f"step-{k}.safetensors"), "step": k}]
    assert manifest["status"] == "completed"


def script(root: Path, run_dir: Path, *extra: str) -> subprocess.Popen:
    """scripts/train_mini.py on the LONG config, in the background, as a student would start it."""
    env = {**os.environ, "MINITRAIN_MODELS_DIR": str(root / "models")}
    sets = [arg for s in LONG for arg in ("--set", s)]
    command = [sys.executable, str(SCRIPT), "--config", str(root / "config.yaml"), "--out-dir", str(run_dir),
               "--quiet", *sets, *extra]  # fmt: skip
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_new_checkpoint(process: subprocess.Popen, folder: Path, old: str | None) -> None:
    """Wait until `process` has saved a checkpoint of its own (`latest` moved on from `old`)."""
    pointer = folder / "latest"
    deadline = time.monotonic() + 600  # a hang guard: a busy machine only makes the wait longer
    while time.monotonic() < deadline and process.poll() is None:
        if pointer.is_file() and pointer.read_text() not in ("", old):
            return
        time.sleep(0.002)
    stderr = process.stderr.read() if process.poll() is not None else ""
    raise AssertionError(f"no new checkpoint (exit {process.poll()}): {stderr}")


def wait_for_a_write(folder: Path) -> None:
    """Spin until a checkpoint is being written (its temp file exists): what comes next lands mid-save."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with os.scandir(folder) as entries:
            if any(e.name.startswith(".step-") for e in entries):
                return


def pointer_text(folder: Path) -> str | None:
    return (folder / "latest").read_text() if (folder / "latest").is_file() else None


def test_sigkill_at_random_moments_then_resume_gives_the_same_weights(tiny):
    root = tiny["root"]
    run_dir, folder = root / "killed", root / "killed" / "checkpoints"
    rng = np.random.default_rng(2024)
    steps, mid_save = [], 0
    for kill in range(6):
        old = pointer_text(folder)
        process = script(root, run_dir, *(["--resume", str(run_dir)] if kill else []))
        wait_for_new_checkpoint(process, folder, old)
        if kill % 2:
            wait_for_a_write(folder)
        else:
            time.sleep(rng.uniform(0.0, 0.1))
        assert process.poll() is None, "the run finished before it could be killed; make LONG longer"
        process.kill()
        process.communicate()
        mid_save += any(p.name.startswith(".step-") for p in folder.iterdir())
        # Whatever the moment, `latest` names a complete, checksummed checkpoint at or after the last one.
        _, _, meta = load_model_file(CheckpointManager(run_dir).latest())
        assert meta["kind"] == "checkpoint" and meta["step"] >= (steps[-1] if steps else 1)
        steps.append(meta["step"])

    finished = script(root, run_dir, "--resume", str(run_dir))
    _, stderr = finished.communicate(timeout=120)
    assert finished.returncode == 0, stderr
    print(f"checkpoint steps after the kills: {steps}; {mid_save} kills landed during a save")
    assert mid_save >= 1, "no kill landed during a checkpoint write"
    assert steps[-1] < 40 and len(set(steps)) > 1, steps
    assert log_bytes(run_dir) == log_bytes(root / "long")
    results = json.loads((run_dir / "results.json").read_text())
    assert results["model_path"] == tiny["long"]["model_path"]
    assert [s for s, _ in CheckpointManager(run_dir).step_files()] == [39, 40]  # keep_last 2, temp files gone
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_a_save_stops_cleanly_and_resumes_exactly(tiny, signum):
    root = tiny["root"]
    run_dir, folder = root / f"signal-{signum.name}", root / f"signal-{signum.name}" / "checkpoints"
    process = script(root, run_dir)
    wait_for_new_checkpoint(process, folder, None)
    wait_for_a_write(folder)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)

    assert process.returncode == 128 + signum.value, stderr
    assert "Traceback" not in stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and 0 < manifest["steps_done"] < 40
    # The save under way finished, then the loop stopped at the next step boundary and saved that state.
    checkpoint = Path(stderr.split("--resume ")[-1].strip())
    assert checkpoint == CheckpointManager(run_dir).latest()
    assert checkpoint.name == f"step-{manifest['steps_done']}.safetensors"
    _, _, meta = load_model_file(checkpoint)
    assert meta["step"] == manifest["steps_done"]
    assert log_bytes(run_dir).decode().splitlines() == rows_before(root / "long", manifest["steps_done"])

    resumed = script(root, run_dir, "--resume", str(checkpoint))
    _, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stderr
    assert log_bytes(run_dir) == log_bytes(root / "long")
    assert json.loads((run_dir / "results.json").read_text())["model_path"] == tiny["long"]["model_path"]
