"""Running a sweep: check every trial's config, train the trials that are not done, write the results.

    run_sweep(spec)          # what `minitrain sweep` calls; returns (summary, rows)

    <out_dir>/sweep.json, sweep.csv, sweep_curves.png, sweep_params.png      results.py
    <out_dir>/trials/<id>/        one run folder per trial (trials.py)
    <out_dir>/models/             the trials' final model files
    <out_dir>/mlflow.db, tensorboard/, tracking.jsonl   when the base config tracks: one experiment, a run per trial
    <out_dir>/ray/                Ray Tune's own records (--backend ray)

A sweep folder has one writer, like a run folder: the sweep holds its `.run.lock` (runs/run_lock.py) from the
first check to the last file, so a second sweep on the same folder is refused (exit 2) before it changes
anything. A folder whose sweep.json is another sweep's table (another base or space) is refused too, rather
than having its table replaced. Before any training, every trial's config is loaded and its data checked, so a
typo in a swept key stops the sweep at once, naming the trial. The table is rewritten whenever a trial ends, so
it is current even while the sweep runs or after it was stopped, and `progress` hears one line per trial.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minitrain.common.errors import UserError
from minitrain.common.extras import require
from minitrain.common.registry import load
from minitrain.config import Config, load_config
from minitrain.config.datacheck import check_data
from minitrain.config.fields import default_name
from minitrain.config.observing import TRACKER_BACKENDS
from minitrain.config.problems import ConfigError
from minitrain.config.spec_shape import DRAWN_SEEDS
from minitrain.runs.run_files import FINISHING
from minitrain.runs.run_lock import RunLock
from minitrain.sweep.results import best_trial, plot_sweep, write_table
from minitrain.sweep.space import SweepSpec, Trial, expand
from minitrain.sweep.trials import TrialJob, read_json, run_job, trial_row, trial_state
from minitrain.tracking import default_uri

EXIT_INTERRUPTED = 130


def sweep_name(spec: SweepSpec, sweep_file: str | None, base: Config) -> str:
    """`name`, else the sweep file's name (its folder's for a file called sweep.yaml), else <base name>-sweep."""
    if spec.name:
        return spec.name
    if sweep_file:
        path = Path(sweep_file).resolve()
        return default_name(path.parent.name if path.stem == "sweep" else path.stem)
    return f"{base.name or Path(spec.base).stem}-sweep"


def _tracking_overrides(base: Config, trial: Trial, name: str, sweep_dir: Path) -> list[str]:
    """A tracked base config: every trial is a run (named by its id) of one experiment (the sweep's), stored in
    the sweep folder unless the config names a store."""
    tracking = base.monitoring.tracking
    if tracking is None or not tracking.enabled:
        return []
    sets = [f"monitoring.tracking.run_name={trial.id}"]
    if tracking.experiment is None:
        sets.append(f"monitoring.tracking.experiment={name}")
    if tracking.uri is None:
        sets.append(f"monitoring.tracking.uri={default_uri(tracking.backend, sweep_dir.resolve())}")
    return sets


def build_jobs(spec: SweepSpec, trials: list[Trial], base: Config, name: str, sweep_dir: Path,
               drawn_seed: int | None = None) -> list[TrialJob]:
    """Each trial's config: the base, the sweep's `set`, the trial's values and seed (else `drawn_seed`, the one
    seed a base with `seed: null` drew for the whole sweep), its folder and the tracking placement."""
    shared = [f"{key}={json.dumps(value)}" for key, value in spec.set.items()]  # JSON is YAML: it reads back as itself
    jobs = []
    for trial in trials:
        values: dict[str, Any] = {"output.dir": str(sweep_dir / "trials" / trial.id),
                                  "output.models_dir": str(sweep_dir / "models")}
        seed = trial.seed if trial.seed is not None else drawn_seed
        if seed is not None:
            values["training.rng_seed"] = seed
        overrides = (*shared, *trial.overrides(), *_tracking_overrides(base, trial, name, sweep_dir))
        jobs.append(TrialJob(trial.id, spec.base, overrides, values, os.getcwd()))
    return jobs


def check_jobs(jobs: list[TrialJob]) -> list[Config]:
    """Every trial's config, validated, with its data checked (once per distinct data section), and any run
    already in its folder trained under that same config; a UserError naming the first trial that fails."""
    from minitrain.training.parts import training_config_hash  # the engine: the sweep is about to train anyway

    configs, checked = [], {}
    for job in jobs:
        try:
            cfg = job.config()
            key = cfg.data.model_dump_json() + cfg.model.model_dump_json() + cfg.training.model_dump_json()
            checked[key] = checked[key] if key in checked else check_data(cfg)
        except ConfigError as exc:
            raise UserError(f"trial {job.trial_id}: {exc}", exc.exit_code) from None
        recorded = read_json(job.run_dir / "manifest.json").get("config_hash")
        if recorded is not None and recorded != training_config_hash(cfg):
            raise UserError(f"trial {job.trial_id}: {job.run_dir} holds a run of another config (another base, set "
                            "or value); give the sweep another out_dir, or remove that folder", 2)
        configs.append(cfg)
    return configs


def _prepare_tracker(cfg: Config) -> None:
    """Run the tracker's `prepare` (its record's), once, before trials in parallel processes would race to."""
    tracking = cfg.monitoring.tracking
    if tracking is not None and tracking.enabled and (prepare := TRACKER_BACKENDS[tracking.backend].prepare):
        load(prepare)(tracking)


def run_sweep(spec: SweepSpec, sweep_file: str | None = None, progress: Callable[[str], None] | None = None
              ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Train the sweep's trials that are not done yet and write its results; returns (summary, rows).
    `progress` (the command's print) hears a line per trial as it ends."""
    if spec.backend == "ray":  # before anything is written
        require("ray.tune", "ray", "--backend ray")
    base = load_config(spec.base)
    name = sweep_name(spec, sweep_file, base)
    sweep_dir = Path(spec.out_dir or f"runs/sweeps/{name}")
    with RunLock(sweep_dir):  # a second sweep on this folder stops here; a refused one leaves no folder
        return _run_locked(spec, base, name, sweep_dir, progress or (lambda line: None))


