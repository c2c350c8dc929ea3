"""One training run, from a validated `Config` to a complete run folder (what `scripts/train_mini.py` and
`minitrain train` both call).

    run_training(cfg, out_dir)
      check the data files (a missing file stops here, before any work and before writing anything)
      take the folder's writer lock (runs/run_lock.py); refuse a folder holding another run unless
      --overwrite (runs/run_dir.py); delete the temporary files a killed run left
      build: tokenizer → records → encoded splits → batchers (data RNG: data_seed)
             → the model (model.type; training RNG: rng_seed) → freeze → pack → optimizer → schedule
      [--resume: restore all five state machines from a checkpoint; keep the log rows before its step]
      write config.yaml (as given), config.resolved.yaml, manifest.json (status "running")
      engine.train(...)  → train_log.jsonl, checkpoints/step-<N>.safetensors + latest
      final: train PPL (one pass over train), val exact match, dev and test (when present) scored, the model file
             <models dir>/<prefix>-<hash>.safetensors, prefix minigpt-phase18 or mlp-lm (output.models_dir /
             --models-dir, default the run folder's models/), results.json, loss_curve.png, dashboard.png,
             metrics.csv, report.md, manifest.json completed
      beside them: environment.yaml, logs/train.log (the console output), and what the watchers of
             minitrain/training/watchers.py write (tracking, system metrics, callbacks' files)

A run that diverges, is interrupted or is halted by an alert still leaves its manifest, log, metrics.csv and
curve, then raises a `UserError` that says what happened and which checkpoint to resume from. The manifest's
status is honest throughout: "running", then "finishing" while the model file and results are written, then how
it ended, including "interrupted" for a SIGTERM while finishing and "failed" (with the error) for a full disk.

What a run is made of is built by `minitrain/training/parts.py`; the dry run (`minitrain/training/plan.py`) builds the
same objects, times a few steps and reports the plan, writing nothing.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minitrain.callbacks import Callback
from minitrain.common.errors import UserError
from minitrain.common.extras import installed
from minitrain.common.io import cannot_write
from minitrain.common.paths import recorded_path
from minitrain.config import Config, resolved_dict
from minitrain.config.datacheck import DataSummary
from minitrain.config.missing_extras import missing_extras
from minitrain.config.problems import ConfigError
from minitrain.config.source import ConfigSource
from minitrain.config.table_check import Fold
from minitrain.models.registry import FAMILIES
from minitrain.monitor.console_log import CONSOLE_LOG, console_log, log_only
from minitrain.monitor.curves import train_val_gap
from minitrain.monitor.html_report import write_html_report
from minitrain.monitor.metrics_files import write_metrics
from minitrain.monitor.progress import Progress
from minitrain.monitor.quality import quality_score
from minitrain.monitor.report import read_log, write_report
from minitrain.parallel.switch import WorkerSwitch
from minitrain.parallel.workers import start_workers
from minitrain.runs import run_dir
from minitrain.runs.model_files import save_model_file
from minitrain.runs.run_files import DIVERGED, FINISHED, FINISHING, INTERRUPTED
from minitrain.runs.run_lock import RunLock
from minitrain.tracking import flatten
from minitrain.training import artifacts, run_start, scoring, stopping
from minitrain.training.cross_validation import cross_validate
from minitrain.training.dashboard import SMOOTHING_WINDOW, plot_dashboard
from minitrain.training.engine import train
from minitrain.training.environment import write_environment
from minitrain.training.finetune import after_training, model_file_state
from minitrain.training.loop_inputs import HIGH_LOSS_AFTER_WARMUP, Bookkeeping, LoopData, LoopSettings
from minitrain.training.parts import Parts, build_parts, training_config_hash, validator_for
from minitrain.training.plan import configure_runtime, resolve_total_steps
from minitrain.training.progressive import train_in_stages
from minitrain.training.resume import (
    check_run_files,
    is_recorded_config,
    previous_manifest,
    resume_checkpoint,
    run_dir_of,
    same_folder,
)
from minitrain.training.table_results import plot_table_curve, table_results
from minitrain.training.text_run import complete_config, data_summary, save_tokenizer, text_results
from minitrain.training.watchers import watch_run

HYPERPARAMETERS = ("model", "optimizer", "scheduler", "training", "lora")  # report.md's resolved sections


# ------------------------------------------------------------------------------------------------- the run


def run_training(
    cfg: Config,
    out_dir: str | os.PathLike,
    *,
    resume: str | os.PathLike | None = None,
    overwrite: bool = False,
    progress: bool = True,
    strict: bool = False,
    config_path: str | os.PathLike | None = None,
    overrides: tuple[str, ...] | list[str] = (),
    models_dir: str | os.PathLike | None = None,
    baseline_path: str | os.PathLike | None = None,
    summary: DataSummary | None = None,
    command: list[str] | tuple[str, ...] | None = None,
    fold: Fold | None = None,
    callbacks: Sequence[Callback] = (),
) -> dict[str, Any]:
    """Train `cfg` into the run folder `out_dir` and return results.json's content (see the module docstring).

    `resume`: a checkpoint file, or a run folder (its checkpoints/latest). Without it, a folder that holds
    another run is refused unless `overwrite`, which deletes that run's files first (minitrain/runs/run_dir.py).
    `progress`: False prints nothing but warnings. `strict` and `overrides` (the `--set`/`--seed` flags) are
    recorded in the manifest; `config_path` is the YAML file copied as config.yaml when the config does not
    carry its own text. `models_dir` receives the final model file (default: the config's output.models_dir,
    else $MINITRAIN_MODELS_DIR, else `out_dir`/models; see `artifacts.models_dir`);
    `baseline_path` is the n-gram results.json (default experiments/14-ngram-baseline/results.json); it is
    compared with only when it scored the same corpus and positions (`artifacts.load_baseline_ppl`).
    `summary` is `check_data(cfg)`'s result when the caller has already run the data checks.
    `command` is the command line that started the run, without any `--resume`: a run that stops says to run
    it again with `--resume CHECKPOINT` (default: the `minitrain train` command for this config and folder).

    With training.cross_validation, the folds are trained one by one (minitrain/training/cross_validation.py); `fold`
    is the one this call trains. `callbacks` (minitrain.callbacks) watch the run beside those its config names.

    The whole run holds the folder's writer lock (minitrain/runs/run_lock.py): a second writer gets one error.
    """
    cfg = complete_config(cfg)  # a pretrained base's architecture filled in (what config.resolved.yaml records)
    if cfg.training.cross_validation is not None and fold is None:
        if resume is not None:
            raise UserError("--resume continues one run; a cross-validation trains one run per fold: train again "
                            "(a fold takes seconds), or resume one fold's folder with a config without "
                            "training.cross_validation", 2)
        return cross_validate(cfg, out_dir, progress=progress, strict=strict, config_path=config_path,
                              overrides=overrides, summary=summary, train_fold=run_training)
    if cfg.distillation.enabled and cfg.distillation.stages:
        return train_in_stages(cfg, out_dir, resume=resume, overwrite=overwrite, progress=progress,
                               models_dir=models_dir, train_stage=run_training, strict=strict, overrides=overrides,
                               summary=summary, baseline_path=baseline_path,
                               command=command or stopping.train_command(cfg, Path(out_dir), config_path, overrides),
                               callbacks=callbacks)
    start_time = time.perf_counter()
    # Every data problem at once, before any work and before any file is written.
    summary = summary if summary is not None else data_summary(cfg)
    out_dir = Path(out_dir)
    checkpoint_path = resume_checkpoint(resume, out_dir, overwrite)
    final_models_dir = artifacts.models_dir(models_dir or cfg.output.models_dir, out_dir)
    # Before any work: a folder that cannot be written fails now, not after training.
    run_start.check_folders({"run folder": out_dir, "models folder": final_models_dir})
    missing = missing_extras(cfg)
    if missing:
        raise ConfigError(missing, cfg.source or ConfigSource())
    if cfg.output.plots and not installed("matplotlib"):  # the `plots` extra: every number is written, no picture
        print("this run draws no plots: matplotlib is not installed (pip install 'minitrain[plots]')", file=sys.stderr)
        cfg = cfg.model_copy(update={"output": cfg.output.model_copy(update={"plots": False})})
    with RunLock(out_dir), stopping.sigterm_raises(), console_log(out_dir / CONSOLE_LOG), ExitStack() as cleanup:
        return _train_into(cfg, out_dir, checkpoint_path, final_models_dir, summary, start_time,
                           overwrite=overwrite, progress=progress, strict=strict, config_path=config_path,
                           overrides=overrides, baseline_path=baseline_path, fold=fold,
                           rerun=command or stopping.train_command(cfg, out_dir, config_path, overrides),
                           callbacks=callbacks, cleanup=cleanup)


def _train_into(cfg: Config, out_dir: Path, checkpoint_path: Path | None, final_models_dir: Path,
                summary: DataSummary, start_time: float, *, overwrite: bool, progress: bool, strict: bool,
                config_path: str | os.PathLike | None, overrides: tuple[str, ...] | list[str],
                baseline_path: str | os.PathLike | None, fold: Fold | None,
                rerun: list[str] | tuple[str, ...], callbacks: Sequence[Callback],
                cleanup: ExitStack) -> dict[str, Any]:
    """run_training's work, with the writer lock held: check the folder, build the parts, start fresh or restore
    the checkpoint, write the files a run starts with, train, finish."""
    config_text = run_start.config_text(cfg, config_path)
    continuing = checkpoint_path is not None and same_folder(run_dir_of(checkpoint_path), out_dir)
    if not continuing:
        run_dir.check_new_run(out_dir, config_text, overwrite)
    run_dir.remove_stale_temp_files(out_dir, final_models_dir, FAMILIES[cfg.model.type].file_prefix)
    runtime = configure_runtime(cfg)

    previous = previous_manifest(checkpoint_path, out_dir)
    written_under = check_run_files(checkpoint_path, cfg, previous, out_dir) if checkpoint_path else None
    total_steps = previous.get("total_steps") if cfg.training.duration and previous else None
    parts = build_parts(cfg, total_steps or resolve_total_steps(cfg, summary), fold, summary.text)
    books = run_start.bookkeeping(cfg, out_dir, parts)
    # Read before any work and any write: a damaged baseline file then costs nothing. The n-gram baseline's PPL
    # is per character: a BPE run's per-token PPL is not comparable with it (experiments/26-bpe-verbs compares
    # tokenizers in bits per character).
    baseline = None if parts.table or cfg.on_pretrained_base or cfg.data.uses_bpe else artifacts.load_baseline_ppl(
        baseline_path or artifacts.DEFAULT_BASELINE_PATH,
        data_manifest_hash=artifacts.data_manifest_hash(cfg.data.train_path), loss_on=cfg.data.loss_on)
    restored, init_from = run_start.start_run(cfg, out_dir, checkpoint_path, parts, books, overwrite, written_under)
    if books.pruning is not None:  # the masks the checkpoint saved (refused when it has none), or boundary 0
        books.pruning.begin(parts.model, restored.get("pruning", {} if checkpoint_path else None), checkpoint_path)
    save_tokenizer(cfg, parts.tokenizer, out_dir)

    if is_recorded_config(cfg, out_dir):  # `train --resume RUN` without a config: the run's files stay as they are
        overrides = previous.get("overrides", overrides)
        # A new stopping point: recorded after the run's own overrides.
        if written_under is None or written_under[0] != books.checkpointing.config_hash:
            overrides = cfg.source.overrides = (*overrides, *cfg.source.overrides)
            run_start.write_configs(cfg, out_dir, None)
    else:
        run_start.write_configs(cfg, out_dir, config_text)
    write_environment(out_dir)
    switch = _worker_switch(cfg, parts, cleanup)
    books.callbacks = watch_run(cfg, callbacks, cleanup, model=parts.model, tokenizer=parts.tokenizer,
                                records=parts.val_records, run_dir=out_dir,
                                resume_step=books.start.step if books.start else None,
                                config_hash=books.checkpointing.config_hash,
                                apply_setting=switch.apply if switch else None)
    if books.callbacks and checkpoint_path is not None:
        books.callbacks.load_state_dict(restored.get("callbacks", []))
    books.manifest = run_start.run_manifest(cfg, parts, books, previous, checkpoint_path, continuing=continuing,
                                            init_from=init_from, strict=strict, overrides=overrides, runtime=runtime)
    run = _Run(cfg, out_dir, parts, books, final_models_dir, baseline, rerun, quiet=not progress,
               start_time=start_time, earlier_wall=float(books.manifest.get("wall_seconds") or 0.0), switch=switch)
    try:
        return _finish(run, _run_loop(run, summary))
    except UserError:
        raise  # the manifest already says how the run ended
    except Exception as e:  # a bug (or a refusal from the core): the manifest must not go on saying "running"
        stopping.failed(e, out_dir, books.manifest, books.checkpointing.manager)
        raise


@dataclass
class _Run:
    """What the loop and the finishing files of one run share, once its parts are built."""

    cfg: Config
    out_dir: Path
    parts: Parts
    books: Bookkeeping  # the manifest, the log, the checkpoints, the monitors and watchers
    models_dir: Path  # where the final model file goes
    baseline: float | None  # the n-gram val PPL, when it scored the same corpus and positions
    rerun: list[str] | tuple[str, ...]  # the command that started the run: `--resume` is added to it
    quiet: bool
    start_time: float
    earlier_wall: float  # the wall seconds of the runs this one continues
    switch: WorkerSwitch | None = None  # `runtime.threads: measure` with workers allowed: starts and stops them

    def wall_seconds(self) -> float:
        """Wall seconds of the whole run, over all its resumes."""
        return round(self.earlier_wall + time.perf_counter() - self.start_time, 3)


# ------------------------------------------------------------------------------------------------- before the loop


def _worker_switch(cfg: Config, parts: Parts, cleanup: ExitStack) -> WorkerSwitch | None:
    """With `runtime.threads: measure` and runtime.data_parallel, the workers are a candidate of the measured
    choice, started and stopped by this switch (closed with the run, however it ends); else None."""
    if cfg.runtime.threads != "measure" or cfg.runtime.data_parallel is None:
        return None
    switch = WorkerSwitch(parts.model, cfg.training.grad_accumulation, cfg.training.batch_size,
                          parts.train_split.input.shape[1], timeout=cfg.runtime.data_parallel.timeout)
    cleanup.callback(switch.close)
    switch.start(cfg.runtime.data_parallel.workers)
    return switch


# ------------------------------------------------------------------------------------------------- the loop


def high_loss(vocab_size: int) -> float:
    """The high-loss warning's threshold: lab 01's 4.0 for its 64 ids, the same share of ln(V) for V ids."""
    return HIGH_LOSS_AFTER_WARMUP * (math.log(vocab_size) / math.log(64))  # x / x is exactly 1: 4.0 for 64


def _loop_settings(cfg: Config, parts: Parts, summary: DataSummary) -> LoopSettings:
    """The config's training numbers, resolved (validation cadence from epochs, warm-up from a ratio)."""
    return LoopSettings(
        parts.total_steps, cfg.resolve_val_every(summary.steps_per_epoch), cfg.training.log_every,
        cfg.training.rng_seed, clip_norm=cfg.clip_norm, clip_value=cfg.clip_value,
        grad_accumulation=cfg.training.grad_accumulation, warmup_steps=cfg.resolve_warmup(parts.total_steps),
        high_loss=high_loss(parts.model.config.get("vocab_size", 64)), schedule_metric=cfg.scheduler.metric,
        duration_seconds=cfg.duration_seconds, val_offset=int(cfg.training.val_every_epoch))


