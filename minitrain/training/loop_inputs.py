"""What `engine.train()` takes and carries: the loop's settings, where its batches come from, its own state (saved in
every checkpoint), where and when it checkpoints, and what it writes and who watches it (step numbering:
minitrain/training/engine.py's docstring)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minitrain.callbacks.callback import CallbackList
from minitrain.evaluation.alerts import AlertMonitor
from minitrain.monitor.early_stopping import EarlyStopping
from minitrain.monitor.progress import Progress
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.training.tasks import LANGUAGE_MODELING

# Lab 01: "if the loss stalls above 4.0, stop the run — something is wrong". ln(64) ≈ 4.16 is the loss of a
# uniform guess over 64 ids, so still being above 4.0 after the warm-up means almost nothing was learned. For
# another vocabulary the same share of ln(V) (a 49,152-token base: 10.4), so the warning means the same thing.
HIGH_LOSS_AFTER_WARMUP = 4.0


@dataclass(frozen=True)
class LoopSettings:
    """The numbers that shape the loop (the config's training keys; step numbering: engine.py's docstring).

    `total_steps` optimizer updates; a train row every `log_every` steps and a validation every `val_every`
    steps, both also at the last step (`val_offset` 1: at the last of each val_every steps, not the first, as
    val_every_epoch validates at each epoch's end). `rng_seed` seeded the training RNG, `model.rng`, which the
    caller built the model with (it drew the initial weights and draws the dropout masks); train() records it in
    the manifest. Each update's gradient is the token-weighted mean over `grad_accumulation` micro-batches, its
    global norm clipped to `clip_norm`, then each element to [−clip_value, clip_value] (None: no clipping).
    `warmup_steps`: the high-loss warning waits for them; `high_loss` is its threshold. `schedule_metric`: the
    val value reported to `scheduler.step()` after each validation (only a plateau schedule uses it).
    `duration_seconds` stops the run on the clock (the one place time decides anything).
    """

    total_steps: int
    val_every: int
    log_every: int
    rng_seed: int
    clip_norm: float | None = None
    clip_value: float | None = None
    grad_accumulation: int = 1
    warmup_steps: int = 0
    high_loss: float = HIGH_LOSS_AFTER_WARMUP
    schedule_metric: str = "val_loss"
    duration_seconds: float | None = None
    val_offset: int = 0


@dataclass
class LoopData:
    """Where the loop's batches come from and how they become losses.

    `train`: an endless iterator of training batches (a batcher with state_dict() when checkpointing). `val`:
    the validation batches, scored with `loop.evaluate`, unless `validate(model)` is given: it returns the val
    row's values, `val_loss` and `val_ppl` first, then any others (training.val_metrics: val_token_accuracy,
    ...); a table task's validation has no `val_ppl`. `task` turns batches into losses (`step_gradients`).
    `workers`: data-parallel workers (minitrain/parallel/) that compute each step's gradient in place of
    train_step, with the same bytes: `workers.gradients(model, batches, clip_norm)` -> (loss, grad_norm).
    """

    train: Iterator
    val: Iterable = ()
    validate: Callable[[Any], dict[str, float]] | None = None
    task: Any = LANGUAGE_MODELING
    workers: Any = None


@dataclass
class LoopState:
    """What the loop itself carries from step to step; saved in every checkpoint, so a resume continues it."""

    step: int = 0  # the next step to run = optimizer updates done
    best_val_loss: float | None = None
    best_val_ppl: float | None = None
    best_val_step: int | None = None
    last_val_loss: float | None = None
    last_val_ppl: float | None = None
    last_loss: float | None = None
    best_saved: float | None = None  # metric value of checkpoints/best.safetensors (save_best)
    warned_high_loss: bool = False
    stopped_by: str | None = None  # why a callback stopped the run: resuming its last checkpoint trains no more


@dataclass
class Checkpointing:
    """Where and when the loop saves full training checkpoints (see checkpoint.py).

    `save_every` N: after every N-th update (null: only when the run stops). `save_best`: also keep
    `best.safetensors`, the state at the best `metric` (mode "min" or "max") seen at a validation.
    `data_sha256` ({config key: {"path", "sha256"}} of the data files) is saved too, so a resume can tell
    when the data changed under it.
    """

    manager: CheckpointManager
    config_hash: str
    save_every: int | None = None
    save_best: bool = False
    metric: str = "val_loss"
    mode: str = "min"
    data_sha256: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class Bookkeeping:
    """What the loop writes, who watches it and where it starts; all optional.

    `manifest` (versions, config, ...) is written to `manifest_path` with status "running" before the first step
    and completed (in place: the caller sees the final version) when the loop ends, however it ends. `log_path`
    receives the train_log.jsonl rows. `checkpointing` needs `LoopData.train` to be a batcher with state_dict().
    `callbacks` hear each step, validation, epoch end and logged row (on_train_end is the caller's to send, once
    its own files are written); one that requests a stop ends the run after that step (status early_stopped).
    `start` continues a run restored from a checkpoint.
    """

    manifest_path: str | Path | None = None
    manifest: dict[str, Any] = field(default_factory=dict)
    log_path: str | Path | None = None
    checkpointing: Checkpointing | None = None
    early_stopping: EarlyStopping | None = None
    alerts: AlertMonitor | None = None
    progress: Progress | None = None
    callbacks: CallbackList | None = None
    start: LoopState | None = None
    pruning: Any = None  # a GradualPruner (minitrain/pruning/gradual.py): after every update; its masks checkpointed


# The watchers of Bookkeeping that keep state across a resume, each saved under its field's name in a checkpoint's
# `extra` (a CallbackList without callbacks is false: nothing saved).
STATEFUL = ("early_stopping", "alerts", "callbacks", "pruning")
