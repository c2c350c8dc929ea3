"""What a run folder holds, and the rules for writing into one.

    RUN/
      .run.lock                       the writer lock (minitrain/runs/run_lock.py)
      config.yaml                     the config as given
      config.resolved.yaml            ... and as resolved
      manifest.json                   what ran and how it stands (status)
      train_log.jsonl, metrics.csv    the log, and the same as a table
      results.json, report.md, loss_curve.png, dashboard.png (a language model), confusion_matrix.png (a
      classifier), environment.yaml, and the files the output, tracking and callback settings ask for
      checkpoints/                    step-<N>.safetensors, latest, best.safetensors
      logs/, adapter/, tensorboard/, histograms/    the console log, a LoRA run's PEFT adapter, and what the
                                      trackers and callbacks write

A new run never mixes with an old one: `check_new_run` refuses a folder that holds another run's files unless
`--overwrite` is given, and then `clear_run` deletes exactly those files (and nothing else the folder holds,
such as the README.md of an experiment folder), and the model file its results.json names unless a run beside
it names that file too (model files are named by their bytes: two runs that trained the same model share one).
A run that failed on an exception from a lab workspace's file (its manifest says `failed_in_lab_file`) is
replaced without --overwrite: the student fixed the file and trains again. config.yaml counts as another run's
only when it differs from the config about to be written: the lab's experiment folder holds its own config.yaml
and is a fine place to train.

Every write is atomic (minitrain/common/io.py), through a temporary sibling that a `kill -9` can leave behind;
`remove_stale_temp_files` deletes those at the next start: in the run folder all of them (the writer lock says
no one else writes there), in the models folder only those whose process is gone (runs share that folder).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from minitrain.common.errors import UserError
from minitrain.common.io import path_exists, read_json
from minitrain.common.lifeline import process_alive
from minitrain.runs.run_files import read_results

CONFIG_FILE, LOG_FILE = "config.yaml", "train_log.jsonl"
RUN_FILES = ("manifest.json", "config.resolved.yaml", LOG_FILE, "metrics.csv", "results.json", "report.md",
             "loss_curve.png", "dashboard.png", "confusion_matrix.png", "environment.yaml", "metrics.json",
             "metrics.parquet", "report.html", "samples.jsonl", "system_metrics.jsonl", "mlflow.db", "tracking.jsonl",
             "tracking.json")
CHECKPOINTS = "checkpoints"
RUN_FOLDERS = ("logs", "adapter", "tensorboard", "histograms")  # whole folders a run writes, beside checkpoints/
# io.atomic_write's temporary name for TARGET: .TARGET.<8 random characters>.tmp
_TEMP = re.compile(r"^\.(?P<target>.+)\.[A-Za-z0-9_]{8}\.tmp$")


def run_files_in(out_dir: Path, config_text: str | None) -> list[str]:
    """The files of a run `out_dir` holds (names relative to it), config.yaml only if it differs from
    `config_text`, the config the new run would write."""
    found = [name for name in (*RUN_FILES, *RUN_FOLDERS) if os.path.lexists(out_dir / name)]
    checkpoints = out_dir / CHECKPOINTS
    if checkpoints.is_dir():
        found += [f"{CHECKPOINTS}/{p.name}" for p in sorted(checkpoints.iterdir())]
    elif os.path.lexists(checkpoints):
        found.append(CHECKPOINTS)
    config = out_dir / CONFIG_FILE
    if os.path.lexists(config) and not _holds(config, config_text):
        found.append(CONFIG_FILE)
    return found


def _holds(path: Path, text: str | None) -> bool:
    try:
        return text is not None and path.is_file() and path.read_bytes() == text.encode("utf-8")
    except OSError:
        return False


def check_new_run(out_dir: Path, config_text: str | None, overwrite: bool) -> None:
    """Refuse (exit code 2) to start a run in a folder that holds another run's files, unless `overwrite`."""
    found = run_files_in(out_dir, config_text)
    if found and not overwrite and not failed_in_lab_file(out_dir):
        shown = ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
        raise UserError(f"{out_dir} holds another run ({shown}); pass --overwrite to replace it, "
                        f"--resume {out_dir} to continue it, or choose another --out-dir", 2)


def failed_in_lab_file(out_dir: Path) -> bool:
    """Whether the run in `out_dir` failed on an exception from a lab workspace's file (its manifest says so):
    the student fixes the file and trains again into the same folder, with no --overwrite to remember."""
    try:
        manifest = read_json(out_dir / "manifest.json", "manifest", limit=16 << 20)
    except UserError:
        return False
    return isinstance(manifest, dict) and manifest.get("status") == "failed" and \
        manifest.get("failed_in_lab_file") is True


