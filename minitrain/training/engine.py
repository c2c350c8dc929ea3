"""The training engine: lab 01's loop with everything a long run needs around it.

Each step is the student-sized pieces of `minitrain/loop.py` (lab 01), wrapped in bookkeeping:

    for step in range(start, total_steps):
        batches = [next(train_iter) for _ in range(grad_accumulation)]
        lr = scheduler.lr                                        # the rate this update uses: lr_at(step)
        loss, grad_norm = train_step(model, optimizer, batches, clip_norm)    # loop.py: gradient, clipped
        if loss or grad_norm is not finite: stop, "diverged"      # before the bad update
        optimizer.step()
        log a train row every log_every steps, validate (loop.evaluate) every val_every steps
        scheduler.step(); early stopping, save_best, alerts, Ctrl-C, checkpoint every save_every steps

`train_step` and `evaluate` are imported from `minitrain.loop` by name, so a student's own loop.py (the course
seam, `minitrain/seam.py`) trains here exactly as the library's does.

Step numbering (the same in train_log.jsonl, checkpoints and resume):
- Steps are 0-based, like the lab's `for step in range(total_steps)`: step s is the s-th optimizer update and
  uses the learning rate `scheduler.lr_at(s)`.
- A train row `{step, loss, lr, grad_norm}` is logged when `s % log_every == 0` and at the last step: `loss` is
  the (token-mean) loss of step s's batch, measured before its update; `lr` is the rate that update used;
  `grad_norm` is the global gradient norm before clipping.
- A val row `{step, val_loss, val_ppl}` is logged when `s % val_every == 0` and at the last step, measured on
  the weights *after* update s. So 2000 steps log train rows at 0, 10, ..., 1990, 1999 and val rows at 0, 50,
  ..., 1950, 1999.
- A checkpoint named `step-N` holds the state after N updates (steps 0..N-1 done, every row of those steps
  logged); resuming from it runs step N next and appends exactly the rows an uninterrupted run would write.

Two RNGs, never mixed: the training RNG (`model.rng`: initial weights, dropout masks) and the data RNG inside
the batcher (shuffling). Nothing here reads the clock to decide anything, except a `duration` budget.

What the engine catches (lab 01's pitfalls): a NaN/inf loss or gradient norm halts the run before the bad update
(status "diverged"); a loss still above 4.0 after the warm-up prints a warning; SIGINT/SIGTERM finish the
current step, save a checkpoint and stop (status "interrupted"); alerts and early stopping may halt it too.

Callbacks (minitrain/callbacks/) hear each step boundary, validation and epoch end, and every logged row; with
none configured the loop does not build a single object for them.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.callbacks.base import Actions, CallbackList
from minitrain.common.io import append_line
from minitrain.data.batch import trim_padding
from minitrain.evaluation.alerts import AlertMonitor
from minitrain.evaluation.metrics import TokenAccuracyMeter
from minitrain.loop import evaluate, train_step
from minitrain.monitor.early_stopping import EarlyStopping, is_better
from minitrain.monitor.progress import Progress
from minitrain.nn import inference
from minitrain.optim.clip import clip_grad_value_
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.run_files import COMPLETED, DIVERGED, EARLY_STOPPED, HALTED, INTERRUPTED
from minitrain.training import artifacts
from minitrain.training.tasks import LANGUAGE_MODELING, task_train_step

# Lab 01: "if the loss stalls above 4.0, stop the run — something is wrong". ln(64) ≈ 4.16 is the loss of a
# uniform guess over 64 ids, so still being above 4.0 after the warm-up means almost nothing was learned.
HIGH_LOSS_AFTER_WARMUP = 4.0



# ------------------------------------------------------------------------------------------------ loop state


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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoopState:
        return cls(**{key: data[key] for key in cls.__dataclass_fields__ if key in data})


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
class _Run:
    """What train()'s helpers share: where rows go, who hears messages, the monitors, the loop state."""

    log_path: Path | None
    progress: Progress | None
    alerts: AlertMonitor | None
    early_stopping: EarlyStopping | None
    checkpointing: Checkpointing | None
    state: LoopState
    callbacks: CallbackList | None = None
    messages: list[str] = field(default_factory=list)

    def info(self, message: str) -> None:
        """A progress message (a val result): shown by the progress display, if there is one."""
        if self.progress is not None:
            self.progress.write(message)

    def warn(self, message: str) -> None:
        """A message the user must see (a warning, an alert, why the run stopped); kept for the outcome."""
        self.messages.append(message)
        if self.progress is not None and self.progress.mode != "none":
            self.progress.write(message)
        else:
            print(message, file=sys.stderr, flush=True)

    def log(self, row: dict[str, Any]) -> None:
        # json.dumps writes floats with repr(): the shortest text that reads back to the same double, so the
        # same seed gives byte-identical logs.
        if self.log_path is not None:
            append_line(self.log_path, json.dumps(row))
        if self.callbacks:
            self.callbacks.logged(row)


