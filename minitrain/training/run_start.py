"""What a run starts with, before its first step: its folders checked, its bookkeeping (manifest, log,
checkpoints, monitors), where it starts from (a fresh folder, or a checkpoint with the log cut back to its step),
config.yaml and config.resolved.yaml, and manifest.json's content (minitrain/training/run.py calls these)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_text, read_text
from minitrain.common.paths import recorded_path
from minitrain.config import Config, resolved_yaml
from minitrain.evaluation.alerts import AlertMonitor
from minitrain.monitor.early_stopping import EarlyStopping
from minitrain.runs import run_dir
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.run_dir import LOG_FILE
from minitrain.training import artifacts
from minitrain.training.distillation_task import teacher_fingerprint
from minitrain.training.finetune import adapter_facts, load_init_weights
from minitrain.training.loop_inputs import Bookkeeping, Checkpointing
from minitrain.training.parts import Parts, parameter_counts, training_config_hash
from minitrain.training.resume import data_fingerprint, keep_log_before, restore, run_dir_of


def bookkeeping(cfg: Config, out_dir: Path, parts: Parts) -> Bookkeeping:
    """The loop's files and monitors in `out_dir`: manifest.json, train_log.jsonl, the checkpoints, early
    stopping and alerts when configured (the manifest, progress display, watchers and start come later)."""
    ckpt = cfg.training.checkpoint
    table_files = None if parts.table is None else parts.table.info["files"]
    checkpointing = Checkpointing(CheckpointManager(out_dir, ckpt.keep_last), training_config_hash(cfg),
                                  ckpt.save_every, ckpt.save_best, ckpt.metric, ckpt.mode,
                                  data_sha256=data_fingerprint(cfg, table_files) | teacher_fingerprint(parts.task))
    watch = cfg.training.early_stopping
    early_stopping = None if watch is None else EarlyStopping(watch.metric, watch.patience, watch.min_delta,
                                                              watch.mode)
    alerts = AlertMonitor(cfg.monitoring.alert_rules()) if cfg.monitoring.alerts else None
    return Bookkeeping(out_dir / "manifest.json", log_path=out_dir / LOG_FILE, checkpointing=checkpointing,
                       early_stopping=early_stopping, alerts=alerts,
                       pruning=cfg.pruning.pruner(parts.model, parts.total_steps))


def start_run(cfg: Config, out_dir: Path, checkpoint_path: Path | None, parts: Parts, books: Bookkeeping,
           overwrite: bool, written_under: tuple[str, ...] | None = None) -> tuple[dict[str, Any], Any]:
    """Resume `checkpoint_path` (its state into `parts` and `books.start`, the log cut back to its step) or start
    a fresh run (the folder cleared, the weights `model.init_from` names loaded); return the checkpoint's `extra`
    ({} when fresh) and what the weights came from (the manifest's init_from; None when resumed)."""
    if checkpoint_path is not None:
        books.start, restored = restore(checkpoint_path, parts, books, written_under)
        if overwrite:
            run_dir.clear_run(out_dir)
        keep_log_before(run_dir_of(checkpoint_path) or out_dir, books.log_path, books.start, checkpoint_path)
        for name in ("results.json", "report.md"):  # the run is unfinished again until it completes
            run_dir.remove_file(out_dir / name)
        return restored, None
    init_from = parts.init_from  # a LoRA base, loaded while building
    if cfg.model.init_from and not cfg.lora.enabled:
        init_from = load_init_weights(parts.model, cfg)
    run_dir.clear_run(out_dir)
    atomic_write_text(out_dir / LOG_FILE, "")
    return {}, init_from


def run_manifest(cfg: Config, parts: Parts, books: Bookkeeping, previous: dict[str, Any], checkpoint_path: Path | None,
              *, continuing: bool, init_from: Any, strict: bool, overrides: tuple[str, ...] | list[str],
              runtime: dict[str, Any]) -> dict[str, Any]:
    """manifest.json's content before the first step: the previous run's when resuming it, else a new one, with
    this run's facts (steps, sizes, hashes, runtime, where the weights came from, the resumes)."""
    resumed = checkpoint_path is not None and bool(previous)
    manifest = previous if resumed else artifacts.new_manifest(cfg)
    if not (resumed and continuing and manifest.get("run_id")):
        manifest["run_id"] = uuid.uuid4().hex  # a continuation in another folder is a run of its own
    earlier = manifest.get("config_hash")
    if resumed and isinstance(earlier, str) and earlier != books.checkpointing.config_hash:  # a new stopping point:
        manifest.setdefault("earlier_config_hashes", []).append(earlier)  # the older checkpoints' (check_run_files)
    manifest.update(total_steps=parts.total_steps, strict=strict, overrides=list(overrides),
                    **parameter_counts(parts.model), **adapter_facts(parts.model),
                    config_hash=books.checkpointing.config_hash,
                    data_sha256=books.checkpointing.data_sha256, runtime=runtime)
    for stale in ("error", "signal"):
        manifest.pop(stale, None)
    # What the run's relative paths (its config's, init_from, model_path) are relative to, from the run folder:
    # `runs/locate` finds them from any working folder (absolute when the run folder is outside this one).
    out_dir = Path(books.manifest_path).parent
    inside = not os.path.isabs(recorded_path(out_dir))
    manifest["working_dir"] = os.path.relpath(".", out_dir) if inside else os.getcwd()
    if init_from is not None:
        manifest["init_from"] = recorded_path(init_from) if isinstance(init_from, str) else init_from
    if parts.table is not None:
        # A table's files and splits are hashed one by one; the corpus manifest beside train_path is not its data.
        manifest.update(data_manifest_hash=None, data=parts.table.info)
    if checkpoint_path is not None:
        manifest.setdefault("resumes", []).append({"checkpoint": str(checkpoint_path), "step": books.start.step})
    return manifest


def check_folders(folders: dict[str, Path]) -> None:
    """A UserError (exit code 2) unless each folder ({what: path}) is, or can be created as, a writable folder:
    a path through a file or an unwritable folder is named before any work. Creates nothing (the first write
    does)."""
    for what, folder in folders.items():
        existing = folder
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent  # the nearest part of the path that exists; mkdir starts there
        if not existing.is_dir():
            raise UserError(f"{what} {folder}: {existing} exists and is not a folder", 2)
        if not os.access(existing, os.W_OK | os.X_OK):
            raise UserError(f"{what} {folder}: {existing} is not writable", 2)


def config_text(cfg: Config, config_path: str | os.PathLike | None) -> str | None:
    """The text config.yaml gets: the config exactly as given."""
    if cfg.source is not None and cfg.source.text:
        return cfg.source.text
    return read_text(config_path, "config file") if config_path is not None else None


def write_configs(cfg: Config, out_dir: Path, config_text: str | None) -> None:
    """config.yaml exactly as given, and config.resolved.yaml (defaults filled, overrides applied)."""
    if config_text is not None:
        atomic_write_text(out_dir / run_dir.CONFIG_FILE, config_text)
    atomic_write_text(out_dir / "config.resolved.yaml", resolved_yaml(cfg))
