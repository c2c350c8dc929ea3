"""`minitrain info RUN_DIR`: a short, readable summary of a run folder.

It reads what exists (manifest.json, config.resolved.yaml, train_log.jsonl, results.json, checkpoints/latest)
and skips what does not, so it also works on a run that is still going or was interrupted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from minitrain.common.errors import UserError
from minitrain.common.io import read_bytes
from minitrain.monitor.quality import quality_score
from minitrain.monitor.report import read_log
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.run_files import (
    FINISHING,
    MANIFEST,
    RESOLVED_CONFIG,
    RESULTS,
    RUNNING,
    read_manifest,
    read_results,
    read_run_config,
)
from minitrain.runs.run_lock import writer_of

RUN_FILES = (MANIFEST, RESOLVED_CONFIG, "train_log.jsonl", RESULTS)
UNFINISHED = (RUNNING, FINISHING)
# The model keys the config line shows (the family's shape; freeze when some parameters are frozen).
SHAPE_KEYS = ("type", "n_layer", "n_head", "d_model", "d_ff", "context", "d_embed", "hidden", "activation", "freeze")


def _scalars(data: dict[str, Any]) -> list[str]:
    return [f"  {k}: {_fmt(v)}" for k, v in data.items() if not isinstance(v, dict | list)]


def _fmt(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _state(run: Path, manifest: dict[str, Any] | None) -> list[str]:
    """Whether a process is writing the run now, and what to make of an unfinished status when none is."""
    writer = writer_of(run)
    if writer is not None:
        return [f"writer: {writer} is writing this run now"]
    status = (manifest or {}).get("status")
    if status in UNFINISHED:
        checkpointed = (run / "checkpoints" / "latest").is_file() or CheckpointManager(run).step_files()
        then = (f"`--resume {run}` continues from its last checkpoint" if checkpointed else
                "it stopped before its first checkpoint: nothing to resume, `train --overwrite` starts it again")
        return [f"warning: the manifest says {status!r}, but no process is writing this run: it stopped without "
                f"recording why (killed, or its disk filled up); {then}"]
    return []


def run_summary(run_dir: str | Path) -> str:
    """The summary text for `run_dir`; a UserError (exit code 2) if it is not a run folder."""
    run = Path(run_dir)
    if not run.is_dir() or not any(os.path.lexists(run / name) for name in RUN_FILES):
        raise UserError(f"{run}: not a run folder (none of {', '.join(RUN_FILES)} found)", 2)
    lines = [f"run: {run}"]
    manifest = read_manifest(run / MANIFEST) if os.path.lexists(run / MANIFEST) else None
    if manifest:
        lines += ["manifest:", *_scalars(manifest)]
    lines += _state(run, manifest)
    if os.path.lexists(run / RESOLVED_CONFIG):
        cfg = read_run_config(run / RESOLVED_CONFIG)
        model = cfg.get("model") or {}
        shape = ", ".join(f"{k} {model[k]}" for k in SHAPE_KEYS if k in model)
        lines += [f"config: {cfg.get('name')} — {shape}"]
    log = run / "train_log.jsonl"
    if os.path.lexists(log):
        rows = read_log(log)
        train = [r for r in rows if "loss" in r]
        val = [r for r in rows if "val_loss" in r]
        if train:
            last = train[-1]
            lines.append(f"log: {len(rows)} rows, last step {last['step']}, loss {_fmt(last['loss'])}")
        if val:
            best = min(val, key=lambda r: r["val_loss"])
            lines.append(f"val: last {_fmt(val[-1]['val_loss'])} at step {val[-1]['step']}, "
                         f"best {_fmt(best['val_loss'])} at step {best['step']}")
        if train and not os.path.lexists(run / RESULTS):  # a few steps of a killed run are no grade
            lines.append("quality: not graded: the run did not finish (no results.json)")
        elif train:
            quality = quality_score(rows, read_results(run / RESULTS))  # efficiency needs results.json's timings
            lines.append(f"quality: {quality.score:.1f} / 100, {quality.explained()}")
    if os.path.lexists(run / RESULTS):
        lines += ["results:", *_scalars(read_results(run / RESULTS))]
    latest = run / "checkpoints" / "latest"
    if latest.is_file():  # shown as it is, even damaged: it is what a resume would read
        pointer = read_bytes(latest, "checkpoint pointer", 4096).decode("utf-8", errors="replace").strip()
        lines.append(f"latest checkpoint: {pointer}")
    return "\n".join(lines)