# ------------------------------------------------------------------------------------------------ signals


class _StopSignal:
    """Remembers a SIGINT/SIGTERM so the loop can stop cleanly at the next step boundary."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum: int, frame: Any) -> None:
        if self.signum == signal.SIGINT and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: the user wants out now
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""


@contextmanager
def _catch_stop_signals() -> Iterator[_StopSignal]:
    stop = _StopSignal()
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signal handlers can only be installed from the main thread
        return
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


# ------------------------------------------------------------------------------------------------ the loop


def train(
    model: Any,
    optimizer: Any,
    scheduler: Any,
    train_iter: Iterator,
    val_iter: Iterable,
    total_steps: int,
    val_every: int,
    log_every: int,
    rng_seed: int,
    manifest_path: str | Path | None,
    *,
    manifest: dict[str, Any] | None = None,
    log_path: str | Path | None = None,
    clip_norm: float | None = None,
    clip_value: float | None = None,
    grad_accumulation: int = 1,
    warmup_steps: int = 0,
    schedule_metric: str = "val_loss",
    checkpointing: Checkpointing | None = None,
    early_stopping: EarlyStopping | None = None,
    alerts: AlertMonitor | None = None,
    progress: Progress | None = None,
    duration_seconds: float | None = None,
    start: LoopState | None = None,
    validate: Callable[[Any], dict[str, float]] | None = None,
    task: Any = LANGUAGE_MODELING,
    callbacks: CallbackList | None = None,
) -> dict[str, Any]:
    """Train for steps `start.step` .. `total_steps` − 1; return the outcome (numbering: module docstring).

    `rng_seed` seeds the training RNG, `model.rng`, which the caller built the model with (it drew the initial
    weights and draws the dropout masks); train() records it in the manifest. `manifest` (versions, config,
    ...) is written to `manifest_path` with status "running" before the first step, and completed (in place)
    when the loop ends, however it ends. `log_path` receives the train_log.jsonl rows. `schedule_metric` is
    the value reported to `scheduler.step()` after each validation (only a plateau schedule uses it).
    `checkpointing` needs `train_iter` to be a batcher with state_dict(). `start` continues a run restored
    from a checkpoint. `duration_seconds` stops the run on the clock (the one place time decides anything).
    `validate(model)` replaces `evaluate(model, val_iter)` at each validation: it returns the val row's values,
    `val_loss` and `val_ppl` first, then any others (training.val_metrics: val_token_accuracy, ...); a table
    task's validation has no `val_ppl`. `task` turns batches into losses (`step_gradients`).
    `callbacks` hear each step, validation, epoch end and logged row (on_train_end is the caller's to send, once
    its own files are written); one that requests a stop ends the run after that step (status early_stopped).

    Returns {"status", "steps_done", "loss", "val_loss", "val_ppl", "best_val_loss", "best_val_ppl",
    "best_val_step", "wall_seconds", "eval_seconds", "ms_per_step" (training steps only), "checkpoint",
    "messages"}, plus "stopped_at" (the step after which it stopped) unless it completed, and "signal"
    (SIGINT/SIGTERM) when interrupted.
    """
    state = start or LoopState()
    run = _Run(Path(log_path) if log_path else None, progress, alerts, early_stopping, checkpointing, state,
               callbacks)
    manifest = manifest if manifest is not None else {}
    manifest.update(seed=rng_seed, status="running")  # updated in place: the caller sees the final version
    if manifest_path is not None:
        artifacts.write_manifest(manifest_path, manifest)

    t0 = time.perf_counter()
    first_step = state.step
    status, stopped_at, checkpoint = COMPLETED, None, None
    if state.stopped_by is not None:  # a callback stopped this run before the checkpoint it resumes from
        status, stopped_at, total_steps = EARLY_STOPPED, first_step - 1, first_step
    eval_seconds = 0.0
    if callbacks:
        callbacks.start(train_iter, total_steps)
        actions = _callback_actions(run, model, optimizer, scheduler, train_iter)
    # A diverging run overflows inside many ops; the loop reports it once, itself, so NumPy's per-op overflow
    # warnings would only bury that message.
    with _catch_stop_signals() as stop, np.errstate(over="ignore", invalid="ignore"):
        for step in range(first_step, total_steps):
            batches = [next(train_iter) for _ in range(grad_accumulation)]
            lr = scheduler.lr
            loss, grad_norm = step_gradients(model, optimizer, batches, clip_norm, task)
            loss, grad_norm = float(loss), float(grad_norm)
            if clip_value is not None:
                clip_grad_value_(model.buffer, clip_value)
            if not (math.isfinite(loss) and math.isfinite(grad_norm)):
                status, stopped_at = DIVERGED, step
                # Not printed: the caller turns the outcome into the one error line the user sees.
                run.messages.append(f"loss {loss}, grad_norm {grad_norm} at step {step} (update not applied)")
                break
            optimizer.step()
            state.last_loss = loss
            out_of_time = duration_seconds is not None and time.perf_counter() - t0 >= duration_seconds
            last = step == total_steps - 1 or out_of_time
            if progress is not None:
                progress.update(step, loss=loss, lr=lr, tokens=sum(task.size(b) for b in batches))

            halt = False
            if step % log_every == 0 or last:
                halt |= _log_train(run, step, loss, lr, grad_norm, warmup_steps)
            measured = None
            if step % val_every == 0 or last:
                eval_start = time.perf_counter()
                if validate is not None:
                    values = validate(model)
                else:
                    val_loss, val_ppl = evaluate(model, val_iter)
                    values = {"val_loss": val_loss, "val_ppl": val_ppl}
                eval_seconds += time.perf_counter() - eval_start
                measured = {**values, "loss": loss}
                halt |= _log_val(run, step, values)
                if early_stopping is not None and early_stopping.update(step, measured[early_stopping.metric]):
                    status, stopped_at = EARLY_STOPPED, step
                    run.warn(
                        f"early stopping at step {step}: {early_stopping.metric} has not improved on "
                        f"{early_stopping.best:.6g} (step {early_stopping.best_step}) for {early_stopping.patience} "
                        "evaluations"
                    )
            scheduler.step(None if measured is None else measured[schedule_metric])
            state.step = step + 1  # a step boundary: everything below sees the state after update `step`

            if measured is not None and checkpointing is not None and checkpointing.save_best:
                _maybe_save_best(run, measured, model, optimizer, scheduler, train_iter)
            if callbacks:
                callbacks.after_step(step, {"loss": loss, "lr": lr, "grad_norm": grad_norm, **(measured or {})},
                                     measured is not None, train_iter, model, actions)
                if callbacks.stop_reason is not None and status == COMPLETED:
                    status, stopped_at, state.stopped_by = EARLY_STOPPED, step, callbacks.stop_reason
                    run.warn(f"stopped after step {step}: {callbacks.stop_reason}")
            if halt and status == COMPLETED:
                status, stopped_at = HALTED, step
            if stop.signum is not None and status == COMPLETED and not last:
                status, stopped_at = INTERRUPTED, step
                run.warn(f"{stop.name} received: stopped after step {step}")
            stopping = status != COMPLETED or last
            if checkpointing is not None and (
                stopping or (checkpointing.save_every and state.step % checkpointing.save_every == 0)
            ):
                checkpoint = str(checkpointing.manager.save(step=state.step, **_checkpoint_objects(
                    run, model, optimizer, scheduler, train_iter)))
            if stopping:
                if out_of_time:
                    run.warn(f"training.duration reached after step {step}")
                break

    wall = time.perf_counter() - t0
    if checkpoint is None and checkpointing is not None:
        latest = checkpointing.manager.latest()  # diverged: the last good checkpoint stays the one to resume
        checkpoint = None if latest is None else str(latest)
    steps_run = state.step - first_step
    outcome = {
        "status": status,
        "steps_done": state.step,
        "loss": state.last_loss,
        "val_loss": state.last_val_loss,
        "val_ppl": state.last_val_ppl,
        "best_val_loss": state.best_val_loss,
        "best_val_ppl": state.best_val_ppl,
        "best_val_step": state.best_val_step,
        "wall_seconds": round(wall, 3),
        "eval_seconds": round(eval_seconds, 3),
        # Training steps alone: the validations' time is reported apart (eval_seconds).
        "ms_per_step": round(1000 * (wall - eval_seconds) / steps_run, 3) if steps_run else None,
        "checkpoint": checkpoint,
        "messages": run.messages,
    }
    if stopped_at is not None:
        outcome["stopped_at"] = stopped_at
    if status == INTERRUPTED:
        outcome["signal"] = stop.name
    if manifest_path is not None:
        artifacts.complete_manifest(
            manifest_path,
            manifest,
            status=status,
            steps_done=state.step,
            stopped_at=stopped_at,
            train_wall_seconds=outcome["wall_seconds"],
            eval_seconds=outcome["eval_seconds"],
            ms_per_step=outcome["ms_per_step"],
            checkpoint=checkpoint,
        )
    return outcome


def _log_train(run: _Run, step: int, loss: float, lr: float, grad_norm: float, warmup_steps: int) -> bool:
    """Write a train row, run the alerts on it, warn about a high loss after the warm-up; True means halt."""
    row = {"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm}
    run.log(row)
    # Step 0 is the untrained model, so even without a warm-up the check starts at step 1.
    if step >= max(warmup_steps, 1) and not run.state.warned_high_loss and loss > HIGH_LOSS_AFTER_WARMUP:
        run.state.warned_high_loss = True
        run.warn(
            f"warning: loss {loss:.3f} at step {step} is above {HIGH_LOSS_AFTER_WARMUP} after the warm-up "
            f"({warmup_steps} steps): the model is barely learning; check the lr, the masks and the data"
        )
    return _alerts(run, step, row)


def _log_val(run: _Run, step: int, values: dict[str, float]) -> bool:
    """Write a val row (`values`: val_loss, val_ppl, then any other metrics), track the best val so far, run the
    alerts on it; True means halt."""
    state = run.state
    row = {"step": step, **values}
    val_loss, val_ppl = values["val_loss"], values.get("val_ppl")  # a table task has no perplexity
    run.log(row)
    state.last_val_loss, state.last_val_ppl = val_loss, val_ppl
    if state.best_val_loss is None or val_loss < state.best_val_loss:
        state.best_val_loss, state.best_val_ppl, state.best_val_step = val_loss, val_ppl, step
    if val_ppl is not None:
        run.info(f"step {step}: val_loss {val_loss:.4f}  val_ppl {val_ppl:.3f}  "
                 f"(best {state.best_val_ppl:.3f} at step {state.best_val_step})")
    else:
        shown = "  ".join(f"{k} {v:.4f}" for k, v in values.items())
        run.info(f"step {step}: {shown}  (best val_loss {state.best_val_loss:.4f} at step {state.best_val_step})")
    return _alerts(run, step, row)


def _alerts(run: _Run, step: int, row: dict[str, Any]) -> bool:
    if run.alerts is None:
        return False
    fired = run.alerts.check(step, row)
    for f in fired:
        run.warn(f"{f.action}: {f.message}")
    return any(f.action == "halt" for f in fired)


def _maybe_save_best(run: _Run, measured: dict[str, float], model, optimizer, scheduler, train_iter) -> None:
    """save_best: write checkpoints/best.safetensors when the watched metric beats the best one saved."""
    ckpt, state = run.checkpointing, run.state
    value = measured[ckpt.metric]
    if state.best_saved is None or is_better(value, state.best_saved, ckpt.mode):
        state.best_saved = value
        ckpt.manager.save_best(step=state.step, **_checkpoint_objects(run, model, optimizer, scheduler, train_iter))


def _callback_actions(run: _Run, model, optimizer, scheduler, train_iter) -> Actions:
    """What a callback may ask of this loop: a log row, a progress line, a checkpoint of the state after the
    step, a stop."""

    def save_checkpoint(best: bool) -> Path | None:
        if run.checkpointing is None:
            return None
        manager = run.checkpointing.manager
        save = manager.save_best if best else manager.save
        return save(step=run.state.step, **_checkpoint_objects(run, model, optimizer, scheduler, train_iter))

    return Actions(log=run.log, info=run.info, save_checkpoint=save_checkpoint,
                   request_stop=run.callbacks.request_stop)


def _checkpoint_objects(run: _Run, model, optimizer, scheduler, train_iter) -> dict[str, Any]:
    """The keyword arguments of CheckpointManager.save: the five state machines plus the loop's own state."""
    extra = {"loop": asdict(run.state)}
    if run.checkpointing.data_sha256:
        extra["data_sha256"] = run.checkpointing.data_sha256
    if run.early_stopping is not None:
        extra["early_stopping"] = run.early_stopping.state_dict()
    if run.alerts is not None:
        extra["alerts"] = run.alerts.state_dict()
    if run.callbacks:
        extra["callbacks"] = run.callbacks.state_dict()
    return {
        "model": model,
        "optimizer": optimizer,
        "scheduler": scheduler,
        "batcher": train_iter,
        "train_rng": model.rng,
        "config_hash": run.checkpointing.config_hash,
        "extra": extra,
    }


