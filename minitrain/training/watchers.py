"""A run's watchers, from its config: the `callbacks:` entries, the tracker, system metrics, and any callbacks
given in Python, as the one CallbackList the loop hears (minitrain.training.run calls `watch_run`).

Order matters only at the end: the callbacks of `callbacks:` first, then the Python ones, then the system
monitor, then the tracker, so the tracker files the run away after everything else has logged; with
`runtime.threads: measure`, the choice of threads and workers (minitrain/callbacks/thread_choice.py) last of all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple

from minitrain.callbacks.builtin import Checkpointer, GradientMonitor, LRMonitor, SamplePredictions
from minitrain.callbacks.callback import Callback, CallbackList
from minitrain.callbacks.custom import CustomCallback, load_entry_point
from minitrain.callbacks.thread_choice import MeasuredSettings, SettingChooser, apply_threads, thread_settings
from minitrain.common.compute import Setting
from minitrain.common.registry import load
from minitrain.config import Config, resolved_dict
from minitrain.config.observing import CALLBACKS, CallbackEntry
from minitrain.monitor.system import FILE as SYSTEM_FILE
from minitrain.monitor.system import SystemMonitor
from minitrain.tracking import Tracker, build_tracker, flatten

SAMPLES_FILE = "samples.jsonl"


class Context(NamedTuple):
    """What a callback may be built with besides its `callbacks:` entry."""

    model: Any
    tokenizer: Any
    records: Sequence[dict]
    optimizer_groups: Sequence[dict]
    run_dir: Path
    tracker: Tracker | None


def checkpoint(entry: CallbackEntry, when: dict, _: Context) -> Callback:
    options = entry.config
    return Checkpointer(**when, save_best=options.save_best, metric=options.metric, mode=options.mode)


def lr_monitor(entry: CallbackEntry, when: dict, context: Context) -> Callback:
    scaled = [(g["pattern"], g["lr_scale"]) for g in context.optimizer_groups if "lr_scale" in g]
    return LRMonitor(**when, groups=scaled)


def gradient_monitor(entry: CallbackEntry, when: dict, context: Context) -> Callback:
    return GradientMonitor(**when, histograms=entry.config.log_histogram, tracker=context.tracker,
                           png_dir=context.run_dir / "histograms")


def sample_predictions(entry: CallbackEntry, when: dict, context: Context) -> Callback:
    return SamplePredictions(context.model, context.tokenizer, context.records, entry.config.num_samples, **when,
                             max_new_tokens=entry.config.max_new_tokens, run_dir=context.run_dir,
                             tracker=context.tracker)


def custom(entry: CallbackEntry, when: dict, _: Context) -> Callback:
    return CustomCallback(load_entry_point(entry.entry_point), entry.entry_point, **when, args=entry.args)


def build_callback(entry: CallbackEntry, context: Context) -> Callback:
    """The callback one `callbacks:` entry describes, by its type's `build` (minitrain/config/observing.py
    CALLBACKS: checkpoint ... custom above)."""
    return load(CALLBACKS[entry.type].build)(entry, {"trigger": entry.trigger, "interval": entry.interval}, context)


def measured_settings(cfg: Config, *, workers_allowed: bool) -> list[Setting]:
    """What `runtime.threads: measure` chooses among: 1 process × 1 .. cpu_count threads, and the workers
    runtime.data_parallel names × 1 thread when the run can start them."""
    settings = thread_settings()
    parallel = cfg.runtime.data_parallel
    if workers_allowed and parallel is not None and parallel.workers > 1:
        settings.append(Setting(1, parallel.workers))
    return settings


def watch_run(cfg: Config, extra: Sequence[Callback], cleanup: ExitStack, *, model: Any, tokenizer: Any,
              records: Sequence[dict], run_dir: Path, resume_step: int | None,
              config_hash: str, apply_setting: Callable[[Setting, bool], Any] | None = None) -> CallbackList | None:
    """Every watcher of the run, started (tracker told the params, system sampling running) and registered with
    `cleanup` to be closed; None when there is none, so the loop builds nothing for callbacks. `apply_setting`:
    the run's applier of compute settings (minitrain/parallel/switch.py), given when workers are a candidate."""
    settings = cfg.monitoring
    tracker = build_tracker(settings.tracking, run_dir=run_dir, experiment=cfg.name or run_dir.name,
                            resume_step=resume_step)
    if resume_step is None:  # a new run in a folder that held one: its samples are not this run's
        (run_dir / SAMPLES_FILE).unlink(missing_ok=True)
    groups = cfg.optimizer.kwargs().get("groups", [])
    context = Context(model, tokenizer, records, groups, run_dir, tracker)
    watchers = [build_callback(entry, context) for entry in cfg.callbacks]
    names = [f"callbacks[{i}] ({entry.type})" for i, entry in enumerate(cfg.callbacks)]
    watchers += list(extra)
    system = settings.system
    if system is not None and system.enabled:
        watchers.append(SystemMonitor(run_dir / SYSTEM_FILE, system.interval, system.metrics, tracker,
                                      fresh=resume_step is None))
    if tracker is not None:
        watchers.append(tracker)
    if cfg.runtime.threads == "measure":  # last, so the other watchers' checkpoint states keep their places
        chooser = SettingChooser(measured_settings(cfg, workers_allowed=apply_setting is not None),
                                 apply=apply_setting or apply_threads,
                                 announce=lambda m: print(m, file=sys.stderr, flush=True))
        watchers.append(MeasuredSettings(chooser))
    if not watchers:
        return None
    names += [type(watcher).__name__ for watcher in watchers[len(names):]]
    watch = CallbackList(watchers, run_dir, names)
    cleanup.callback(watch.close)
    if tracker is not None:
        tags = {**{k: str(v) for k, v in (settings.tracking.tags or {}).items()},
                "minitrain.run_dir": str(run_dir.resolve()), "minitrain.config_hash": config_hash}
        tracker.start(flatten(resolved_dict(cfg)), tags)
    for watcher in watchers:
        if isinstance(watcher, SystemMonitor):
            watcher.start()
    return watch
