"""Callbacks: code the training loop calls at its events, to watch a run without changing what it computes.

    from minitrain.callbacks import Callback

    class PrintVal(Callback):
        def on_validation_end(self, ctx):
            print(f"step {ctx.step}: val_ppl {ctx.metrics['val_ppl']:.3f}")

    run_training(cfg, "runs/try", callbacks=[PrintVal()])        # minitrain.training.run

The events, in the loop's step numbering (minitrain/loop.py: step s is the s-th optimizer update, 0-based):

    on_step_end(ctx)         after every step s, at the step boundary: the update is applied, s's rows are logged
    on_validation_end(ctx)   after the validation at step s (ctx.metrics then holds the val row's values too)
    on_epoch_end(ctx)        after the step that completed an epoch of the training split (ctx.epoch: epochs done)
    on_train_end(ctx)        once, when the run is over and its files are written (ctx.status, ctx.results)
    on_log(row)              every row written to train_log.jsonl, as written (trackers pass them on)

A callback that raises ends the run: status failed, with one error line naming the callback, the step and the
event (a custom entry point's exception is reported and that callback switched off instead: custom.py).

At one step they come in that order: step, validation, epoch. A callback sees the run through a `Context`, which
is read-only: numbers, and `parameters()` / `gradients()` as arrays that cannot be written to. It may act through
four doors only: `ctx.log(values)` adds a row to train_log.jsonl, `ctx.info(message)` shows a line on the
progress display, `ctx.save_checkpoint()` saves the state after this step, `ctx.request_stop(reason)` ends the
run after this step (status early_stopped). Nothing a callback does changes a number the run computes, so a run
with callbacks trains exactly the run without them.

A callback that keeps state across a resume returns it from `state_dict()` (JSON values) and takes it back in
`load_state_dict()`; checkpoints store it. `CallbackList` is what the loop holds: it dispatches the events and
works out when an epoch ended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from minitrain.common.errors import UserError

# The events a YAML callback's `trigger` can name, and the hook each one calls.
TRIGGERS = {"step": "on_step_end", "validation": "on_validation_end", "epoch_end": "on_epoch_end",
            "train_end": "on_train_end"}
EVENTS = {hook: trigger for trigger, hook in TRIGGERS.items()} | {"on_log": "log"}  # hook -> event, for errors


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


@dataclass(frozen=True)
class Context:
    """What a callback sees at one event (read-only; the module docstring lists the four actions).

    `metrics` holds this step's values: `loss` (the step's batch, before its update), `lr` (the rate it used)
    and `grad_norm` (before clipping), plus the val row's values (`val_loss`, `val_ppl`, ...) at a validation.
    At on_train_end it holds the last values logged, `status` says how the run ended and `results` is
    results.json's content (empty when the run did not finish).
    """

    step: int  # the step just done (0-based); at on_train_end the last step run (−1 when none ran)
    total_steps: int
    epoch: int  # epochs of the training split completed so far
    metrics: Mapping[str, float]
    run_dir: Path | None = None
    status: str | None = None  # on_train_end: completed, early_stopped, diverged, interrupted, halted
    results: Mapping[str, Any] = field(default_factory=dict)
    _model: Any = field(default=None, repr=False)
    _actions: Actions | None = field(default=None, repr=False)

    def parameters(self) -> dict[str, np.ndarray]:
        """Every parameter by its dotted name, as read-only arrays (views: no copy)."""
        return {name: _read_only(p.data) for name, p in self._model.named_parameters()}

    def gradients(self) -> dict[str, np.ndarray]:
        """The gradient of every trainable parameter as the update used it (after clipping), read-only."""
        return {name: _read_only(p.grad) for name, p in self._model.named_parameters() if p.grad is not None}

    def log(self, values: Mapping[str, float]) -> None:
        """Add the row {step, **values} to train_log.jsonl (and so to metrics.csv and the trackers)."""
        self._act().log({"step": self.step, **{k: float(v) for k, v in values.items()}})

    def info(self, message: str) -> None:
        """Show a line on the progress display and in logs/train.log (a quiet run: in the log only)."""
        self._act().info(message)

    def save_checkpoint(self, best: bool = False) -> Path | None:
        """Save the training state after this step: checkpoints/step-<step+1>.safetensors (pruned like the
        others), or checkpoints/best.safetensors with best=True. None when the run keeps no checkpoints."""
        return self._act().save_checkpoint(best)

    def request_stop(self, reason: str) -> None:
        """End the run after this step, as early stopping does (status early_stopped, final model saved)."""
        self._act().request_stop(reason)

    def _act(self) -> Actions:
        if self._actions is None:
            raise RuntimeError("this context belongs to no running loop, so it cannot act")
        return self._actions


@dataclass
class Actions:
    """The four things a callback may ask of the loop (given by the loop; see Context)."""

    log: Callable[[dict[str, float]], None]
    info: Callable[[str], None]
    save_checkpoint: Callable[[bool], Path | None]
    request_stop: Callable[[str], None]


class Callback:
    """Base class: override the hooks you need (each does nothing here)."""

    def on_step_end(self, ctx: Context) -> None:
        pass

    def on_validation_end(self, ctx: Context) -> None:
        pass

    def on_epoch_end(self, ctx: Context) -> None:
        pass

    def on_train_end(self, ctx: Context) -> None:
        pass

    def on_log(self, row: Mapping[str, float]) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        """What this callback must remember across a resume (JSON values)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass

    def report_lines(self) -> list[str]:
        """Markdown lines this callback adds to report.md (asked once, after the last step)."""
        return []

    def close(self) -> None:
        """Release files and connections: called once at the end of the run, however it ends."""


