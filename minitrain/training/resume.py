"""Continuing a run from a checkpoint (`--resume`): which checkpoint, whether it can resume this run, and what
of the folder's history (manifest, log) carries over.

A checkpoint holds all five state machines (minitrain/checkpoint.py) and, since this minitrain, the sha256 of
the data files the run read: the same config on changed data trains another model, so a resume after the data
changed is refused, naming the file. Every problem with what `--resume` names is exit code 2, like any other
input that cannot be used.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from minitrain.checkpoint import load_checkpoint
from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_text, read_bytes, sha256_of
from minitrain.config import Config, resolved_dict
from minitrain.config.yaml_lines import load_yaml_file
from minitrain.data.text_sources import source_files
from minitrain.monitor.report import log_row_problem
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.model_files import config_hash
from minitrain.runs.run_dir import LOG_FILE
from minitrain.runs.run_files import problem_text, read_manifest
from minitrain.training.loop_inputs import Bookkeeping, LoopState
from minitrain.training.parts import hashed_part, training_config_hash

RECORDED_CONFIG = "config.resolved.yaml"


def data_fingerprint(cfg: Config, table_files: list[dict[str, str]] | None = None) -> dict[str, dict[str, str]]:
    """{config key: {"path", "sha256"}} of the data files training reads: the splits and the vocabulary, or for a
    table task `table_files` (the files data.source or the split paths named, as its manifest records them;
    the text corpus's default paths are no file of a table run's), or every file of a text data.source."""
    if cfg.is_table_task:
        return {f"data file {i + 1}": dict(file) for i, file in enumerate(table_files or [])}
    if cfg.data.source is not None:  # a pretrained base's text records from one source: every file it holds
        return {f"data file {i + 1}": {"path": str(path), "sha256": sha256_of(path)}
                for i, path in enumerate(source_files(cfg.data.source))}
    # a BPE is trained on train_path: no vocab_path (nor has a run on a pretrained base)
    keys = ("train_path", "val_path") + (() if cfg.data.uses_bpe else ("vocab_path",))
    return {f"data.{key}": {"path": str(getattr(cfg.data, key)), "sha256": sha256_of(getattr(cfg.data, key))}
            for key in keys if getattr(cfg.data, key) is not None}


def same_folder(a: Path | None, b: Path) -> bool:
    return a is not None and (a == b or a.resolve() == b.resolve())


def run_dir_of(checkpoint: Path) -> Path | None:
    """The run folder a checkpoint belongs to (…/RUN/checkpoints/step-N.safetensors), if it is in one."""
    return checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else None


def resume_checkpoint(resume: str | os.PathLike | None, out_dir: Path, overwrite: bool) -> Path | None:
    """The checkpoint `--resume` names (exit code 2 when it names none)."""
    if resume is None:
        return None
    try:
        path = CheckpointManager.resolve(resume)
    except UserError as e:
        raise UserError(str(e), 2) from None
    if overwrite and same_folder(run_dir_of(path), out_dir):
        raise UserError(f"--overwrite would delete the checkpoint --resume continues from ({path}); leave "
                        f"--overwrite out to continue the run in {out_dir}", 2)
    return path


def restore(path: Path, parts: Any, books: Bookkeeping, written_under: str | None = None
            ) -> tuple[LoopState, dict[str, Any]]:
    """Load the checkpoint into `parts` and the monitors of `books` (early stopping, alerts); return the loop's
    state to start from, and the checkpoint's `extra` (the callbacks' and the pruning's states are there: they are
    restored once built). `written_under`: the config hash the checkpoint was saved under (check_run_files), when
    the run's stopping point changed.

    A checkpoint that cannot resume this run is exit code 2, and so is one whose data files have changed since it
    was saved (the same config would then train another model), and one saved past this run's total_steps.
    """
    checkpointing = books.checkpointing
    try:
        restored = load_checkpoint(path, model=parts.model, optimizer=parts.optimizer, scheduler=parts.scheduler,
                                   batcher=parts.batcher, train_rng=parts.model.rng,
                                   config_hash=written_under or checkpointing.config_hash)
    except UserError as e:
        raise UserError(str(e), 2) from None
    if restored["step"] > parts.total_steps:
        raise UserError(f"{path}: saved after step {restored['step']}, past the new total_steps "
                        f"{parts.total_steps}; a resume can shorten a run only to a step it has not passed", 2)
    extra = restored["extra"]
    _check_same_data(path, extra.get("data_sha256"), checkpointing.data_sha256)
    try:
        start = _LOOP_STATE.validate_json(json.dumps(extra.get("loop", {})), strict=True)  # JSON: strict, from a dict
        for name in ("early_stopping", "alerts"):
            if getattr(books, name) is not None and name in extra:
                getattr(books, name).load_state_dict(extra[name])
    except (UserError, ValidationError, ValueError, TypeError, KeyError, IndexError) as e:
        problem = problem_text(e) if isinstance(e, ValidationError) else str(e)
        raise UserError(f"{path}: cannot restore the loop's state ({problem})", 2) from None
    start.step = restored["step"]
    return start, extra


_LOOP_STATE = TypeAdapter(LoopState)  # builds the LoopState, its fields' types checked strictly


def _check_same_data(path: Path, saved: Any, now: dict[str, dict[str, str]]) -> None:
    if saved is None:
        return  # written before checkpoints recorded their data
    if not (isinstance(saved, dict) and all(isinstance(v, dict) and isinstance(v.get("sha256"), str)
                                            for v in saved.values())):
        raise UserError(f"{path}: its data_sha256 record is damaged", 2)
    for key, current in now.items():
        then = saved.get(key)
        if then is not None and then["sha256"] != current["sha256"]:
            raise UserError(f"{current['path']} ({key}) has changed since {path} was saved (sha256 "
                            f"{then['sha256'][:12]}… then, {current['sha256'][:12]}… now); resume with the data "
                            "the run started with, or start a new run", 2)


def previous_manifest(checkpoint: Path | None, out_dir: Path) -> dict[str, Any]:
    if checkpoint is None:
        return {}
    path = (run_dir_of(checkpoint) or out_dir) / "manifest.json"
    if not os.path.lexists(path):
        return {}
    try:
        return read_manifest(path)
    except UserError as e:
        raise UserError(f"{e}; a resume continues this manifest (move it away to start a new one)", 2) from None


def recorded_run(resume: str | os.PathLike) -> tuple[Path, Path]:
    """(run folder, its config.resolved.yaml) of what `--resume` names, for `train --resume RUN` without a
    config: the run continues in its folder with the config it recorded (overrides and templates applied)."""
    path = Path(resume)
    folder = path if path.is_dir() else run_dir_of(path)
    if folder is None or not os.path.lexists(folder / RECORDED_CONFIG):
        where = folder / RECORDED_CONFIG if folder is not None else f"{path} (a checkpoint outside a run folder)"
        raise UserError(f"--resume {resume}: no recorded config {where}; give the config the run started with: "
                        f"minitrain train CONFIG --resume {resume}", 2)
    return folder, folder / RECORDED_CONFIG


def is_recorded_config(cfg: Config, run_folder: Path) -> bool:
    """Whether `cfg` was loaded from `run_folder`'s own config.resolved.yaml (`recorded_run`)."""
    path = cfg.source.path if cfg.source is not None else None
    return path is not None and Path(path).name == RECORDED_CONFIG and same_folder(Path(path).parent, run_folder)


