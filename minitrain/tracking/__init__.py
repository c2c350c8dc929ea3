"""Experiment tracking: a run's params, metrics and files sent to MLflow, TensorBoard or a JSONL file.

    monitoring:
      tracking: {backend: mlflow, experiment: verbs-lr, project: course, tags: {lab: "01"}}

`build_tracker` makes the tracker a config asks for, from its record (minitrain/config/observing.py
TRACKER_BACKENDS); it is one of the run's callbacks (minitrain/callbacks/), so it hears every logged row. Each
backend is an optional extra, imported only when chosen (tracker.py, the backends in *_tracker.py; docs/yaml-mode.md
"Experiment tracking and system metrics").
"""

from __future__ import annotations

from pathlib import Path

from minitrain.common.registry import load
from minitrain.config.observing import TRACKER_BACKENDS, TrackingConfig
from minitrain.tracking.tracker import Destination, Tracker, flatten


def default_uri(backend: str, run_dir: Path) -> str:
    """Where a backend writes when `uri` is not given: inside the run folder (its record's `uri`)."""
    return TRACKER_BACKENDS[backend].uri.format(run_dir=run_dir.resolve())


def build_tracker(settings: TrackingConfig | None, *, run_dir: Path, experiment: str,
                  resume_step: int | None = None) -> Tracker | None:
    """The tracker `monitoring.tracking` asks for (None when absent or disabled). `experiment` is the default
    experiment name (the run's name); `resume_step` is the step a resumed run starts at."""
    if settings is None or not settings.enabled:
        return None
    uri = settings.uri or default_uri(settings.backend, run_dir)
    to = Destination(uri, settings.run_name or run_dir.resolve().name, settings.experiment or experiment,
                     settings.project, run_dir, resume_step)
    return load(TRACKER_BACKENDS[settings.backend].tracker)(to)  # the backend's module, and its extra, only now


__all__ = ["Destination", "Tracker", "build_tracker", "default_uri", "flatten"]
