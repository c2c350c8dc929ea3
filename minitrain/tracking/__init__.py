"""Experiment tracking: a run's params, metrics and files sent to MLflow, TensorBoard or a JSONL file.

    monitoring:
      tracking: {backend: mlflow, experiment: verbs-lr, project: course, tags: {lab: "01"}}

`build_tracker` makes the tracker a config asks for; it is one of the run's callbacks (minitrain/callbacks/), so
it hears every logged row. Each backend is an optional extra, imported only when chosen (tracker.py, the backends
in *_tracker.py; docs/yaml-mode.md "Experiment tracking and system metrics").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from minitrain.config.observing import TrackingConfig
from minitrain.tracking.tracker import Tracker, flatten


class Destination(NamedTuple):
    """Where and as what a run is tracked: the tracker's URI, run and experiment names, project, run folder,
    and the step a resumed run starts at (None for a new run)."""

    uri: str
    run: str
    experiment: str
    project: str | None
    run_dir: Path
    resume_step: int | None


def _mlflow_uri(run_dir: Path) -> str:
    from minitrain.tracking.mlflow_tracker import sqlite_uri

    return sqlite_uri(run_dir / "mlflow.db")


def _mlflow(to: Destination) -> Tracker:
    from minitrain.tracking.mlflow_tracker import MlflowTracker

    return MlflowTracker(to.uri, to.run, to.experiment, to.project, to.run_dir, resuming=to.resume_step is not None)


def _tensorboard(to: Destination) -> Tracker:
    from minitrain.tracking.tensorboard_tracker import TensorBoardTracker

    return TensorBoardTracker(to.uri, to.run, to.resume_step)


def _jsonl(to: Destination) -> Tracker:
    from minitrain.tracking.jsonl_tracker import JsonlTracker

    return JsonlTracker(to.uri, to.run, to.experiment, to.project)


# backend -> (its default URI inside the run folder, how to build it); the names are the schema's
# (minitrain/config/observing.py TRACKER_BACKENDS, tested). Each backend's extra is imported only when built.
TRACKERS: dict[str, tuple[Callable[[Path], str], Callable[[Destination], Tracker]]] = {
    "mlflow": (_mlflow_uri, _mlflow),
    "tensorboard": (lambda run_dir: str(run_dir / "tensorboard"), _tensorboard),
    "jsonl": (lambda run_dir: str(run_dir / "tracking.jsonl"), _jsonl),
}


def default_uri(backend: str, run_dir: Path) -> str:
    """Where a backend writes when `uri` is not given: inside the run folder."""
    return TRACKERS[backend][0](run_dir)


def build_tracker(settings: TrackingConfig | None, *, run_dir: Path, experiment: str,
                  resume_step: int | None = None) -> Tracker | None:
    """The tracker `monitoring.tracking` asks for (None when absent or disabled). `experiment` is the default
    experiment name (the run's name); `resume_step` is the step a resumed run starts at."""
    if settings is None or not settings.enabled:
        return None
    uri = settings.uri or default_uri(settings.backend, run_dir)
    to = Destination(uri, settings.run_name or run_dir.resolve().name, settings.experiment or experiment,
                     settings.project, run_dir, resume_step)
    return TRACKERS[settings.backend][1](to)


__all__ = ["TRACKERS", "Destination", "Tracker", "build_tracker", "default_uri", "flatten"]
