"""One trial of a sweep: an ordinary run folder, trained by `run_training` like any other run.

    job = TrialJob(...)          what a worker needs (plain data: it crosses to another process or Ray node)
    run_job(job)                 train it, or resume it, or leave it alone if it is done (the folder decides)
    trial_row(trial, run_dir)    its row of the sweep table, read back from the folder

The folder is the truth: a trial is done when its manifest says completed, early_stopped, diverged or halted
(training is deterministic: a diverged trial would diverge again), resumable when it has a checkpoint, and new
otherwise. So a sweep restarted after a crash or Ctrl-C trains only what is missing, and every tool that reads a
run folder (`minitrain info`, `export`, `publish`, `--resume`) works on a trial.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minitrain.callbacks import Callback
from minitrain.common.errors import ArgumentError, UserError
from minitrain.config import Config, load_config
from minitrain.monitor.report import read_log
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.sweep.space import Trial

DONE = ("completed", "early_stopped", "diverged", "halted")  # a manifest status no rerun would change
# The numbers of results.json a row shows (those the run has); val ones fall back on the log for unfinished runs.
RESULT_KEYS = ("val_ppl", "val_loss", "best_val_ppl", "best_val_step", "train_ppl", "val_exact_match", "dev_ppl",
               "dev_exact_match", "test_ppl")
TIMING_KEYS = ("wall_seconds",)  # differ from run to run; everything else in a row is deterministic


@dataclass(frozen=True)
class TrialJob:
    """Everything needed to run one trial, as plain data."""

    trial_id: str
    base: str  # the base config's path
    overrides: tuple[str, ...]  # --set texts: the sweep's `set`, the trial's values, tracking placement
    values: dict[str, Any] = field(default_factory=dict)  # flag-like keys: seed, output.dir, output.models_dir
    cwd: str = "."  # where paths in the config are relative to (a Ray worker starts elsewhere)

    @property
    def run_dir(self) -> Path:
        return Path(self.values["output.dir"])

    def config(self) -> Config:
        return load_config(self.base, list(self.overrides), values=self.values)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file's content; {} when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def trial_state(run_dir: Path) -> str:
    """"done", "resumable" (a checkpoint to continue from) or "new"."""
    manifest = read_json(run_dir / "manifest.json")
    if manifest.get("status") in DONE and (manifest["status"] not in ("completed", "early_stopped")
                                           or (run_dir / "results.json").is_file()):
        return "done"
    if (run_dir / "checkpoints").is_dir() and CheckpointManager(run_dir).latest() is not None:
        return "resumable"
    return "new"


def run_job(job: TrialJob, callbacks: Sequence[Callback] = ()) -> str | None:
    """Train (or resume) the trial unless its folder says it is done; None, or the one-line error it ended with
    (a diverged or interrupted run's explanation)."""
    if job.cwd != ".":
        os.chdir(job.cwd)
    state = trial_state(job.run_dir)
    if state == "done":
        return None
    from minitrain.training.run import run_training  # the engine loads numba kernels: a worker imports it here

    cfg = job.config()
    try:
        run_training(cfg, job.run_dir, resume=job.run_dir if state == "resumable" else None, progress=False,
                     config_path=job.base, overrides=cfg.source.overrides, callbacks=callbacks)
    except (UserError, ArgumentError) as exc:  # a trial whose settings the core refuses is a failed trial
        return str(exc)
    return None


def _val_rows(run_dir: Path) -> list[dict[str, Any]]:
    log = run_dir / "train_log.jsonl"
    try:
        return [row for row in read_log(log) if "val_loss" in row] if log.is_file() else []
    except UserError:
        return []


def trial_row(trial: Trial, run_dir: Path, sweep_dir: Path, message: str | None = None) -> dict[str, Any]:
    """The trial's row: id, values, seed, status, steps, the results (from the log while unfinished), wall time."""
    manifest, results = read_json(run_dir / "manifest.json"), read_json(run_dir / "results.json")
    row: dict[str, Any] = {"trial": trial.id, "params": dict(trial.params), "seed": trial.seed,
                           "status": results.get("status") or manifest.get("status") or "not started",
                           "steps": results.get("steps", manifest.get("steps_done"))}
    val = _val_rows(run_dir) if not results else []
    if val:
        best = min(val, key=lambda r: r["val_loss"])
        row.update(val_ppl=val[-1]["val_ppl"], val_loss=val[-1]["val_loss"], best_val_ppl=best["val_ppl"],
                   best_val_step=best["step"])
    row.update({key: results[key] for key in RESULT_KEYS if key in results})
    row["wall_seconds"] = results.get("wall_seconds", manifest.get("wall_seconds"))
    row["run_dir"] = os.path.relpath(run_dir, sweep_dir)
    if message and row["status"] not in ("completed", "early_stopped"):
        row["message"] = message
    return row