def sweep_seed(base: Config, sweep_dir: Path) -> int | None:
    """The seed of a base whose `seed: null` drew one: drawn once per sweep, so trials differ only by the space
    (a seed per trial would mix the seed's effect into every comparison); a sweep run again in its folder keeps
    the one its table records. None when the base's seed is written."""
    if base.source.drawn_seed is None:
        return None
    recorded = read_json(sweep_dir / "sweep.json").get("drawn_seed")
    return recorded if type(recorded) is int and 0 <= recorded < DRAWN_SEEDS else base.source.drawn_seed


def check_same_sweep(sweep_dir: Path, summary: dict[str, Any]) -> None:
    """Refuse a folder whose table is another sweep's (its base or space differ): running there would replace
    that table with this one's."""
    recorded = read_json(sweep_dir / "sweep.json")
    if recorded and (recorded.get("base"), recorded.get("space")) != (summary["base"], summary["space"]):
        raise UserError(f"{sweep_dir} holds the table of another sweep (another base or space); give this sweep "
                        f"another out_dir (--out-dir), or remove {sweep_dir / 'sweep.json'} to replace it", 2)


def _run_locked(spec: SweepSpec, base: Config, name: str, sweep_dir: Path, progress: Callable[[str], None]
                ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    workers = spec.workers or os.cpu_count() or 1
    space = spec.model_dump(mode="json", include={"grid", "random", "samples", "sampler_seed", "seeds", "set"})
    summary = {"name": name, "out_dir": str(sweep_dir), "base": spec.base, "metric": spec.metric,
               "mode": spec.mode, "backend": spec.backend, "workers": workers, "space": space}
    check_same_sweep(sweep_dir, summary)
    drawn = sweep_seed(base, sweep_dir)
    if drawn is not None:
        summary["drawn_seed"] = drawn
        progress(f"sweep {name}: seed: null: every trial without a seed of its own trains with seed {drawn}, "
                 f"drawn once for this sweep (recorded in {sweep_dir / 'sweep.json'})")
    trials = expand(spec)
    jobs = build_jobs(spec, trials, base, name, sweep_dir, drawn)
    configs = check_jobs(jobs)
    if configs:
        _prepare_tracker(configs[0])
    errors: dict[str, str] = {}

    def table() -> list[dict[str, Any]]:
        return [trial_row(t, job.run_dir, sweep_dir, errors.get(t.id)) for t, job in zip(trials, jobs, strict=True)]

    def on_done(job: TrialJob, error: str | None) -> None:
        if error:
            errors[job.trial_id] = error
        rows = table()
        write_table(sweep_dir, summary, rows)
        ended.add(job.trial_id)
        progress(progress_line(next(r for r in rows if r["trial"] == job.trial_id), spec.metric,
                               len(ended) + len(jobs) - len(pending), len(jobs)))

    pending = [job for job in jobs if trial_state(job.run_dir) != "done"]
    ended: set[str] = set()
    progress(f"sweep {name}: {len(jobs)} trials, {len(jobs) - len(pending)} already done, {len(pending)} to train "
             f"({spec.backend}, folder {sweep_dir})")
    start = time.perf_counter()
    write_table(sweep_dir, summary, table())
    try:
        if spec.backend == "ray":
            from minitrain.sweep.ray_backend import run_ray

            steps = configs[0].resolve_steps(check_data(configs[0]).steps_per_epoch) or 1
            run_ray(pending, workers=spec.workers, address=spec.address, metric=spec.metric, mode=spec.mode,
                    scheduler=spec.scheduler, total_steps=steps, storage=sweep_dir / "ray", on_done=on_done)
            for job in pending:  # a trial whose actor died after its last step, before its final files
                if trial_state(job.run_dir) == "resumable" and _trained_not_finished(job.run_dir):
                    on_done(job, run_job(job))
        else:
            from minitrain.sweep.process_pool import run_local

            run_local(pending, workers, on_done)
    except KeyboardInterrupt:
        summary["wall_seconds"] = round(time.perf_counter() - start, 3)
        write_table(sweep_dir, summary, table())
        raise UserError(f"interrupted: the sweep's table is {sweep_dir / 'sweep.json'}; run the same command "
                        "again to train the trials that are not done", EXIT_INTERRUPTED) from None
    summary["wall_seconds"] = round(time.perf_counter() - start, 3)
    rows = table()
    best = best_trial(rows, spec.metric, spec.mode)
    summary["best"] = None if best is None else best["trial"]
    write_table(sweep_dir, summary, rows)
    plot_sweep(sweep_dir, rows, spec.metric, name)
    return summary, rows


def progress_line(row: dict[str, Any], metric: str, done: int, total: int) -> str:
    """`trial 3/9 002-lr_max=0.001: completed, dev_ppl 1.204, 2000 steps, 61.2 s` (what is known of it)."""
    value = row.get(metric)
    parts = [row["status"], *([f"{metric} {value:.4g}"] if isinstance(value, int | float) else []),
             *([f"{row['steps']} steps"] if row.get("steps") is not None else []),
             *([f"{row['wall_seconds']:.1f} s"] if isinstance(row.get("wall_seconds"), int | float) else [])]
    return f"trial {done}/{total} {row['trial']}: {', '.join(parts)}"


def _trained_not_finished(run_dir: Path) -> bool:
    """Training ended (Tune's scheduler stopped it, or it ran its steps) but the actor was gone before the model
    file and results.json were written: resuming from the final checkpoint runs no step, only the finishing."""
    return read_json(run_dir / "manifest.json").get("status") in ("early_stopped", FINISHING)
