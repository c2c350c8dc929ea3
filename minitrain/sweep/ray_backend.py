"""The Ray backend (`--backend ray`, minitrain[ray]): the same trials, scheduled by Ray Tune on a Ray cluster.

    ray.init(address)                 an existing cluster (`auto`, `ray://head:10001`), else a local instance with
                                      `workers` CPUs
    tune.Tuner(trainable, param_space={"job": grid_search(jobs)}, TuneConfig(scheduler=ASHA...))

The trainable is a function: it runs `trials.run_job` (so a trial is the same run folder as with the local
backend, bit for bit) with one more callback, `TuneReporter`, which reports every validation to Tune. Every
report carries the sweep's metric, which Tune is told (TuneConfig metric and mode), so Tune's own best trial is
the sweep's: a validation metric (val_ppl) at each validation; a metric scored once after training (dev_ppl, a
key of results.json) in one report of the finished run's results, since no validation has it. With
`--scheduler asha`, Tune's ASHAScheduler compares the trials at those reports and stops the poor ones: Tune
ends a function trainable by raising SystemExit inside `tune.report`; the reporter turns that into a clean stop
of the loop after the step (status early_stopped, a checkpoint that remembers the stop).

Tune does not wait for that: its FunctionTrainable.stop() releases the training thread and returns at once, and
Tune then ends the actor, so the thread is cut off anywhere between its report and its last file (on a busy
machine, before it even woke up). So the scheduler records the step of every stop it decides (in this process,
where the Tune controller runs), and after the experiment the driver finishes each such trial itself, once no
process holds its folder: resumed from the folder's last checkpoint and stopped after that same step, it ends in
the files the actor would have written. (With a `ray://` client address the controller runs on the cluster; the
driver then finishes only the trials whose folders recorded the stop: runner._trained_not_finished.)

Tune catches Ctrl-C while it runs (its own handler: the trials stop, the driver raises KeyboardInterrupt) and
leaves that handler installed when it returns; run_ray puts the caller's back, so a Ctrl-C after a sweep still
interrupts the process that ran it.

On a cluster, every node needs minitrain installed and the repository (data, base config) and the sweep folder
at the same path: a shared file system, as Ray Tune itself needs for a multi-node storage_path (docs/sweeps.md).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from minitrain.callbacks import Callback, Context
from minitrain.common.extras import require
from minitrain.runs.run_lock import writer_of
from minitrain.sweep.space import VAL_ROW_METRICS, SchedulerSpec
from minitrain.sweep.trials import RESULT_KEYS, TrialJob, read_json, run_job, trial_state

ASHA_STOP = "stopped by the sweep's ASHA scheduler (Ray Tune)"
# How long the driver waits for a stopped trial's actor to let go of the folder; after that the run lock's own
# error names the process still holding it. Tune's own limit for an actor to stop (TUNE_FORCE_TRIAL_CLEANUP_S).
RELEASE_WAIT_SECONDS = 600.0


class TuneReporter(Callback):
    """Reports each validation's values, and the step, to Ray Tune when they include the sweep's `metric` (Tune
    refuses a report without the metric it was told); a stop from Tune becomes a clean stop."""

    def __init__(self, metric: str) -> None:
        self.metric = metric

    def on_validation_end(self, ctx: Context) -> None:
        from ray import tune

        values = {key: value for key, value in ctx.metrics.items() if key.startswith("val_")}
        if self.metric not in values:
            return  # scored after training (dev_ppl): _trainable reports it with the results
        try:
            tune.report({"step": ctx.step, **values})
        except SystemExit:  # Tune's way of ending a function trainable (its scheduler said stop)
            ctx.request_stop(ASHA_STOP)


class StopAfter(Callback):
    """Ends the run after step `step` (0-based), as `ctx.request_stop(reason)` does: how the driver finishes a
    trial that Tune's scheduler stopped at its report of that step."""

    def __init__(self, step: int, reason: str) -> None:
        self.step, self.reason = step, reason

    def on_step_end(self, ctx: Context) -> None:
        if ctx.step >= self.step:
            ctx.request_stop(self.reason)


def finish_stopped(job: TrialJob, step: int) -> str | None:
    """Finish a trial the scheduler stopped at step `step`, as the module docstring says (run_job's result): its
    actor may still be ending, or finishing the run itself, so only once no process writes its folder."""
    deadline = time.monotonic() + RELEASE_WAIT_SECONDS
    while writer_of(job.run_dir) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    if trial_state(job.run_dir) == "done":
        return None
    return run_job(job, callbacks=[StopAfter(step, ASHA_STOP)])


