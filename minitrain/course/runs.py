"""Runs for the checkers: the tiny run a check trains itself, and the run folder whose stop conditions it reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from minitrain import seam
from minitrain.course.checks import Failed
from minitrain.course.fixtures import write_tiny_run
from minitrain.monitor.report import read_log

# What a finished run folder holds (minitrain/training/run.py); checkpoints/ aside.
RUN_FILES = ("manifest.json", "config.yaml", "config.resolved.yaml", "train_log.jsonl", "metrics.csv",
              "results.json", "loss_curve.png", "dashboard.png", "report.md")
_MANIFEST_KEYS = ("seed", "versions", "config", "git_sha", "data_manifest_hash", "hardware", "status",
                  "wall_seconds", "peak_rss_mb")


def tiny_run(lab: Any, *entry: str) -> Path:
    """Train the tiny run of `fixtures.write_tiny_run` with `entry` (`-m minitrain.cli train`, or a script
    taking --config) under the seam; return its run folder, failing with the run's error line if it failed."""
    config = write_tiny_run(lab.scratch(), plots=True)  # a complete run folder, plots included
    out = lab.scratch() / "run"
    train = [*entry, str(config)] if entry[-1] == "train" else [*entry, "--config", str(config)]
    done = lab.python(*train, "--out-dir", str(out), "--quiet")
    if done.returncode != 0:
        raise Failed(f"a 24-step run on a tiny corpus failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    return out


def _train_command(lab: Any) -> str:
    """The command that trains the workspace's run folder, as its README prints it."""
    return lab.lab.train.format(dir=lab.shown) if lab.lab.train and lab.workspace else "the lab's run"


def read_run(lab: Any, name: str) -> Any:
    """A file of the run folder under check: JSON decoded, train_log.jsonl as rows, anything else as bytes."""
    if lab.run_dir is None or not lab.run_dir.is_dir():
        raise Failed(f"no run folder at {lab.run_dir} yet; train first: {_train_command(lab)}")
    path = lab.run_dir / name
    if not path.is_file():
        raise Failed(f"{path} does not exist: the run did not finish, or wrote elsewhere")
    if name.endswith(".jsonl"):
        return read_log(path)
    if name.endswith(".json"):
        return json.loads(path.read_text(encoding="utf-8"))
    return path.read_bytes()


def check_manifest(lab: Any, files: tuple[str, ...], statuses: tuple[str, ...] = ("completed",)) -> dict:
    """The run's manifest, failing unless it is complete, ended with one of `statuses`, and (for a workspace)
    trained with the workspace's `files`."""
    manifest = read_run(lab, "manifest.json")
    # git_sha is None outside a git checkout, data_manifest_hash for data without a corpus manifest beside it.
    missing = [key for key in _MANIFEST_KEYS if key not in manifest or (
        manifest[key] is None and key not in ("git_sha", "data_manifest_hash"))]
    if missing:
        raise Failed(f"manifest.json lacks {missing}")
    if manifest["status"] not in statuses:
        raise Failed(f"manifest.json says status {manifest['status']!r}; expected {' or '.join(statuses)}")
    if lab.workspace is not None:
        used = manifest.get("lab_files", {})
        absent = [f for f in files if f not in used.get("files", [])]
        if absent:
            raise Failed(f"the run did not train with your {', '.join(absent)}: set MINITRAIN_LAB_DIR to the "
                         "workspace when you train (the README's command)")
        now = seam.file_digests(lab.workspace, files)
        edited = [f for f in files if used.get("sha256", {}).get(f) != now.get(f)]
        if edited:
            raise Failed(f"the run trained with an earlier {', '.join(edited)}: the file changed after the run "
                         f"(its checks above grade the file as it is now); train again: {_train_command(lab)}")
    return manifest
