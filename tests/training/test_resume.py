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

import pytest
from test_damage import hang_guard
from test_run import train_tiny

from minitrain.common.errors import UserError
from minitrain.course.fixtures import write_tiny_run
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.model_files import load_model_file

pytestmark = [pytest.mark.lab02, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "train_mini.py"
# Not hashed, so a resume may drop them: the halt alert that stops a run at a chosen step.
SHORT = ["model.dropout=0.1", "training.log_every=1", "training.checkpoint.save_every=5"]
# A longer run that checkpoints after every step: every step boundary is a save to stop the run in.
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
    with pytest.raises(UserError, match=f"halted after {k} steps"):
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


# The child stops itself (SIGSTOP) at one chosen moment of its writes, so the test signals it exactly there, however
# busy the machine. Every file a run writes lands by os.replace (common/io.atomic_write): MINITRAIN_TEST_STOP names
# the file about to land (for `latest`, also the checkpoint it is to name). The child stops with the new file
# complete and synced beside the old one, before the rename. Test code only: the run itself has no such hook.
STOPPER = """
import os, runpy, signal, sys
target, _, names = os.environ.get("MINITRAIN_TEST_STOP", "").partition("=")
real_replace = os.replace

def replace(src, dst, *args, **kwargs):
    if os.path.basename(dst) == target and (not names or open(src).read().strip() == names):
        os.kill(os.getpid(), signal.SIGSTOP)
    return real_replace(src, dst, *args, **kwargs)

os.replace = replace
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def script(root: Path, run_dir: Path, *extra: str, stop: str = "") -> subprocess.Popen:
    """scripts/train_mini.py on the LONG config, in the background, as a student would start it; with `stop`
    ("step-8.safetensors", "latest=step-15.safetensors"), it stops itself when that file is about to land."""
    env = {**os.environ, "MINITRAIN_MODELS_DIR": str(root / "models"), "MINITRAIN_TEST_STOP": stop}
    sets = [arg for s in LONG for arg in ("--set", s)]
    command = [sys.executable, "-c", STOPPER, str(SCRIPT), "--config", str(root / "config.yaml"), "--out-dir",
               str(run_dir), "--quiet", *sets, *extra]  # fmt: skip
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group: what it starts can be found


def wait_until_stopped(process: subprocess.Popen) -> None:
    """Wait until the child has stopped itself at its chosen write (a process that exits instead fails the test)."""
    with hang_guard(600, "waiting for the child to reach its chosen write"):
        _, status = os.waitpid(process.pid, os.WUNTRACED)
    if not os.WIFSTOPPED(status):
        raise AssertionError(f"the run ended (status {status}) before the chosen write: {process.stderr.read()}")


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


def checkpoint_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != "latest")


def test_sigkill_at_chosen_moments_of_a_save_then_resume_gives_the_same_weights(tiny):
    """kill -9 with the new checkpoint written but not yet renamed, then with it renamed but not yet named by
    `latest`: each time `latest` still names the previous, complete checkpoint, and the resumed run ends
    byte-identical to the run that never stopped."""
    root = tiny["root"]
    run_dir, folder = root / "killed", root / "killed" / "checkpoints"
    moments = [  # (stop before this file lands, what `latest` names after the kill, the files then)
        ("step-8.safetensors", "step-7", ["step-6.safetensors", "step-7.safetensors"]),
        ("latest=step-15.safetensors", "step-14",
         ["step-13.safetensors", "step-14.safetensors", "step-15.safetensors"]),  # the .step-8 temp file pruned
    ]
    for kill, (stop, latest, files) in enumerate(moments):
        process = script(root, run_dir, *(["--resume", str(run_dir)] if kill else []), stop=stop)
        wait_until_stopped(process)
        process.kill()
        process.communicate()
        with pytest.raises(ProcessLookupError):  # no process the run started outlives it
            os.killpg(process.pid, 0)
        temp = [name for name in checkpoint_files(folder) if name.endswith(".tmp")]
        assert [name for name in checkpoint_files(folder) if not name.endswith(".tmp")] == files
        # the kill before the rename left the complete new file under its temporary name, nothing else
        assert [name.rsplit(".", 2)[0] for name in temp] == ([".step-8.safetensors"] if kill == 0 else [".latest"])
        _, _, meta = load_model_file(CheckpointManager(run_dir).latest())
        assert meta["kind"] == "checkpoint" and f"step-{meta['step']}" == latest

    finished = script(root, run_dir, "--resume", str(run_dir))
    _, stderr = finished.communicate(timeout=600)
    assert finished.returncode == 0, stderr
    assert log_bytes(run_dir) == log_bytes(root / "long")
    results = json.loads((run_dir / "results.json").read_text())
    assert results["model_path"] == tiny["long"]["model_path"]
    assert [s for s, _ in CheckpointManager(run_dir).step_files()] == [39, 40]  # keep_last 2, temp files gone
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_a_save_stops_cleanly_and_resumes_exactly(tiny, signum):
    """The signal arrives while step-12.safetensors is being written: that save completes, and the loop stops
    at the next step boundary, saves step-13.safetensors and says to resume from it."""
    root = tiny["root"]
    run_dir = root / f"signal-{signum.name}"
    process = script(root, run_dir, stop="step-12.safetensors")
    wait_until_stopped(process)
    process.send_signal(signum)
    process.send_signal(signal.SIGCONT)
    _, stderr = process.communicate(timeout=600)

    assert process.returncode == 128 + signum.value, stderr
    assert "Traceback" not in stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["steps_done"] == 13
    checkpoint = Path(stderr.split("--resume ")[-1].strip())
    assert checkpoint == CheckpointManager(run_dir).latest() == run_dir / "checkpoints" / "step-13.safetensors"
    assert checkpoint_files(run_dir / "checkpoints") == ["step-12.safetensors", "step-13.safetensors"]
    _, _, meta = load_model_file(checkpoint)
    assert meta["step"] == 13
    assert log_bytes(run_dir).decode().splitlines() == rows_before(root / "long", 13)

    resumed = script(root, run_dir, "--resume", str(checkpoint))
    _, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr
    assert log_bytes(run_dir) == log_bytes(root / "long")
    assert json.loads((run_dir / "results.json").read_text())["model_path"] == tiny["long"]["model_path"]
