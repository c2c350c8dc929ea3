"""One training run, from a validated `Config` to a complete run folder (what `scripts/train_mini.py` and
`minitrain train` both call).

    run_training(cfg, out_dir)
      check the data files (a missing file stops here, before any work and before writing anything)
      build: tokenizer → records → encoded splits → batchers (data RNG: data_seed)
             → the model (model.type; training RNG: rng_seed) → freeze → pack → optimizer → schedule
      [--resume: restore all five state machines from a checkpoint; keep the log rows before its step]
      write config.yaml (as given), config.resolved.yaml, manifest.json (status "running")
      loop.train(...)  → train_log.jsonl, checkpoints/step-<N>.safetensors + latest
      final: train PPL (one pass over train), val exact match, dev and test (when present) scored, the model file
             <models dir>/<prefix>-<hash>.safetensors, prefix minigpt-phase18 or mlp-lm (output.models_dir /
             --models-dir, default the repository's models/), results.json, loss_curve.png, metrics.csv,
             report.md, manifest.json completed
      beside them: environment.yaml, logs/train.log (the console output), and what the watchers of
             minitrain/callbacks/from_config.py write (tracking, system metrics, callbacks' files)

A run that diverges, is interrupted or is halted by an alert still leaves its manifest, log, metrics.csv and
curve, then raises a `UserError` that says what happened and which checkpoint to resume from.

`plan_run(cfg)` (the dry run) builds the same objects, times a few steps and reports the plan; it writes nothing.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from minitrain import artifacts
from minitrain.architectures import build_model
from minitrain.callbacks import Callback, CallbackList
from minitrain.callbacks.from_config import watch_run
from minitrain.checkpoint import (
    BEST_FILE,
    LATEST_POINTER,
    CheckpointManager,
    config_hash,
    load_checkpoint,
    save_model_file,
)
from minitrain.config import Config, resolved_dict, resolved_yaml
from minitrain.config.datacheck import DataSummary, check_data, load_split
from minitrain.config.problems import ConfigError
from minitrain.config.schema import ALWAYS_MEASURED
from minitrain.config.source import ConfigSource
from minitrain.data.batcher import Batch, EvalBatcher, TrainBatcher, encode_split
from minitrain.data.tokenizer import CharTokenizer
from minitrain.environment import write_environment
from minitrain.errors import UserError
from minitrain.extras import missing_extras
from minitrain.io import atomic_write_text
from minitrain.loop import (
    DIVERGED,
    FINISHED,
    INTERRUPTED,
    Checkpointing,
    evaluate,
    measure,
    next_log_probs_fn,
    restore_loop_state,
    train,
    train_step,
)
from minitrain.metrics import greedy_exact_match
from minitrain.monitor.alerts import AlertMonitor
from minitrain.monitor.console_log import console_log
from minitrain.monitor.early_stopping import EarlyStopping
from minitrain.monitor.html_report import write_html_report
from minitrain.monitor.metrics_files import write_metrics
from minitrain.monitor.progress import Progress
from minitrain.monitor.quality import quality_score
from minitrain.monitor.report import read_log, write_report
from minitrain.nn import Module
from minitrain.optim import build_optimizer
from minitrain.runtime import configure
from minitrain.schedule import build_scheduler

# Evaluation builds no tape, so a large batch costs little memory and amortises the per-op overhead; the
# PPL does not depend on it (PerplexityMeter sums in float64 over positions, whatever the batching).
EVAL_BATCH_SIZE = 256
MODEL_PREFIXES = {"minigpt": "minigpt-phase18", "mlp_lm": "mlp-lm"}  # model file names: <prefix>-<hash>
LOG_FILE = "train_log.jsonl"
CONSOLE_LOG = Path("logs") / "train.log"
EXIT_DIVERGED, EXIT_HALTED = 3, 4
# Config sections that do not change what is trained, so a resume may change them: where files go, how
# progress is shown, naming, tracking, the callbacks (they only watch), and the checkpoint cadence itself.
_NOT_HASHED = ("name", "version", "description", "output", "monitoring", "publish", "callbacks")


@dataclass
class Parts:
    """Everything a run is made of, built from a config."""

    tokenizer: CharTokenizer
    train_records: list[dict]
    val_records: list[dict]
    train_split: Batch
    batcher: TrainBatcher
    val_batches: EvalBatcher
    model: Module
    optimizer: Any
    scheduler: Any
    total_steps: int


def build_parts(cfg: Config, total_steps: int) -> Parts:
    """Tokenizer, encoded splits, batchers, model, optimizer and schedule; the schedule spans `total_steps`.

    The model is built (drawing its initial weights from the training RNG), frozen where `model.freeze` says,
    then packed into one flat buffer; the optimizer updates only the trainable parameters."""
    tokenizer = CharTokenizer.load(cfg.data.vocab_path)
    train_records, val_records = load_split(cfg.data, "train"), load_split(cfg.data, "val")
    seq_len = cfg.model.max_seq_len
    train_split = encode_split(train_records, tokenizer, seq_len, cfg.data.loss_on)
    val_split = encode_split(val_records, tokenizer, seq_len, cfg.data.loss_on)
    t = cfg.training
    batcher = TrainBatcher(train_split, t.batch_size, t.data_seed, t.shuffle, t.drop_last)  # the data RNG
    train_rng = np.random.Generator(np.random.PCG64(t.rng_seed))  # the training RNG
    model = build_model(cfg.model.architecture(), rng=train_rng, dtype=np.dtype(cfg.model.dtype).type)
    if cfg.model.freeze:
        model.freeze(cfg.model.freeze)
    model.pack_parameters()
    optimizer = build_optimizer(cfg.optimizer.type, model.trainable_parameters(), buffer=model.buffer,
                                **cfg.optimizer.kwargs())
    scheduler = build_scheduler(cfg.scheduler.type, optimizer, **cfg.scheduler_kwargs(total_steps))
    return Parts(tokenizer, train_records, val_records, train_split, batcher,
                 EvalBatcher(val_split, EVAL_BATCH_SIZE), model, optimizer, scheduler, total_steps)


def parameter_counts(model: Module) -> dict[str, int]:
    """{"parameters": all}, plus the trainable and frozen counts when some parameters are frozen."""
    total, trainable = model.num_parameters(), model.num_parameters(trainable_only=True)
    if trainable == total:
        return {"parameters": total}
    return {"parameters": total, "trainable_parameters": trainable, "frozen_parameters": total - trainable}


def training_config_hash(cfg: Config) -> str:
    """Hash of everything that shapes training (all but `_NOT_HASHED` and the checkpoint cadence)."""
    data = {k: v for k, v in resolved_dict(cfg).items() if k not in _NOT_HASHED}
    data["training"] = {k: v for k, v in data["training"].items() if k != "checkpoint"}
    return config_hash(data)


def _time_steps(parts: Parts, cfg: Config, n: int = 5, warmup: int = 2) -> tuple[float, float]:
    """(seconds per training step, seconds per validation pass), measured on `parts` (which it changes)."""
    t = cfg.training
    timings = []
    for _ in range(warmup + n):
        start = time.perf_counter()
        batches = [next(parts.batcher) for _ in range(t.grad_accumulation)]
        train_step(parts.model, parts.optimizer, batches, cfg.clip_norm, cfg.clip_value)
        parts.optimizer.step()
        parts.scheduler.step()
        timings.append(time.perf_counter() - start)
    start = time.perf_counter()
    evaluate(parts.model, parts.val_batches)
    return float(np.median(timings[warmup:])), time.perf_counter() - start


def _configure_runtime(cfg: Config) -> dict[str, Any]:
    """BLAS threads and allocator settings for this model size (minitrain.runtime); they change no number."""
    return configure(cfg.model.width, cfg.training.batch_size * cfg.model.max_seq_len)


def _resolve_total_steps(cfg: Config, summary: DataSummary) -> int:
    """training.total_steps, or epochs × steps per epoch, or (duration) as many steps as fit in the budget."""
    steps = cfg.resolve_steps(summary.steps_per_epoch)
    if steps is not None:
        return steps
    # A duration run: time a few steps on throw-away objects to size the schedule; the loop still stops on
    # the clock if the estimate was optimistic.
    warmup = cfg.scheduler.warmup_steps
    per_step, per_val = _time_steps(build_parts(cfg, warmup + 10), cfg)
    per_step += per_val / cfg.resolve_val_every(summary.steps_per_epoch)
    return max(warmup + 1, int(cfg.duration_seconds / per_step))


def plan_run(cfg: Config, summary: DataSummary | None = None) -> dict[str, Any]:
    """The dry run: what `run_training` would do, from a few timed steps; writes nothing.

    `summary` is `check_data(cfg)`'s result when the caller has already run the data checks.
    """
    summary = summary if summary is not None else check_data(cfg)
    _configure_runtime(cfg)
    steps = _resolve_total_steps(cfg, summary)
    parts = build_parts(cfg, max(steps, cfg.resolve_warmup(steps) + 10))
    t = cfg.training
    val_every = cfg.resolve_val_every(summary.steps_per_epoch)
    per_step_records = t.batch_size * t.grad_accumulation
    split = parts.train_split
    real = float(split.attn_pad_mask.sum(axis=1).mean()) * per_step_records
    counted = float(split.loss_mask.sum(axis=1).mean()) * per_step_records
    per_step, per_val = _time_steps(parts, cfg)
    n_val = len(range(0, steps, val_every)) + (0 if (steps - 1) % val_every == 0 else 1)
    estimate = steps * per_step + n_val * per_val
    return {
        **parameter_counts(parts.model),
        "tokens_per_step": {"max": cfg.tokens_per_step_max, "real_mean": round(real, 1),
                            "counted_mean": round(counted, 1)},
        "steps": steps,
        "epochs": round(steps * per_step_records / len(parts.train_records), 3),
        "ms_per_step": round(1000 * per_step, 2),
        "validations": n_val,
        "estimated_wall": f"{estimate:.0f} s" + (f" (budget {cfg.training.duration})" if t.duration else ""),
        "output_dir": cfg.output.dir,
        "models_dir": str(artifacts.models_dir(cfg.output.models_dir)),
        **({"publish_to": cfg.publish.repo} if cfg.publish is not None else {}),
    }


# ------------------------------------------------------------------------------------------------- the run


def run_training(
    cfg: Config,
    out_dir: str | os.PathLike,
    *,
    resume: str | os.PathLike | None = None,
    progress: bool = True,
    strict: bool = False,
    config_path: str | os.PathLike | None = None,
    overrides: tuple[str, ...] | list[str] = (),
    models_dir: str | os.PathLike | None = None,
    baseline_path: str | os.PathLike | None = None,
    summary: DataSummary | None = None,
    callbacks: Sequence[Callback] = (),
) -> dict[str, Any]:
    """Train `cfg` into the run folder `out_dir` and return results.json's content (see the module docstring).

    `resume`: a checkpoint file, or a run folder (its checkpoints/latest). `progress`: False prints nothing
    but warnings. `strict` and `overrides` (the `--set`/`--seed` flags) are recorded in the manifest;
    `config_path` is the YAML file copied as config.yaml when the config does not carry its own text.
    `models_dir` receives the final model file (default: the config's output.models_dir, else
    $MINITRAIN_MODELS_DIR, else the repository's models/; see `artifacts.models_dir`);
    `baseline_path` is the n-gram results.json (default experiments/14-ngram-baseline/results.json); it is
    compared with only when it scored the same corpus and positions (`artifacts.load_baseline_ppl`).
    `summary` is `check_data(cfg)`'s result when the caller has already run the data checks.
    `callbacks` (minitrain.callbacks) watch the run beside those its config names.
    """
    with console_log(Path(out_dir) / CONSOLE_LOG), ExitStack() as cleanup:
        return _run_training(cfg, out_dir, resume, progress, strict, config_path, overrides, models_dir,
                             baseline_path, summary, callbacks, cleanup)


def _run_training(cfg, out_dir, resume, progress, strict, config_path, overrides, models_dir, baseline_path,
                  summary, callbacks, cleanup) -> dict[str, Any]:
    start_time = time.perf_counter()
    # Every data problem at once, before any work and before any file is written.
    summary = summary if summary is not None else check_data(cfg)
    out_dir = Path(out_dir)
    checkpoint_path = CheckpointManager.resolve(resume) if resume is not None else None
    final_models_dir = artifacts.models_dir(models_dir or cfg.output.models_dir)
    # Before any work: a folder that cannot be written fails now, not after training.
    _check_folders({"run folder": out_dir, "models folder": final_models_dir})
    missing = missing_extras(cfg)
    if missing:
        raise ConfigError(missing, cfg.source or ConfigSource())
    runtime = _configure_runtime(cfg)

    previous = _previous_manifest(checkpoint_path, out_dir)
    total_steps = previous.get("total_steps") if cfg.training.duration and previous else None
    parts = build_parts(cfg, total_steps or _resolve_total_steps(cfg, summary))
    ckpt = cfg.training.checkpoint
    checkpointing = Checkpointing(CheckpointManager(out_dir, ckpt.keep_last), training_config_hash(cfg),
                                  ckpt.save_every, ckpt.save_best, ckpt.metric, ckpt.mode)
    early_stopping = EarlyStopping.from_config(cfg.training.early_stopping)
    alerts = AlertMonitor(cfg.monitoring.alert_rules()) if cfg.monitoring.alerts else None
    log_path = out_dir / LOG_FILE

    start, init_from = None, None
    if checkpoint_path is not None:
        restored = load_checkpoint(checkpoint_path, model=parts.model, optimizer=parts.optimizer,
                                   scheduler=parts.scheduler, batcher=parts.batcher, train_rng=parts.model.rng,
                                   config_hash=checkpointing.config_hash)
        start = restore_loop_state(restored["extra"], early_stopping, alerts)
        start.step = restored["step"]
        _keep_log_before(_run_dir_of(checkpoint_path) or out_dir, log_path, start.step)
    else:
        if cfg.model.init_from:
            from minitrain.hub.sources import init_model_from  # the Hub client is only needed here

            init_from = init_model_from(parts.model, cfg.model.init_from, cfg.data.vocab_path)
        _clear_previous_run(out_dir, checkpointing.manager)

    _write_configs(cfg, out_dir, config_path)
    write_environment(out_dir)
    watch = watch_run(cfg, callbacks, cleanup, model=parts.model, tokenizer=parts.tokenizer,
                      records=parts.val_records, run_dir=out_dir, resume_step=start.step if start else None,
                      config_hash=checkpointing.config_hash)
    if watch and checkpoint_path is not None:
        watch.load_state_dict(restored["extra"].get("callbacks", []))
    manifest = previous if checkpoint_path is not None and previous else artifacts.new_manifest(
        seed=cfg.training.rng_seed, data_seed=cfg.training.data_seed, config=resolved_dict(cfg),
        train_path=cfg.data.train_path)
    manifest.update(total_steps=parts.total_steps, strict=strict, overrides=list(overrides),
                    **parameter_counts(parts.model), config_hash=checkpointing.config_hash,
                    runtime=runtime)
    if init_from is not None:
        manifest["init_from"] = init_from
    if checkpoint_path is not None:
        manifest.setdefault("resumes", []).append({"checkpoint": str(checkpoint_path), "step": start.step})
    earlier_wall = float(manifest.get("wall_seconds") or 0.0)

    shown = Progress(parts.total_steps, cfg.monitoring.progress, every=cfg.training.log_every,
                     quiet=not progress, start_step=start.step if start else 0)
    try:
        outcome = train(
            parts.model, parts.optimizer, parts.scheduler, parts.batcher, parts.val_batches,
            parts.total_steps, cfg.resolve_val_every(summary.steps_per_epoch), cfg.training.log_every,
            cfg.training.rng_seed, out_dir / "manifest.json",
            manifest=manifest, log_path=log_path, clip_norm=cfg.clip_norm, clip_value=cfg.clip_value,
            grad_accumulation=cfg.training.grad_accumulation, warmup_steps=cfg.resolve_warmup(parts.total_steps),
            schedule_metric=cfg.scheduler.metric, checkpointing=checkpointing, early_stopping=early_stopping,
            alerts=alerts, progress=shown, duration_seconds=cfg.duration_seconds, start=start,
            validate=_validator(cfg, parts), callbacks=watch,
        )
    except KeyboardInterrupt:
        # A second Ctrl-C stops at once, mid-step: the manifest must not go on saying "running"; the last
        # checkpoint saved (`--resume` the run folder) is where the run can go on.
        latest = checkpointing.manager.latest()
        saved = next((step for step, path in checkpointing.manager.step_files() if path == latest), None)
        artifacts.complete_manifest(out_dir / "manifest.json", manifest, status=INTERRUPTED, steps_done=saved,
                                    checkpoint=None if latest is None else str(latest))
        raise
    finally:
        shown.close()

    rows = read_log(log_path)
    write_metrics(rows, out_dir, cfg.output.metrics)
    baseline = artifacts.load_baseline_ppl(baseline_path or artifacts.DEFAULT_BASELINE_PATH,
                                           data_manifest_hash=manifest.get("data_manifest_hash"),
                                           loss_on=cfg.data.loss_on)
    artifacts.plot_loss_curve(out_dir / "loss_curve.png", log_path, baseline, type(parts.model).__name__)
    if outcome["status"] not in FINISHED:
        artifacts.complete_manifest(out_dir / "manifest.json", manifest,
                                    wall_seconds=round(earlier_wall + time.perf_counter() - start_time, 3))
        _train_end(watch, outcome, parts.model, quiet=not progress)
        raise _stopped_error(outcome, cfg, out_dir, config_path, overrides)

    try:
        train_loss, train_ppl = evaluate(parts.model, EvalBatcher(parts.train_split, EVAL_BATCH_SIZE))
        exact = _exact_match(parts, parts.val_records) if all("form" in r for r in parts.val_records) else None
        model_path = _save_model(parts.model, final_models_dir, cfg, outcome["steps_done"])
        wall = round(earlier_wall + time.perf_counter() - start_time, 3)
        results = artifacts.build_results(
            train_ppl=train_ppl, val_ppl=outcome["val_ppl"], best_val_step=outcome["best_val_step"],
            best_val_ppl=outcome["best_val_ppl"], baseline_ppl=baseline, val_exact_match=exact,
            wall_seconds=wall, peak_rss_mb=artifacts.peak_rss_mb(), model_path=model_path,
        )
        results.update(status=outcome["status"], steps=outcome["steps_done"], train_loss=train_loss,
                       val_loss=outcome["val_loss"], ms_per_step=outcome["ms_per_step"])
        results.update(_score_held_out_splits(cfg, parts))
        artifacts.atomic_write_json(out_dir / "results.json", results)
        quality = quality_score(rows)
        write_report(out_dir / "report.md", title=cfg.name or out_dir.name, results=results, quality=quality,
                     sections=watch.report_lines() if watch else ())
        if cfg.output.report.format == "html":
            write_html_report(out_dir / "report.md", out_dir / "report.html")
        artifacts.complete_manifest(out_dir / "manifest.json", manifest, wall_seconds=wall, model_path=model_path,
                                    quality=quality.as_dict())
        _train_end(watch, outcome, parts.model, results, quiet=not progress)
    except KeyboardInterrupt:
        # Ctrl-C after the last step, while the run is being finished: the final checkpoint holds the trained
        # state, and resuming from it runs no step, only this finishing part.
        outcome.update(status=INTERRUPTED, signal="SIGINT", stopped_at=outcome["steps_done"] - 1)
        artifacts.complete_manifest(out_dir / "manifest.json", manifest, status=INTERRUPTED,
                                    stopped_at=outcome["stopped_at"])
        raise _stopped_error(outcome, cfg, out_dir, config_path, overrides) from None
    return results


def _train_end(watch: CallbackList | None, outcome: dict, model: Module, results: dict | None = None,
               quiet: bool = False) -> None:
    """Tell the watchers the run is over (its files are written): on_train_end, with results.json when it
    finished."""
    if watch:
        watch.train_end(status=outcome["status"], step=outcome["steps_done"] - 1, model=model, results=results,
                        quiet=quiet)


def _check_folders(folders: dict[str, Path]) -> None:
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


def _validator(cfg: Config, parts: Parts) -> Callable[[Any], dict[str, float]] | None:
    """What each validation measures when training.val_metrics asks for more than loss and perplexity: one pass
    for val_loss, val_ppl (and val_token_accuracy), then greedy decoding for val_exact_match. None otherwise:
    the loop's own evaluate."""
    extra = [m for m in cfg.training.val_metrics if m not in ALWAYS_MEASURED]
    if not extra:
        return None

    def validate(model: Any) -> dict[str, float]:
        measured = measure(model, parts.val_batches, token_accuracy="token_accuracy" in extra)
        row = {f"val_{key}": value for key, value in measured.items()}
        if "exact_match" in extra:
            row["val_exact_match"] = _exact_match(parts, parts.val_records)
        return row

    return validate


def _score_held_out_splits(cfg: Config, parts: Parts) -> dict[str, float]:
    """dev and test, scored once after training when their files exist: {split}_loss, {split}_ppl and, for
    verb records, {split}_exact_match (results.json and report.md show them)."""
    scores: dict[str, float] = {}
    for split in ("dev", "test"):
        path = getattr(cfg.data, f"{split}_path")
        if path is None or not Path(path).is_file():
            continue
        records = load_split(cfg.data, split)
        batches = encode_split(records, parts.tokenizer, cfg.model.max_seq_len, cfg.data.loss_on)
        scores[f"{split}_loss"], scores[f"{split}_ppl"] = evaluate(parts.model, EvalBatcher(batches, EVAL_BATCH_SIZE))
        if all("form" in r for r in records):
            scores[f"{split}_exact_match"] = _exact_match(parts, records)
    return scores


def _exact_match(parts: Parts, records: list[dict]) -> float:
    """Share of `records` whose greedily decoded form is exactly right, given `verb|T#|`.

    Only ids the tokenizer knows can be chosen: embedding rows past its vocabulary (lab 01 has 64 rows for fewer
    characters) stand for no character, and a barely trained model, or one started from other weights
    (`init_from`), may still rank one of them first.
    """
    model_log_probs = next_log_probs_fn(parts.model, parts.tokenizer.pad_id)
    known = parts.tokenizer.vocab_size
    found = greedy_exact_match(lambda prefixes: model_log_probs(prefixes)[:, :known], records,
                               parts.tokenizer, max_new_tokens=parts.model.config["max_seq_len"])
    return found.rate


def _save_model(model: Module, models_dir: Path, cfg: Config, steps: int) -> str:
    """Write the model file under a temporary name, then rename it after its content hash; return its path
    (relative to the repository when inside it, as results.json records it)."""
    prefix = MODEL_PREFIXES[cfg.model.type]
    tmp = models_dir / f".{prefix}-{os.getpid()}.partial.safetensors"
    meta = {"steps": steps, "rng_seed": cfg.training.rng_seed, "data_seed": cfg.training.data_seed,
            "config_hash": training_config_hash(cfg)}
    digest = save_model_file(tmp, model.state_dict(), model.config, meta)
    final = models_dir / f"{prefix}-{digest[:16]}.safetensors"
    os.replace(tmp, final)
    final = final.resolve()
    return str(final.relative_to(artifacts.REPO_ROOT)) if final.is_relative_to(artifacts.REPO_ROOT) else str(final)


def _write_configs(cfg: Config, out_dir: Path, config_path: str | os.PathLike | None) -> None:
    """config.yaml exactly as given, and config.resolved.yaml (defaults filled, overrides applied)."""
    text = cfg.source.text if cfg.source is not None and cfg.source.text else None
    if text is None and config_path is not None:
        text = Path(config_path).read_text(encoding="utf-8")
    if text is not None:
        atomic_write_text(out_dir / "config.yaml", text)
    atomic_write_text(out_dir / "config.resolved.yaml", resolved_yaml(cfg))


# ------------------------------------------------------------------------------------------------- resume


def _run_dir_of(checkpoint: Path) -> Path | None:
    """The run folder a checkpoint belongs to (…/RUN/checkpoints/step-N.safetensors), if it is in one."""
    return checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else None


def _previous_manifest(checkpoint: Path | None, out_dir: Path) -> dict[str, Any]:
    if checkpoint is None:
        return {}
    path = (_run_dir_of(checkpoint) or out_dir) / "manifest.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def _keep_log_before(source_dir: Path, log_path: Path, step: int) -> None:
    """Keep the log rows of steps before `step`, byte for byte; the resumed run appends the rest.

    Rows after the checkpoint (the run went on after it was saved, then died) would otherwise be written twice.
    A torn last line, from a kill during an append, is dropped too.
    """
    source = source_dir / LOG_FILE
    kept = []
    if source.is_file():
        for line in source.read_text(encoding="utf-8", errors="replace").splitlines():  # a bad byte: a bad row
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and isinstance(row.get("step"), int) and row["step"] < step:
                kept.append(line + "\n")
    atomic_write_text(log_path, "".join(kept))


def _clear_previous_run(out_dir: Path, manager: CheckpointManager) -> None:
    """A new run in a folder that held one: start an empty log and drop the old run's checkpoints, which would
    otherwise be mistaken for this run's (`latest`, pruning, --resume)."""
    for _, path in manager.step_files():
        path.unlink()
    for name in (LATEST_POINTER, BEST_FILE):
        (manager.dir / name).unlink(missing_ok=True)
    atomic_write_text(out_dir / LOG_FILE, "")


def _stopped_error(outcome: dict, cfg: Config, out_dir: Path, config_path, overrides) -> UserError:
    """The one-line explanation of a run that did not finish, with the command that resumes it."""
    status, step = outcome["status"], outcome.get("stopped_at")
    checkpoint = outcome["checkpoint"]
    config = config_path or (cfg.source.path if cfg.source is not None and cfg.source.path else "CONFIG")
    argv = ["python", "scripts/train_mini.py", "--config", str(config), "--out-dir", str(out_dir)]
    for override in overrides:  # "--set key=value", "--seed 3", ...: flag, then its value
        flag, _, value = override.partition(" ")
        if flag != "--out-dir":
            argv += [flag, value]
    command = shlex.join([*argv, "--resume", str(checkpoint)])  # quoted where the shell needs it
    resume = f"resume with: {command}" if checkpoint else "no checkpoint was saved yet: start again"
    if status == DIVERGED:
        # Training is deterministic: resuming the same config from the last good checkpoint diverges again.
        last_good = f"the last good checkpoint is {checkpoint}" if checkpoint else "no checkpoint was saved before it"
        return UserError(f"training diverged: {outcome['messages'][-1]}; {last_good}. "
                         "Lower optimizer.lr_max (or set optimizer.clip) and train again", EXIT_DIVERGED)
    if status == INTERRUPTED:
        signum = signal.Signals[outcome["signal"]]
        return UserError(f"{signum.name}: interrupted after step {step}; checkpoint {checkpoint}; {resume}",
                         128 + signum.value)
    reason = next((m for m in reversed(outcome["messages"]) if m.startswith("halt")), "an alert fired")
    return UserError(f"halted after step {step} ({reason}); checkpoint {checkpoint}; {resume}", EXIT_HALTED)