def restore_loop_state(
    extra: Mapping[str, Any], early_stopping: EarlyStopping | None, alerts: AlertMonitor | None
) -> LoopState:
    """The LoopState saved in a checkpoint's `extra`, and the monitors' states restored in place (the callbacks'
    states are `extra["callbacks"]`, for `CallbackList.load_state_dict`)."""
    if early_stopping is not None and "early_stopping" in extra:
        early_stopping.load_state_dict(extra["early_stopping"])
    if alerts is not None and "alerts" in extra:
        alerts.load_state_dict(extra["alerts"])
    return LoopState.from_dict(extra.get("loop", {}))


def measure(model: Any, batches: Iterable, token_accuracy: bool = False) -> dict[str, float]:
    """{"loss", "ppl"} as `evaluate` computes them and, when asked, "token_accuracy": the share of counted
    positions whose argmax is the target (training.val_metrics), from one more pass without a tape."""
    loss, ppl = evaluate(model, batches)
    if not token_accuracy:
        return {"loss": loss, "ppl": ppl}
    meter = TokenAccuracyMeter()
    with inference(model):
        for batch in map(trim_padding, batches):
            logits, _ = model(batch.input, attn_pad_mask=batch.attn_pad_mask)
            meter.update(logits.data, batch.target, batch.loss_mask)
    return {"loss": loss, "ppl": ppl, "token_accuracy": meter.accuracy}


def step_gradients(
    model: Any, optimizer: Any, batches: list, clip_norm: float | None, task: Any
) -> tuple[float, float]:
    """(loss, grad_norm) of one step: lab 01's `loop.train_step` for the language model (so a student's own
    trains it), `tasks.task_train_step` for a table task."""
    if task is LANGUAGE_MODELING:
        return train_step(model, optimizer, batches, clip_norm)
    return task_train_step(model, optimizer, batches, clip_norm, task)