def _run_loop(run: _Run, summary: DataSummary) -> dict[str, Any]:
    """engine.train on the run's parts; its outcome. A second Ctrl-C or a failed write still leaves an honest
    manifest."""
    cfg, parts, books = run.cfg, run.parts, run.books
    shown = not run.quiet and cfg.monitoring.progress != "none"
    log = None if shown else log_only()  # nothing on the screen: the plain lines still go to logs/train.log
    books.progress = Progress(parts.total_steps, "log" if log else cfg.monitoring.progress, stream=log,
                              every=cfg.training.log_every, quiet=not shown and log is None,
                              start_step=books.start.step if books.start else 0)
    try:
        parallel = None if run.switch else cfg.runtime.data_parallel  # the switch starts its own workers
        with start_workers(parallel, parts.model, cfg.training.grad_accumulation, cfg.training.batch_size,
                           parts.train_split.input.shape[1]) as workers:
            data = LoopData(parts.batcher, parts.val_batches, validator_for(cfg, parts), parts.task, workers)
            if run.switch:
                run.switch.attach(data)
            return train(parts.model, parts.optimizer, parts.scheduler, data, _loop_settings(cfg, parts, summary),
                         books)
    except KeyboardInterrupt:
        # A second Ctrl-C stops at once, mid-step: the manifest must not go on saying "running"; the last
        # checkpoint saved (`--resume` the run folder) is where the run can go on.
        manager = books.checkpointing.manager
        latest = manager.latest()
        saved = next((step for step, path in manager.step_files() if path == latest), None)
        artifacts.complete_manifest(books.manifest_path, books.manifest, status=INTERRUPTED, steps_done=saved,
                                    checkpoint=None if latest is None else str(latest))
        raise
    except (UserError, MemoryError) as e:  # the disk filled up, the folder became read-only, ...
        raise stopping.failed(e, run.out_dir, books.manifest, books.checkpointing.manager) from None
    finally:
        books.progress.close()
        if run.switch:  # like start_workers' pool: no worker outlives the loop
            run.switch.close()


