"""What a run folder holds: the files a run writes, clearing them (--overwrite), and the temporary files a
`kill -9` leaves, which the next run start removes."""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_run import train_tiny, write_tiny_run

from minitrain.common.errors import UserError
from minitrain.runs.run_dir import clear_run, remove_stale_temp_files, run_files_in


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_stale_temp_files_of_our_naming_are_removed_and_nothing_else(tmp_path):
    run, models = tmp_path / "run", tmp_path / "models"
    (run / "checkpoints").mkdir(parents=True)
    models.mkdir()
    gone = dead_pid()
    stale = [run / ".manifest.json.a1b2c3d4.tmp", run / ".report.md.zz_9yy8x.tmp",
             run / "checkpoints" / ".step-4.safetensors.abcdefgh.tmp",
             models / f".minigpt-phase18-{gone}.partial.safetensors",
             models / f"..minigpt-phase18-{gone}.partial.safetensors.q1w2e3r4.tmp"]
    kept = [run / ".notes.txt.a1b2c3d4.tmp",  # not a file a run writes
            run / "manifest.json",
            models / ".minigpt-phase18-1.partial.safetensors",  # PID 1 is alive: a run in progress
            models / "minigpt-phase18-0123456789abcdef.safetensors"]
    for path in stale + kept:
        path.write_bytes(b"x")
    assert sorted(remove_stale_temp_files(run, models, "minigpt-phase18")) == sorted(stale)
    assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)


@pytest.mark.slow
def test_a_run_start_removes_what_a_killed_run_left(tmp_path):
    config = write_tiny_run(tmp_path)
    (tmp_path / "run").mkdir()
    (tmp_path / "models").mkdir()
    left = [tmp_path / "run" / ".report.md.k1ll3d00.tmp",
            tmp_path / "models" / f".minigpt-phase18-{dead_pid()}.partial.safetensors"]
    for path in left:
        path.write_bytes(b"half a file")
    train_tiny(config, tmp_path / "run")
    assert not any(p.exists() for p in left)


def test_clear_run_deletes_the_run_files_only(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    for name in ("manifest.json", "results.json", "train_log.jsonl", "report.md", "config.yaml", "README.md",
                 "checkpoints/step-4.safetensors", "checkpoints/latest"):
        (run / name).write_text("x")
    assert run_files_in(run, "x") == ["manifest.json", "train_log.jsonl", "results.json", "report.md",
                                      "checkpoints/latest", "checkpoints/step-4.safetensors"]
    assert run_files_in(run, "another config")[-1] == "config.yaml"
    clear_run(run)
    assert sorted(p.name for p in run.iterdir()) == ["README.md", "config.yaml"]

    (run / "results.json").mkdir()
    with pytest.raises(UserError, match=r"results\.json: a folder where a run keeps a file"):
        clear_run(run)
