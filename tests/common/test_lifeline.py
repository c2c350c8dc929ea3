"""Children die with their parent, however it ends: `kill -9` of `minitrain lab check` mid-run ends the training
run it started (common/lifeline.py), which otherwise trains on as an orphan. (The sweep's workers: test_sweep.py.)"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_sweep import _live, _stopped, _wait_until, needs_proc


@pytest.mark.slow
@needs_proc
def test_kill_9_of_lab_check_ends_the_training_run_it_started():
    """Frozen (SIGSTOP) as it starts, the check's first training run cannot get anywhere while the check is
    killed; let go, it must end without finishing its run (no results.json)."""
    process = subprocess.Popen([sys.executable, "-m", "minitrain.cli", "lab", "check", "02"], start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = None
    try:
        # lab check runs the student's code in a worker process (course/sandbox.py); the checks, in the check's own
        # process, start the training runs (lab.python): a run is the check's child, beside the worker
        _wait_until(lambda: _training_run(process.pid), "lab check's first training run", process)
        child = _training_run(process.pid)
        os.kill(child, signal.SIGSTOP)
        _wait_until(lambda: _stopped(child), "the training run stopped")
        argv = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
        out = Path(argv[argv.index("--out-dir") + 1])
        workers = [pid for pid in _live("ppid", process.pid) if pid != child]
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=120)  # a hang guard
        _wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers), "the worker's end")
        os.kill(child, signal.SIGCONT)  # the check that started it is gone now: it must not train on
        _wait_until(lambda: not Path(f"/proc/{child}").exists(), "the training run's end")
        assert not (out / "results.json").exists()  # it died with the check, not at the end of its run
    finally:  # a failing run leaves no orphans behind either
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        if out is not None and out.parent.name.startswith("minitrain-lab02-"):  # the killed check's scratch
            _wait_until(lambda: not _live("pgrp", process.pid), "the check's processes gone")
            shutil.rmtree(out.parent, ignore_errors=True)


def _training_run(check: int) -> int | None:
    """The first training run among the check's children and grandchildren (one with --out-dir), or None."""
    for pid in [*_live("ppid", check), *(g for c in _live("ppid", check) for g in _live("ppid", c))]:
        with contextlib.suppress(OSError):
            if "--out-dir" in Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0"):
                return pid
    return None