class Triggered(Callback):
    """A callback that acts at one event, a YAML entry's `trigger`, every `interval`-th time.

    trigger `step` acts after steps 0, interval, 2·interval, ...; `epoch_end` after every interval-th epoch;
    `validation` after every validation and `train_end` once (interval 1). Subclasses write `act(ctx)`.
    """

    def __init__(self, trigger: str = "step", interval: int = 1) -> None:
        if trigger not in TRIGGERS:
            raise ValueError(f"trigger must be one of {', '.join(TRIGGERS)}, got {trigger!r}")
        self.trigger, self.interval = trigger, interval

    def act(self, ctx: Context) -> None:
        raise NotImplementedError

    def on_step_end(self, ctx: Context) -> None:
        if self.trigger == "step" and ctx.step % self.interval == 0:
            self.act(ctx)

    def on_validation_end(self, ctx: Context) -> None:
        if self.trigger == "validation":
            self.act(ctx)

    def on_epoch_end(self, ctx: Context) -> None:
        if self.trigger == "epoch_end" and ctx.epoch % self.interval == 0:
            self.act(ctx)

    def on_train_end(self, ctx: Context) -> None:
        if self.trigger == "train_end":
            self.act(ctx)


def epochs_done(batcher: Any) -> int | None:
    """Epochs of the training split a batcher has handed out completely (None: it does not count epochs)."""
    if not hasattr(batcher, "epoch"):
        return None
    return batcher.epoch + (1 if batcher.position == batcher.steps_per_epoch else 0)


