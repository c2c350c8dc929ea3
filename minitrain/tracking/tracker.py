"""What every experiment tracker does, whatever it writes to.

A tracker is a callback (minitrain/callbacks/callback.py) with a few more calls:

    tracker.start(params, tags)                 the run's resolved config, flattened ("optimizer.lr_max": 3e-4)
    on_log(row)                                 every train_log.jsonl row -> metrics at row["step"]
    tracker.log_metrics(step, values)           other series: system metrics, ...
    tracker.log_histogram(tag, values, step)    True when the backend keeps histograms (TensorBoard)
    tracker.log_text(tag, text, step)           sample predictions
    on_train_end(ctx)                           status, results.json's numbers and the run's files

Metrics are sent as the run logs them: a row's keys are the metric names (`loss`, `val_ppl`, `lr/...`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from minitrain.callbacks.callback import Callback, Context
from minitrain.hub.run_folder import locate

# Files of a finished run that trackers keep with it (those that exist), and the model file results.json names.
RUN_FILES = ("config.yaml", "config.resolved.yaml", "results.json", "report.md", "report.html", "loss_curve.png",
             "environment.yaml")


class Destination(NamedTuple):
    """Where and as what a run is tracked (what every tracker is built from); resume_step None: a new run."""

    uri: str
    run: str
    experiment: str
    project: str | None
    run_dir: Path
    resume_step: int | None


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}, "c": [1, 2]} -> {"a.b": 1, "c": "[1, 2]"}: nested sections become dotted keys."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value if isinstance(value, str | int | float | bool) or value is None else str(value)
    return flat


def numeric(values: Mapping[str, Any]) -> dict[str, float]:
    """The finite-or-not numbers of a row or results.json, without its step."""
    return {k: float(v) for k, v in values.items()
            if k != "step" and isinstance(v, int | float) and not isinstance(v, bool)}


def run_files(run_dir: Path, results: Mapping[str, Any]) -> list[Path]:
    """The files of a finished run worth keeping with it, in RUN_FILES order, then the model file."""
    files = [run_dir / name for name in RUN_FILES if (run_dir / name).is_file()]
    model = locate(results.get("model_path"), run_dir)
    return [*files, model] if model is not None else files


class Tracker(Callback):
    """Base class: subclasses write `start`, `log_metrics`, `finish`, and the optional histogram and text calls."""

    def start(self, params: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        raise NotImplementedError

    def log_metrics(self, step: int, values: Mapping[str, float]) -> None:
        raise NotImplementedError

    def log_histogram(self, tag: str, values: np.ndarray, step: int) -> bool:
        return False

    def log_text(self, tag: str, text: str, step: int) -> None:
        pass

    def finish(self, status: str, results: Mapping[str, Any], files: list[Path]) -> None:
        raise NotImplementedError

    def on_log(self, row: Mapping[str, float]) -> None:
        self.log_metrics(int(row["step"]), numeric(row))

    def on_train_end(self, ctx: Context) -> None:
        run_dir = ctx.run_dir or Path.cwd()
        self.finish(ctx.status or "unknown", ctx.results, run_files(run_dir, ctx.results) if ctx.results else [])