# ------------------------------------------------------------------------------------------------- after the loop


def _finish(run: _Run, outcome: dict[str, Any]) -> dict[str, Any]:
    """After the loop: metrics.csv and the curves; then, for a run that finished, the model file, results.json
    and the report (returned: results.json's content), or for one that stopped, the error that says how to
    resume it. A signal or a failed write while finishing still leaves an honest manifest."""
    books = run.books
    finished = outcome["status"] in FINISHED
    try:
        if finished:  # training is done; until the model file and results.json exist, the run is not
            artifacts.complete_manifest(books.manifest_path, books.manifest, status=FINISHING)
        rows = _write_curves(run)
        results = _final_scores(run, outcome) if finished else None
        finished = outcome["status"] in FINISHED  # a final score that is NaN or infinite: diverged after all
        if not finished:
            artifacts.complete_manifest(books.manifest_path, books.manifest, wall_seconds=run.wall_seconds())
            if books.callbacks:  # the run is over, its files written
                books.callbacks.train_end(outcome, run.parts.model, quiet=run.quiet)
            raise stopping.stopped_error(outcome, run.rerun)
        return _write_results(run, outcome, rows, results)
    except KeyboardInterrupt as stop:
        if not finished:
            raise
        # Ctrl-C or SIGTERM after the last step, while the run is being finished: the final checkpoint holds the
        # trained state, and resuming from it runs no step, only this finishing part.
        name = "SIGTERM" if isinstance(stop, stopping.Terminated) else "SIGINT"
        outcome.update(status=INTERRUPTED, signal=name, stopped_at=outcome["steps_done"] - 1)
        artifacts.complete_manifest(books.manifest_path, books.manifest, status=INTERRUPTED, signal=name,
                                    stopped_at=outcome["stopped_at"])
        raise stopping.stopped_error(outcome, run.rerun) from None
    except (UserError, MemoryError) as e:
        if not finished:
            raise
        raise stopping.failed(e, run.out_dir, books.manifest, books.checkpointing.manager) from None