STOP_KEYS = {"training": ("total_steps", "epochs"), "scheduler": ("total_steps",)}  # what a resume may change


def _without_stop(hashed: dict[str, Any]) -> dict[str, Any]:
    return {section: {k: v for k, v in keys.items() if k not in STOP_KEYS.get(section, ())}
            if isinstance(keys, dict) else keys for section, keys in hashed.items()}


def check_run_files(checkpoint: Path, cfg: Config, manifest: dict[str, Any], out_dir: Path) -> str:
    """Refuse (exit code 2, naming the file) a manifest or recorded config that belongs to another run than the
    checkpoint: a resume continues them, so another run's (another kind, another config) would be mixed in.
    Only the stopping point (STOP_KEYS) may differ from the recorded config: the run is extended or shortened,
    its schedule rebuilt for the new total (docs/yaml-mode.md, "Resuming"). Returns the config hash the run's
    checkpoints were written under."""
    folder = run_dir_of(checkpoint) or out_dir
    path = folder / RECORDED_CONFIG
    then_hash = this_hash = training_config_hash(cfg)
    if os.path.lexists(path):
        recorded = load_yaml_file(path, "recorded config")
        if not isinstance(recorded, dict):
            raise UserError(f"{path}: not a resolved config (a mapping of sections)", 2)
        now = hashed_part(resolved_dict(cfg))
        if first_difference(hashed_part(recorded), now) is not None:
            then_hash = config_hash(hashed_part(recorded))
        differs = first_difference(_without_stop(hashed_part(recorded)), _without_stop(now))
        if differs is not None:
            key, then, now = differs
            raise UserError(f"{path}: the run was recorded with {key} = {then}, the config given has {now}; "
                            f"continue it with its own config (minitrain train --resume {folder}) or start a new "
                            "run", 2)
    if manifest and manifest.get("config_hash") not in (None, then_hash):
        raise UserError(f"{folder / 'manifest.json'}: belongs to another run (config hash "
                        f"{str(manifest['config_hash'])[:12]}, the config given hashes to {this_hash[:12]}); move "
                        "it away to resume with a new manifest", 2)
    return then_hash