class CallbackList:
    """The callbacks of one run, in order, and the dispatch of the loop's events to them.

    The loop calls `start(batcher)` before its first step, `after_step(...)` at each step boundary and `logged`
    for each row it writes; the run calls `train_end(...)` when its files are written and `close()` last.
    `names` label the callbacks in errors (default: their class names).
    """

    def __init__(self, callbacks: Sequence[Callback] = (), run_dir: str | Path | None = None,
                 names: Sequence[str] | None = None) -> None:
        self.callbacks = list(callbacks)
        self.names = list(names) if names is not None else [type(c).__name__ for c in self.callbacks]
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.stop_reason: str | None = None
        self.last_metrics: dict[str, float] = {}
        self._epochs: int | None = None
        self._total_steps = 0

    def __bool__(self) -> bool:
        return bool(self.callbacks)

    def __iter__(self):
        return iter(self.callbacks)

    def start(self, batcher: Any, total_steps: int) -> None:
        self._epochs, self._total_steps = epochs_done(batcher), total_steps

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason

    def after_step(self, step: int, metrics: dict[str, float], validated: bool, batcher: Any, model: Any,
                   actions: Actions) -> None:
        """Dispatch on_step_end, then on_validation_end (if step `step` validated), then on_epoch_end (if it
        completed an epoch)."""
        epochs = epochs_done(batcher)
        ended_epoch = epochs is not None and self._epochs is not None and epochs > self._epochs
        self._epochs = epochs
        self.last_metrics.update(metrics)
        ctx = Context(step=step, total_steps=self._total_steps, epoch=epochs or 0,
                      metrics=MappingProxyType(dict(metrics)), run_dir=self.run_dir, _model=model, _actions=actions)
        self._dispatch("on_step_end", ctx, step)
        if validated:
            self._dispatch("on_validation_end", ctx, step)
        if ended_epoch:
            self._dispatch("on_epoch_end", ctx, step)

    def logged(self, row: Mapping[str, float]) -> None:
        self._dispatch("on_log", row, int(row.get("step", -1)))

    def _dispatch(self, hook: str, arg: Any, step: int) -> None:
        """Call `hook(arg)` on each callback in order. An exception that is not already a UserError (a bug in a
        watcher: nothing the run computes depends on it) becomes one (exit 1) naming the callback, the step and
        the event, so the run ends failed with one error line and an honest manifest, not a traceback."""
        for name, callback in zip(self.names, self.callbacks, strict=True):
            try:
                getattr(callback, hook)(arg)
            except UserError:
                raise
            except Exception as exc:
                event = EVENTS.get(hook, hook)
                raise UserError(f"callback {name} failed at step {step} ({event}): {type(exc).__name__}: {exc}",
                                1) from None

    def train_end(self, outcome: Mapping[str, Any], model: Any, results: Mapping[str, Any] | None = None,
                  quiet: bool = False) -> None:
        """Dispatch on_train_end for the loop's `outcome` (its status; step: the last one run, steps_done − 1),
        with results.json's content when the run finished. The loop is over: ctx.info prints (unless `quiet`), and
        there is no step left to log a row for, checkpoint or stop."""
        status, step = outcome["status"], outcome["steps_done"] - 1

        def over(*_: Any) -> None:
            raise RuntimeError("the run is over: on_train_end cannot log rows, save checkpoints or stop it")

        actions = Actions(log=over, info=(lambda _: None) if quiet else lambda m: print(m, flush=True),
                          save_checkpoint=over, request_stop=over)
        ctx = Context(step=step, total_steps=self._total_steps, epoch=self._epochs or 0,
                      metrics=MappingProxyType(dict(self.last_metrics)), run_dir=self.run_dir, status=status,
                      results=MappingProxyType(dict(results or {})), _model=model, _actions=actions)
        self._dispatch("on_train_end", ctx, step)

    def report_lines(self) -> list[str]:
        lines: list[str] = []
        for callback in self.callbacks:
            section = callback.report_lines()
            lines += ["", *section] if section else []
        return lines

    def close(self) -> None:
        """Close every callback (once: a second call does nothing)."""
        callbacks, self.callbacks, self.names = self.callbacks, [], []
        for callback in callbacks:
            callback.close()

    def state_dict(self) -> list[dict[str, Any]]:
        return [callback.state_dict() for callback in self.callbacks]

    def load_state_dict(self, states: Sequence[Mapping[str, Any]]) -> None:
        for callback, state in zip(self.callbacks, states, strict=False):
            callback.load_state_dict(state)
