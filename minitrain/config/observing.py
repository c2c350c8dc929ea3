"""The config sections that watch a run without changing what it computes: experiment tracking, system metrics,
callbacks and the output formats of its tables and report.

None of them enters the training config hash (minitrain/training/run.py), so a resume may change them, and lab 01's
resolved config leaves them out at their defaults (schema.ADDED_KEYS). docs/yaml-mode.md documents every key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_serializer, model_validator

from minitrain.common.registry import Registry
from minitrain.common.strict import MAX_COUNT, PositiveInt, Section
from minitrain.config.section import Metric, fill_defaults

# --- monitoring.tracking, monitoring.system -------------------------------------------------------------------


@dataclass(frozen=True)
class TrackerBackend:
    """A `monitoring.tracking.backend`: its Tracker class by dotted path (loaded by minitrain/tracking/, a room
    above this one), where it writes unless `uri` is given, the modules it imports with the extra installing
    them (config/missing_extras.py), and the function (dotted path, given the TrackingConfig) a sweep runs once before
    its trials, which would race to create a shared store."""

    name: str
    tracker: str
    uri: str
    modules: tuple[str, ...] = ()
    extra: str = ""
    prepare: str = ""


# The schema's choices, docs/yaml-mode.md's row (tested) and the trackers a run builds all come from here.
TRACKER_BACKENDS: Registry[TrackerBackend] = Registry("tracker backend", [
    TrackerBackend("mlflow", "minitrain.tracking.mlflow_tracker.MlflowTracker", "sqlite:///{run_dir}/mlflow.db",
                   ("mlflow", "sqlalchemy"), "mlflow", "minitrain.tracking.mlflow_tracker.prepare_store"),
    TrackerBackend("tensorboard", "minitrain.tracking.tensorboard_tracker.TensorBoardTracker", "{run_dir}/tensorboard",
                   ("tensorboardX",), "tensorboard"),
    TrackerBackend("jsonl", "minitrain.tracking.jsonl_tracker.JsonlTracker", "{run_dir}/tracking.jsonl"),
])


class TrackingConfig(Section):
    """Send the run to an experiment tracker (minitrain/tracking/): params, metrics per step, files at the end.
    `uri` is where (an MLflow tracking URI, TensorBoard's log folder, the JSONL file): default, its record's."""

    enabled: bool = True
    backend: Literal[tuple(TRACKER_BACKENDS)] = "jsonl"
    project: str | None = Field(None, min_length=1)
    experiment: str | None = Field(None, min_length=1, description="default: the run's name")
    run_name: str | None = Field(None, min_length=1, description="default: the run folder's name")
    tags: dict[str, str | int | float | bool] = Field(default_factory=dict)
    uri: str | None = Field(None, min_length=1, description="tracking URI, log folder or file (see above)")


SystemMetric = Literal["cpu_percent", "memory_mb", "disk_io"]
SYSTEM_METRICS: tuple[str, ...] = SystemMetric.__args__


class SystemConfig(Section):
    """Sample this process's CPU, memory and disk use every `interval` ms (psutil) into system_metrics.jsonl."""

    enabled: bool = True
    interval: int = Field(1000, ge=100, le=MAX_COUNT, description="milliseconds between samples")
    metrics: list[SystemMetric] = Field(default_factory=lambda: list(SYSTEM_METRICS), min_length=1)


# --- callbacks ---------------------------------------------------------------------------------------------------

Trigger = Literal["step", "validation", "epoch_end", "train_end"]


@dataclass(frozen=True)
class CallbackKind:
    """A `callbacks[].type`: the function building it from its entry by dotted path (minitrain/callbacks/, a
    room above this one), the trigger it acts at unless told, its `config:` keys with their defaults, the
    metrics.csv columns it adds (a glob; "*": any name), whether it can act after training (it needs no step),
    what its model must read ("text": it decodes answers), and whether it calls the function its entry names
    (`entry_point`, `args`)."""

    name: str
    build: str
    trigger: Trigger
    options: dict[str, Any] = field(default_factory=dict)
    logs: str = ""
    after_training: bool = False
    reads: str = ""
    calls_entry_point: bool = False


# The schema's `type` choices, the keys each takes, docs/yaml-mode.md's rows (tested) and the builders.
CALLBACKS: Registry[CallbackKind] = Registry("callback", [
    CallbackKind("checkpoint", "minitrain.training.watchers.checkpoint", "epoch_end",
                 {"save_best": False, "metric": "val_loss", "mode": "min"}),
    CallbackKind("lr_monitor", "minitrain.training.watchers.lr_monitor", "step", logs="lr/*"),
    CallbackKind("gradient_monitor", "minitrain.training.watchers.gradient_monitor", "step",
                 {"log_histogram": False}, logs="grad_norm/*"),
    CallbackKind("sample_predictions", "minitrain.training.watchers.sample_predictions", "epoch_end",
                 {"num_samples": 10, "max_new_tokens": None}, after_training=True, reads="text"),
    CallbackKind("custom", "minitrain.training.watchers.custom", "step", logs="*", after_training=True,
                 calls_entry_point=True),
])
CallbackType = Literal[tuple(CALLBACKS)]

_ENTRY_POINT = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


def _check_entry_point(text: str) -> str:
    if not _ENTRY_POINT.match(text):
        raise ValueError(f"{text!r} is not an entry point; write it as 'module.path:function' (a function of a "
                         "module importable from where minitrain runs)")
    return text


EntryPoint = Annotated[str, AfterValidator(_check_entry_point)]


class CallbackOptions(Section):
    """The `config:` of a callback entry; which keys each type takes is its record's `options` (CALLBACKS)."""

    save_best: bool | None = Field(None, description="checkpoint: also keep checkpoints/best.safetensors")
    metric: Metric | None = Field(None, description="checkpoint: what 'best' watches")
    mode: Literal["min", "max"] | None = None
    log_histogram: bool | None = Field(None, description="gradient_monitor: gradient histograms too")
    num_samples: int | None = Field(None, ge=1, le=1000, description="sample_predictions: held-out prompts")
    max_new_tokens: PositiveInt | None = Field(None, description="sample_predictions: default model.max_seq_len")


class CallbackEntry(Section):
    """One entry of `callbacks:`: a built-in callback, or a `custom` one named by its entry point (never a
    script: minitrain runs no code from a config). `interval` counts steps (trigger step) or epochs (epoch_end).
    """

    type: CallbackType
    trigger: Trigger | None = Field(None, description="default: the type's (its record in CALLBACKS)")
    interval: PositiveInt = 1
    config: CallbackOptions = Field(default_factory=CallbackOptions)
    entry_point: EntryPoint | None = Field(None, description="custom: 'module:function', called with the context")
    args: dict[str, Any] = Field(default_factory=dict, description="custom: keyword arguments for the function")

    @model_validator(mode="after")
    def _type_defaults(self) -> CallbackEntry:
        kind = CALLBACKS[self.type]
        if self.trigger is None:
            object.__setattr__(self, "trigger", kind.trigger)
        fill_defaults(self.config, set(kind.options), kind.options)
        return self


def resolved_callback(entry: dict[str, Any]) -> dict[str, Any]:
    """A dumped CallbackEntry with only the keys its type uses (what config.resolved.yaml holds)."""
    kept = {"type": entry["type"], "trigger": entry["trigger"], "interval": entry["interval"],
            "config": {k: entry["config"][k] for k in CALLBACKS[entry["type"]].options}}
    if CALLBACKS[entry["type"]].calls_entry_point:
        kept.update(entry_point=entry["entry_point"], args=entry["args"])
    return {k: v for k, v in kept.items() if v != {}}


# --- output.metrics, output.report, monitoring.dashboard ---------------------------------------------------------

# The spec's names for the columns a run logs.
METRIC_ALIASES = {"train_loss": "loss", "learning_rate": "lr"}


def logged_key(name: str, logged: Sequence[str]) -> str | None:
    """The logged column a metric's name means: itself, its spec name's (learning_rate: lr) or its val metric's
    (accuracy: val_accuracy, as training.validation.metrics names it); None when `logged` has none of them."""
    name = METRIC_ALIASES.get(name, name)
    return next((key for key in (name, f"val_{name}") if key in logged), None)


class MetricsOutput(Section):
    """metrics.csv is always written; `format` json or parquet writes metrics.json / metrics.parquet too; none
    given: parquet where pyarrow is installed (the spec's §15.3: every run writes metrics.parquet), else csv.
    `include` keeps only the columns named (or matched by a glob: `grad_norm/*`), `step` always."""

    format: Literal["csv", "json", "parquet"] | None = None
    include: list[Annotated[str, Field(min_length=1)]] | None = Field(None, min_length=1)


class ReportOutput(Section):
    """report.md is always written; `format: html` writes report.html too, with its plots embedded."""

    format: Literal["markdown", "html"] = "markdown"


@dataclass(frozen=True)
class ChartKind:
    """A `monitoring.dashboard.charts[].type`: the function drawing it as lines of text (dotted path: a function of
    (chart, view, width) in minitrain/monitor/text_charts.py, a room above) and its keys with their defaults."""

    name: str
    draw: str
    options: dict[str, Any] = field(default_factory=dict)


# The schema's `type` choices, the keys each takes and the dashboard's drawing all come from here.
CHARTS: Registry[ChartKind] = Registry("dashboard chart", [
    ChartKind("progress", "minitrain.monitor.text_charts.progress_chart", {"show_eta": True}),
    ChartKind("sparkline", "minitrain.monitor.text_charts.sparkline_chart", {"metric": "loss", "window": 100}),
    ChartKind("curve", "minitrain.monitor.text_charts.curve_chart", {"metric": "loss", "window": None, "height": 6}),
])
# Shown beside the logged metrics: steps/s (and examples/s), and the time left.
DASHBOARD_FIGURES = ("throughput", "eta")


class Chart(Section):
    """One chart of the dashboard; which keys each type takes is its record's `options` (CHARTS)."""

    type: Literal[tuple(CHARTS)]
    metric: str | None = Field(None, min_length=1, description="sparkline, curve: a logged metric (default loss)")
    window: int | None = Field(None, ge=2, le=MAX_COUNT, description="sparkline, curve: the last N logged values")
    height: int | None = Field(None, ge=2, le=40, description="curve: rows of text")
    show_eta: bool | None = Field(None, description="progress: the time left after the bar")

    @model_validator(mode="after")
    def _type_keys(self) -> Chart:
        options = CHARTS[self.type].options
        for key in sorted(self.model_fields_set - {"type", *options}):
            raise ValueError(f"{key}: a {self.type} chart takes {', '.join(options)}")
        fill_defaults(self, set(options), options)
        return self

    @model_serializer(mode="wrap")
    def _its_own_keys(self, handler: Any) -> dict[str, Any]:  # config.resolved.yaml: no other type's nulls
        return {k: v for k, v in handler(self).items() if k == "type" or k in CHARTS[self.type].options}


def _default_charts() -> list[Chart]:
    return [Chart(type="progress"), Chart(type="curve", metric="loss"), Chart(type="curve", metric="val_loss"),
            Chart(type="sparkline", metric="lr"), Chart(type="sparkline", metric="grad_norm")]


class DashboardConfig(Section):
    """What `train --tui` and `minitrain watch` show (minitrain/monitor/dashboard.py): the numbers of `metrics`
    (logged metrics, `throughput`, `eta`), the `charts` in order, redrawn every `refresh_ms` milliseconds."""

    metrics: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=lambda: ["loss", "val_loss", "lr", "grad_norm", *DASHBOARD_FIGURES], min_length=1)
    charts: list[Chart] = Field(default_factory=_default_charts)
    refresh_ms: int = Field(500, ge=50, le=MAX_COUNT, description="milliseconds between redraws")