def _write_curves(run: _Run) -> list[dict[str, Any]]:
    """metrics.csv, loss_curve.png and (a language model's) dashboard.png from the log (the plots unless
    output.plots is false); return its rows."""
    cfg, parts, log_path = run.cfg, run.parts, run.books.log_path
    rows = read_log(log_path)
    write_metrics(rows, run.out_dir, cfg.output.metrics)
    if not cfg.output.plots:
        return rows
    if parts.table is None:
        val = "val (held-out verbs)" if parts.text is None else "val (held-out lines)"  # what the split holds
        artifacts.plot_loss_curve(run.out_dir / "loss_curve.png", log_path, run.baseline, type(parts.model).__name__,
                                  val_label=val)
        plot_dashboard(run.out_dir / "dashboard.png", rows, baseline_ppl=run.baseline, clip_norm=cfg.clip_norm,
                       val_label=val)
    else:
        plot_table_curve(run.out_dir / "loss_curve.png", log_path, type(parts.model).__name__)
    return rows


def _final_scores(run: _Run, outcome: dict[str, Any]) -> dict[str, Any]:
    """results.json's scores of a finished run, before its model file is written ("model_path" is filled in with
    it). A loss or perplexity that is NaN or infinite (weights that overflow, say, resumed from a checkpoint)
    makes the run a diverged one: `outcome` and the manifest say so, and no model file is written."""
    cfg, parts, books = run.cfg, run.parts, run.books
    if parts.table is not None:
        results = table_results(cfg, parts, outcome, run.out_dir)
    elif parts.text is not None:
        results = text_results(cfg, parts.model, parts.text, outcome)
    else:
        results = scoring.language_model_results(cfg, parts.model, parts.tokenizer, parts.train_split,
                                                 parts.val_records, outcome, run.baseline)
    bad = artifacts.non_finite_scores(results)
    if bad:
        step = outcome["steps_done"] - 1
        outcome.update(status=DIVERGED, stopped_at=step)
        outcome["messages"].append(f"{bad} in the final evaluation after step {step}")
        artifacts.complete_manifest(books.manifest_path, books.manifest, status=DIVERGED, stopped_at=step)
    return results


