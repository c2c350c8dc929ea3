"""Runs for the checkers: the tiny run a check trains itself, the run folder whose stop conditions it reads, and
the run folder's model scored here (`scored_model`): its numbers are recomputed from the weights and the lab's
data, never read from results.json, which only says where the model file is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from minitrain import seam
from minitrain.common.errors import UserError
from minitrain.common.paths import course_file
from minitrain.config.datacheck import load_split
from minitrain.config.loader import load_config
from minitrain.course.checks import Failed
from minitrain.course.fixtures import write_tiny_run
from minitrain.course.labs import typed
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.run_folder import read_run as read_run_folder
from minitrain.models.registry import build_model
from minitrain.monitor.report import read_log
from minitrain.training.scoring import score_records

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
    return typed(lab.lab.train, lab.shown) if lab.lab.train and lab.workspace else "the lab's run"


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


def run_file(lab: Any) -> Any:
    """The run folder read as `minitrain.hub.run_folder.read_run` reads it (results.json only locates its model
    file, which must be there and be of that run); fails with why not."""
    if lab.run_dir is None or not lab.run_dir.is_dir():
        raise Failed(f"no run folder at {lab.run_dir} yet; train first: {_train_command(lab)}")
    try:
        return read_run_folder(lab.run_dir)
    except UserError as error:
        raise Failed(f"the run folder's model file cannot be read: {error}") from None


def run_model(lab: Any, config: str, steps: int | None = None) -> tuple[Any, Any]:
    """(the run folder's model with its file's weights, the lab's `config` loaded); fails unless the file holds
    the model `config` builds, trained for `steps` (default: the steps it sets; the file's own record)."""
    run = run_file(lab)
    cfg = load_config(course_file(config))
    model = build_model(cfg.model.architecture())
    if run.model_config != dict(model.config):
        raise Failed(f"the run's model file holds a model of another shape ({run.model_config}); {config} builds "
                     f"{dict(model.config)}: train it unchanged")
    steps = steps or cfg.scheduler.total_steps
    if run.metadata.get("steps") != steps:
        raise Failed(f"the run's model file was trained for {run.metadata.get('steps')} steps; {config} trains "
                     f"{steps}: train it unchanged")
    model.load_state_dict(run.state, source=str(run.model_path))
    return model, cfg


def not_the_reference(lab: Any, model: Any) -> None:
    """For a workspace: fail when `model` holds the weights of the lab's committed reference run, which the
    library's own pieces trained (a workspace's pieces, written otherwise, train other bits)."""
    if lab.workspace is None or lab.lab.reference_run is None:
        return
    reference = read_run_folder(course_file(lab.lab.reference_run)).state
    ours = model.state_dict()
    if reference.keys() == ours.keys() and all(np.array_equal(reference[k], ours[k]) for k in ours):
        raise Failed(f"the run's model file holds the weights of the course's reference run "
                     f"({lab.lab.reference_run}), bit for bit: the library's pieces trained it, not yours; train "
                     f"with your files: {_train_command(lab)}")


def scored_model(lab: Any, config: str, exact_below: float = float("inf"), steps: int | None = None) -> dict:
    """The run folder's model (`run_model`, trained for `steps`) scored here on the val split of the lab's
    `config`, as the run validated: {"loss", "ppl"}, and "exact_match" when the PPL is under `exact_below`
    (greedy decoding is the slow part, and a model that fails on its PPL needs no more)."""
    model, cfg = run_model(lab, config, steps)
    tokenizer = CharTokenizer.load(course_file(cfg.data.vocab_path))
    records = load_split(cfg.data.model_copy(update={"val_path": str(course_file(cfg.data.val_path))}), "val")
    # The loss reads each record's text only; score_records decodes the forms of records that have one.
    scores = score_records(model, tokenizer, [{"text": r["text"]} for r in records], cfg.data.loss_on)
    return score_records(model, tokenizer, records, cfg.data.loss_on) if scores["ppl"] < exact_below else scores
