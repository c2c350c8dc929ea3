"""Experiment tracking: a run's params, metrics and files sent to MLflow, TensorBoard or a JSONL file.

    monitoring:
      tracking: {backend: mlflow, experiment: verbs-lr, project: course, tags: {lab: "01"}}

`build_tracker` makes the tracker a config asks for; it is one of the run's callbacks (minitrain/callbacks/), so
it hears every logged row. Each backend is an optional extra, imported only when chosen (base.py, the backends
in *_tracker.py; docs/yaml-mode.md "Experiment tracking and system metrics").
"""

from __future__ import annotations

from pathlib import Path

from minitrain.config.observing import TrackingConfig
from minitrain.tracking.base import Tracker, flatten


def default_uri(backend: str, run_dir: Path) -> str:
    """Where a backend writes when `uri` is not given: inside the run folder."""
    if backend == "mlflow":
        from minitrain.tracking.mlflow_tracker import sqlite_uri

        return sqlite_uri(run_dir / "mlflow.db")
    return str(run_dir / ("tensorboard" if backend == "tensorboard" else "tracking.jsonl"))


def build_tracker(settings: TrackingConfig | None, *, run_dir: Path, experiment: str,
                  resume_step: int | None = None) -> Tracker | None:
    """The tracker `monitoring.tracking` asks for (None when absent or disabled). `experiment` is the default
    experiment name (the run's name); `resume_step` is the step a resumed run starts at."""
    if settings is None or not settings.enabled:
        return None
    uri = settings.uri or default_uri(settings.backend, run_dir)
    run = settings.run_name or run_dir.resolve().name
    experiment = settings.experiment or experiment
    if settings.backend == "mlflow":
        from minitrain.tracking.mlflow_tracker import MlflowTracker

        return MlflowTracker(uri, run, experiment, settings.project, run_dir, resuming=resume_step is not None)
    if settings.backend == "tensorboard":
        from minitrain.tracking.tensorboard_tracker import TensorBoardTracker

        return TensorBoardTracker(uri, run, resume_step)
    from minitrain.tracking.jsonl_tracker import JsonlTracker

    return JsonlTracker(uri, run, experiment, settings.project)


__all__ = ["Tracker", "build_tracker", "default_uri", "flatten"]