def _write_results(run: _Run, outcome: dict[str, Any], rows: list[dict[str, Any]],
                   results: dict[str, Any]) -> dict[str, Any]:
    """A finished run's model file, results.json (`results`, its scores), report.md (and report.html) and
    completed manifest; return results.json's content."""
    cfg, parts, out_dir, manifest = run.cfg, run.parts, run.out_dir, run.books.manifest
    model_path, model_sha256 = _save_model(parts, run.models_dir, cfg, outcome["steps_done"])
    wall = results["wall_seconds"] = run.wall_seconds()
    results.update(model_path=model_path, run_id=manifest["run_id"], model_sha256=model_sha256)
    if parts.table is None:
        results.update(after_training(cfg, parts.model, out_dir, parts.tokenizer, parts.train_records,
                                      parts.val_records))
    artifacts.atomic_write_json(out_dir / "results.json", results)
    quality = quality_score(rows, results) if any("loss" in row for row in rows) else None
    watch = run.books.callbacks
    resolved = resolved_dict(cfg)
    write_report(out_dir / "report.md", title=cfg.name or out_dir.name, results=results, quality=quality,
                 plot="loss_curve.png" if cfg.output.plots else None, gaps=train_val_gap(rows, SMOOTHING_WINDOW),
                 sections=watch.report_lines() if watch else (),
                 hyperparameters=flatten({k: resolved[k] for k in HYPERPARAMETERS if k in resolved}))
    if cfg.output.report.format == "html":
        write_html_report(out_dir / "report.md", out_dir / "report.html")
    artifacts.complete_manifest(run.books.manifest_path, manifest, status=outcome["status"], wall_seconds=wall,
                                model_path=model_path, model_sha256=model_sha256,
                                quality=None if quality is None else quality.as_dict())
    if watch:
        watch.train_end(outcome, parts.model, results, quiet=run.quiet)
    return results