def _recording_asha(stops: dict[str, int], **options: Any) -> Any:
    """Ray Tune's ASHAScheduler, recording in `stops` (by trial id) the step of the report at which it stopped
    each trial."""
    from ray.tune.schedulers import ASHAScheduler, TrialScheduler

    class RecordingASHA(ASHAScheduler):
        def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
            action = super().on_trial_result(tune_controller, trial, result)
            if action == TrialScheduler.STOP:
                stops[trial.config["job"]["trial_id"]] = int(result["step"])
            return action

    return RecordingASHA(**options)


def _announcing(by_id: dict[str, TrialJob], stops: dict[str, int], on_done: Callable[[TrialJob, str | None], None],
                announced: set[str]) -> Any:
    """A Tune callback that hands each trial that completes to `on_done` at once (its table row and progress
    line), rather than when the whole experiment ends; those the scheduler stopped wait for finish_stopped."""
    from ray import tune

    class Announce(tune.Callback):
        def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            trial_id = trial.config["job"]["trial_id"]
            if trial_id not in stops:
                announced.add(trial_id)
                on_done(by_id[trial_id], None)

    return Announce()


def _trainable(config: dict[str, Any]) -> None:
    """One trial: the run, its validations reported; then, for a metric only the results have, those results."""
    from ray import tune

    job = TrialJob(**{**config["job"], "overrides": tuple(config["job"]["overrides"])})
    metric = config["metric"]
    run_job(job, callbacks=[TuneReporter(metric)])
    results = read_json(job.run_dir / "results.json")
    if metric not in VAL_ROW_METRICS and isinstance(results.get(metric), int | float):
        numbers = {key: results[key] for key in RESULT_KEYS if isinstance(results.get(key), int | float)}
        tune.report({"step": results["steps"], **numbers})


def run_ray(jobs: Sequence[TrialJob], *, workers: int | None, address: str | None, metric: str, mode: str,
            scheduler: SchedulerSpec | None, total_steps: int, storage: Path,
            on_done: Callable[[TrialJob, str | None], None]) -> None:
    """Run every job on Ray Tune (a local Ray instance with `workers` CPUs unless `address` names a cluster)."""
    if not jobs:
        return
    # Tune's older console reporter honours verbose=0; the newer one prints its tables whatever it is told.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    ray = require("ray", "ray", "--backend ray")
    require("ray.tune", "ray", "--backend ray")
    from ray import tune

    started, interrupt = not ray.is_initialized(), signal.getsignal(signal.SIGINT)
    if started:
        local = {"num_cpus": workers, "include_dashboard": False} if address is None else {}
        ray.init(address=address, log_to_driver=False, configure_logging=False, **local)
    try:
        stops: dict[str, int] = {}  # trial id -> the step of the report the scheduler stopped it at
        asha = None if scheduler is None else _recording_asha(
            stops, time_attr="step", max_t=total_steps, reduction_factor=scheduler.reduction_factor,
            grace_period=scheduler.grace_period or max(total_steps // 4, 1))
        by_id, announced = {job.trial_id: job for job in jobs}, set()
        tuner = tune.Tuner(
            tune.with_resources(_trainable, {"cpu": 1}),
            param_space={"job": tune.grid_search([dataclasses.asdict(job) for job in jobs]), "metric": metric},
            tune_config=tune.TuneConfig(
                metric=metric, mode=mode, scheduler=asha,
                max_concurrent_trials=workers, reuse_actors=False,
                trial_name_creator=lambda trial: trial.config["job"]["trial_id"],
                trial_dirname_creator=lambda trial: trial.config["job"]["trial_id"]),
            run_config=tune.RunConfig(storage_path=str(storage.resolve()), name="tune", verbose=0,
                                      callbacks=[_announcing(by_id, stops, on_done, announced)]),
        )
        for result in tuner.fit():
            job = by_id[result.config["job"]["trial_id"]]
            if job.trial_id in stops:  # whatever became of its actor, the trial ends where the scheduler said
                on_done(job, finish_stopped(job, stops[job.trial_id]))
            elif job.trial_id not in announced:  # failed (or announced on a cluster's controller, not here)
                on_done(job, None if result.error is None else f"Ray Tune: {result.error}")
    finally:
        if signal.getsignal(signal.SIGINT) is not interrupt:  # Tune's (it installs it only in the main thread)
            signal.signal(signal.SIGINT, interrupt)
        if started:
            ray.shutdown()