def clear_run(out_dir: Path) -> None:
    """Delete the files a run writes (see the module docstring) from `out_dir`; anything else stays."""
    if (model := _own_model_file(out_dir)) is not None:
        remove_file(model)
    for name in RUN_FILES:
        remove_file(out_dir / name)
    for name in RUN_FOLDERS:
        folder = out_dir / name
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
        else:
            remove_file(folder)
    checkpoints = out_dir / CHECKPOINTS
    if checkpoints.is_dir() and not checkpoints.is_symlink():
        for path in checkpoints.iterdir():
            remove_file(path)
        checkpoints.rmdir()
    else:
        remove_file(checkpoints)


def _own_model_file(out_dir: Path) -> Path | None:
    """The model file the run in `out_dir` saved, by results.json's model_path and model_sha256; None when there
    is none, or when another run beside it or beside the models folder names the same file."""
    try:
        results = read_results(out_dir / "results.json") if (out_dir / "results.json").is_file() else {}
    except UserError:
        return None
    recorded, sha = results.get("model_path"), results.get("model_sha256")
    model = locate(recorded, out_dir)
    if model is None or not sha or not model.name.endswith(f"-{sha[:16]}.safetensors") or not model.is_file():
        return None
    for base in {out_dir.resolve().parent, model.parent.parent}:
        for other in [*base.glob("*/results.json"), *base.glob("*/*/results.json")]:
            if other.parent.resolve() != out_dir.resolve() and _mentions(other, sha):
                return None
    return model


def locate(recorded: str | None, run_dir: Path | None) -> Path | None:
    """Find a path a run recorded (its config's files, init_from, model_path), None when it is nowhere: as given
    if absolute, else under the folder the run started in (manifest.json's `working_dir`, relative to the run
    folder), the run folder, or the current folder (a run recorded before `working_dir` was)."""
    if not recorded:
        return None
    path = Path(recorded)
    started = _working_dir(run_dir)  # None without a run folder
    bases = [*([run_dir / started] if started else []), *([run_dir] if run_dir else []), Path.cwd()]
    candidates = [path] if path.is_absolute() else [Path(os.path.normpath(base / path)) for base in bases]
    return next((c for c in candidates if path_exists(c)), None)


def _working_dir(run_dir: Path | None) -> str | None:
    try:
        started = read_json(run_dir / "manifest.json", "manifest").get("working_dir") if run_dir else None
    except (UserError, AttributeError):  # no manifest, or not an object: nothing recorded
        return None
    return started if isinstance(started, str) else None


def _mentions(path: Path, text: str) -> bool:
    try:
        return text in path.read_text(encoding="utf-8", errors="replace")
    except OSError:  # unreadable, or a folder: kept, to be safe
        return True


def remove_file(path: Path) -> None:
    """Delete the run file `path` if it is there; a folder in its place is one error."""
    try:
        if path.is_dir() and not path.is_symlink():
            raise UserError(f"{path}: a folder where a run keeps a file; remove it yourself", 2)
        path.unlink(missing_ok=True)
    except OSError as e:
        raise UserError(f"{path}: cannot delete it ({e.strerror or e})") from None


def remove_stale_temp_files(out_dir: Path, models_dir: Path, model_prefix: str) -> list[Path]:
    """Delete what interrupted atomic writes left: every temporary file of a run file in `out_dir` (and its
    checkpoints/), and in `models_dir` the partial model files of processes that no longer exist. Returns them."""
    removed = []
    for folder, names in ((out_dir, {*RUN_FILES, CONFIG_FILE}), (out_dir / CHECKPOINTS, None)):
        for path in _listing(folder):
            match = _TEMP.match(path.name)
            if match and (names is None or match["target"] in names):
                removed.append(path)
    partial = re.compile(rf"^\.?\.{re.escape(model_prefix)}-(?P<pid>\d+)\.partial\.safetensors(\..{{8}}\.tmp)?$")
    for path in _listing(models_dir):
        match = partial.match(path.name)
        if match and not process_exists(int(match["pid"])):
            removed.append(path)
    for path in removed:
        path.unlink(missing_ok=True)
    return removed


def _listing(folder: Path) -> Iterable[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_file() and not p.is_symlink()]
    except OSError:
        return []


def process_exists(pid: int) -> bool:
    """Whether another process with this id exists (this process's own earlier files count as left behind)."""
    return pid != os.getpid() and process_alive(pid)