def first_difference(recorded: Any, current: Any, key: str = "") -> tuple[str, str, str] | None:
    """(dotted key, recorded value, current value) of the first key, in order, where two configs differ."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        for name in [*current, *(k for k in recorded if k not in current)]:
            inner = f"{key}.{name}" if key else str(name)
            found = first_difference(recorded.get(name, _ABSENT), current.get(name, _ABSENT), inner)
            if found is not None:
                return found
        return None
    if type(recorded) is type(current) and recorded == current:
        return None
    return key or "the whole config", _shown(recorded), _shown(current)


_ABSENT = object()


def _shown(value: Any) -> str:
    return "(absent)" if value is _ABSENT else repr(value)[:60]


def keep_log_before(source_dir: Path, log_path: Path, start: LoopState, checkpoint: Path) -> None:
    """Keep the log rows of steps before `start.step`, byte for byte; the resumed run appends the rest.

    Rows after the checkpoint (the run went on after it was saved, then died) would otherwise be written twice.
    A torn last line, from a kill during an append, is dropped too, and so is any damaged line. A log that is not
    the checkpoint's run's (its best validation row is not the one the checkpoint recorded: another run's, of
    another kind) is refused, naming it: the resumed run would mix its rows with another run's.
    """
    source = source_dir / LOG_FILE
    kept, rows = [], []
    if source.is_file():
        text = read_bytes(source, "training log").decode("utf-8", errors="replace")  # a bad byte: a bad row
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if log_row_problem(row) is None and row["step"] < start.step:
                kept.append(line + "\n")
                rows.append(row)
        _check_log_is_this_runs(source, rows, start, checkpoint)
    atomic_write_text(log_path, "".join(kept))


def _same(logged: Any, saved: Any) -> bool:
    return logged == saved or (isinstance(logged, float) and isinstance(saved, float) and logged != logged
                               and saved != saved)  # NaN, a diverged validation, is its own value here


def _check_log_is_this_runs(source: Path, rows: list[dict[str, Any]], start: LoopState, checkpoint: Path) -> None:
    val_rows = [row for row in rows if "val_loss" in row]
    if start.best_val_step is None or start.best_val_step >= start.step:
        found = not val_rows  # no validation before the checkpoint: the log has none either
    else:
        want = {"step": start.best_val_step, "val_loss": start.best_val_loss, "val_ppl": start.best_val_ppl}
        found = any(all(_same(row.get(k), v) for k, v in want.items()) for row in val_rows)
    if not found:
        raise UserError(f"{source}: not the log of the run {checkpoint} continues (its validation rows do not "
                        "match the checkpoint's); move it away to resume without the earlier rows", 2)
