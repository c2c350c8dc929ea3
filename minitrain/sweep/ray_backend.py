"""The Ray backend (`--backend ray`, minitrain[ray]): the same trials, scheduled by Ray Tune on a Ray cluster.

    ray.init(address)                 an existing cluster (`auto`, `ray://head:10001`), else a local instance with
                                      `workers` CPUs
    tune.Tuner(trainable, param_space={"job": grid_search(jobs)}, TuneConfig(scheduler=ASHA...))

The trainable is a function: it runs `trials.run_job` (so a trial is the same run folder as with the local
backend, bit for bit) with one more callback, `TuneReporter`, which reports every validation to Tune. With
`--scheduler asha`, Tune's ASHAScheduler compares the trials at those reports and stops the poor ones: Tune
ends a function trainable by raising SystemExit inside `tune.report`; the reporter turns that into a clean stop
of the loop after the step (status early_stopped, a checkpoint that remembers the stop). If Tune's actor is gone
before the run has written its final files, the driver finishes the trial afterwards from that checkpoint.

On a cluster, every node needs minitrain installed and the repository (data, base config) and the sweep folder
at the same path: a shared file system, as Ray Tune itself needs for a multi-node storage_path (docs/sweeps.md).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from minitrain.callbacks import Callback, Context
from minitrain.common.extras import require
from minitrain.sweep.space import SchedulerSpec
from minitrain.sweep.trials import TrialJob, run_job

ASHA_STOP = "stopped by the sweep's ASHA scheduler (Ray Tune)"


class TuneReporter(Callback):
    """Reports each validation's values, and the step, to Ray Tune; a stop from Tune becomes a clean stop."""

    def on_validation_end(self, ctx: Context) -> None:
        from ray import tune

        values = {key: value for key, value in ctx.metrics.items() if key.startswith("val_")}
        try:
            tune.report({"step": ctx.step, **values})
        except SystemExit:  # Tune's way of ending a function trainable (its scheduler said stop)
            ctx.request_stop(ASHA_STOP)


def _trainable(config: dict[str, Any]) -> None:
    job = config["job"]
    run_job(TrialJob(**{**job, "overrides": tuple(job["overrides"])}), callbacks=[TuneReporter()])


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
    from ray.tune.schedulers import ASHAScheduler

    started = not ray.is_initialized()
    if started:
        local = {"num_cpus": workers, "include_dashboard": False} if address is None else {}
        ray.init(address=address, log_to_driver=False, configure_logging=False, **local)
    try:
        asha = None if scheduler is None else ASHAScheduler(
            time_attr="step", max_t=total_steps, grace_period=scheduler.grace_period or max(total_steps // 4, 1),
            reduction_factor=scheduler.reduction_factor)
        tuner = tune.Tuner(
            tune.with_resources(_trainable, {"cpu": 1}),
            param_space={"job": tune.grid_search([dataclasses.asdict(job) for job in jobs])},
            tune_config=tune.TuneConfig(
                metric=metric if asha else None, mode=mode if asha else None, scheduler=asha,
                max_concurrent_trials=workers, reuse_actors=False,
                trial_name_creator=lambda trial: trial.config["job"]["trial_id"],
                trial_dirname_creator=lambda trial: trial.config["job"]["trial_id"]),
            run_config=tune.RunConfig(storage_path=str(storage.resolve()), name="tune", verbose=0),
        )
        by_id = {job.trial_id: job for job in jobs}
        for result in tuner.fit():
            job = by_id[result.config["job"]["trial_id"]]
            on_done(job, None if result.error is None else f"Ray Tune: {result.error}")
    finally:
        if started:
            ray.shutdown()