def _save_model(parts: Parts, models_dir: Path, cfg: Config, steps: int) -> tuple[str, str]:
    """Write the model file under a temporary name, then rename it after its content hash; return its path (as
    results.json records it: relative to the working folder, manifest.json's working_dir, when inside it) and the
    file's sha256. A table model's file also holds its pipeline (task, classes, fitted preprocessing), which
    `predict` applies; a LoRA run's holds the adapters."""
    model = parts.model
    prefix = FAMILIES[cfg.model.type].file_prefix + ("-lora" if cfg.lora.enabled else "")
    tmp = models_dir / f".{prefix}-{os.getpid()}.partial.safetensors"
    meta = {"steps": steps, "rng_seed": cfg.training.rng_seed, "data_seed": cfg.training.data_seed,
            "config_hash": training_config_hash(cfg)}
    if parts.table is not None:
        meta["pipeline"] = parts.table.pipeline.to_dict()
    digest = save_model_file(tmp, model_file_state(model), model.config, meta)
    final = models_dir / f"{prefix}-{digest[:16]}.safetensors"
    try:
        os.replace(tmp, final)
    except OSError as e:  # a folder of that name, say
        tmp.unlink(missing_ok=True)
        raise cannot_write(final, e) from None
    return recorded_path(final), digest


