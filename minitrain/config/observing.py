"""The config sections that watch a run without changing what it computes: experiment tracking, system metrics,
callbacks and the output formats of its tables and report.

None of them enters the training config hash (minitrain/training/run.py), so a resume may change them, and lab 01's
resolved config leaves them out at their defaults (schema.ADDED_KEYS). docs/yaml-mode.md documents every key.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from minitrain.common.strict import PositiveInt, Section
from minitrain.config.section import Metric, fill_defaults

# --- monitoring.tracking, monitoring.system -------------------------------------------------------------------


# The tracker backends, the one table of them: minitrain/tracking/__init__.py builds each (TRACKERS, same names,
# tested), the schema's choices and docs/yaml-mode.md's row come from here.
TRACKER_BACKENDS = ("mlflow", "tensorboard", "jsonl")


class TrackingConfig(Section):
    """Send the run to an experiment tracker (minitrain/tracking/): params, metrics per step, files at the end.

    `uri` is where: an MLflow tracking URI (default sqlite:///<run folder>/mlflow.db), TensorBoard's log folder
    (default <run folder>/tensorboard; the run writes to <uri>/<run_name>), or the JSONL file (default
    <run folder>/tracking.jsonl).
    """

    enabled: bool = True
    backend: Literal[TRACKER_BACKENDS] = "jsonl"
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
    interval: int = Field(1000, ge=100, description="milliseconds between samples")
    metrics: list[SystemMetric] = Field(default_factory=lambda: list(SYSTEM_METRICS), min_length=1)


# --- callbacks ---------------------------------------------------------------------------------------------------

Trigger = Literal["step", "validation", "epoch_end", "train_end"]
# The callback types, the one table of them: each type's options (its `config:` keys) with their defaults, and
# the trigger it acts at unless told. minitrain/training/watchers.py builds each (BUILDERS, same names,
# tested); the schema's `type` choices and docs/yaml-mode.md's rows come from here.
CALLBACK_OPTIONS: dict[str, dict[str, Any]] = {
    "checkpoint": {"save_best": False, "metric": "val_loss", "mode": "min"},
    "lr_monitor": {},
    "gradient_monitor": {"log_histogram": False},
    "sample_predictions": {"num_samples": 10, "max_new_tokens": None},
    "custom": {},
}
DEFAULT_TRIGGER = {"checkpoint": "epoch_end", "lr_monitor": "step", "gradient_monitor": "step",
                   "sample_predictions": "epoch_end", "custom": "step"}
CallbackType = Literal[tuple(CALLBACK_OPTIONS)]

_ENTRY_POINT = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


def _check_entry_point(text: str) -> str:
    if not _ENTRY_POINT.match(text):
        raise ValueError(f"{text!r} is not an entry point; write it as 'module.path:function' (a function of a "
                         "module importable from where minitrain runs)")
    return text


EntryPoint = Annotated[str, AfterValidator(_check_entry_point)]


class CallbackOptions(Section):
    """The `config:` of a callback entry; which keys each type takes is CALLBACK_OPTIONS."""

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
    trigger: Trigger | None = Field(None, description="default: the type's (DEFAULT_TRIGGER)")
    interval: PositiveInt = 1
    config: CallbackOptions = Field(default_factory=CallbackOptions)
    entry_point: EntryPoint | None = Field(None, description="custom: 'module:function', called with the context")
    args: dict[str, Any] = Field(default_factory=dict, description="custom: keyword arguments for the function")

    @model_validator(mode="after")
    def _type_defaults(self) -> CallbackEntry:
        if self.trigger is None:
            object.__setattr__(self, "trigger", DEFAULT_TRIGGER[self.type])
        fill_defaults(self.config, set(CALLBACK_OPTIONS[self.type]), CALLBACK_OPTIONS[self.type])
        return self


def resolved_callback(entry: dict[str, Any]) -> dict[str, Any]:
    """A dumped CallbackEntry with only the keys its type uses (what config.resolved.yaml holds)."""
    kept = {"type": entry["type"], "trigger": entry["trigger"], "interval": entry["interval"],
            "config": {k: entry["config"][k] for k in CALLBACK_OPTIONS[entry["type"]]}}
    if entry["type"] == "custom":
        kept.update(entry_point=entry["entry_point"], args=entry["args"])
    return {k: v for k, v in kept.items() if v != {}}


# --- output.metrics, output.report -------------------------------------------------------------------------------

# The spec's names for the columns a run logs.
METRIC_ALIASES = {"train_loss": "loss", "learning_rate": "lr"}


class MetricsOutput(Section):
    """metrics.csv is always written; `format` json or parquet writes metrics.json / metrics.parquet too.
    `include` keeps only the columns named (or matched by a glob: `grad_norm/*`), `step` always."""

    format: Literal["csv", "json", "parquet"] = "csv"
    include: list[Annotated[str, Field(min_length=1)]] | None = Field(None, min_length=1)


class ReportOutput(Section):
    """report.md is always written; `format: html` writes report.html too, with its plots embedded."""

    format: Literal["markdown", "html"] = "markdown"
