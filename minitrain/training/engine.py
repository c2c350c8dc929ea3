"""The training engine: lab 01's loop with everything a long run needs around it.

`train()` is the loop (lab 01's text walks through it step by step); each step is the student-sized pieces of
`minitrain/loop.py` (lab 01), and every piece of bookkeeping around them is a named method of `_Loop`.

`train_step` and `evaluate` are imported from `minitrain.loop` by name, so a student's own loop.py (the course
seam, `minitrain/seam.py`) trains here exactly as the library's does.

Step numbering (the same in train_log.jsonl, checkpoints and resume):
- Steps are 0-based, like the lab's `for step in range(total_steps)`: step s is the s-th optimizer update and
  uses the learning rate `scheduler.lr_at(s)`.
- A train row `{step, loss, lr, grad_norm}` is logged when `s % log_every == 0` and at the last step: `loss` is
  the (token-mean) loss of step s's batch, measured before its update; `lr` is the rate that update used;
  `grad_norm` is the global gradient norm before clipping.
- A val row `{step, val_loss, val_ppl}` is logged when `(s + val_offset) % val_every == 0` and at the last step,
  measured on the weights *after* update s. So 2000 steps log train rows at 0, 10, ..., 1990, 1999 and val rows
  at 0, 50, ..., 1950, 1999; val_every_epoch (val_every = an epoch's steps, val_offset 1) validates at each
  epoch's last step: 10 epochs of 44 steps validate at 43, 87, ..., 439, ten times.
- A checkpoint named `step-N` holds the state after N updates (steps 0..N-1 done, every row of those steps
  logged); resuming from it runs step N next and appends exactly the rows an uninterrupted run would write.

Two RNGs, never mixed: the training RNG (`model.rng`: initial weights, dropout masks) and the data RNG inside
the batcher (shuffling). Nothing here reads the clock to decide anything, except a `duration` budget.

What the engine catches (lab 01's pitfalls): a NaN/inf loss or gradient norm, or a language model's loss whose
perplexity overflows a float64 (loss > 709.78), halts the run before the bad update (status "diverged"); so does
such a val loss, after the update, which is then neither logged nor checkpointed; a loss still above 4.0 after
the warm-up prints a warning; SIGINT/SIGTERM finish the current step, save a checkpoint and stop (status
"interrupted"); alerts and early stopping may halt it too.

Callbacks (minitrain/callbacks/) hear each step boundary, validation and epoch end, and every logged row; with
none configured the loop does not build a single object for them.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Sized
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.callbacks.callback import Actions
from minitrain.checkpoint import save_checkpoint
from minitrain.common.io import append_line
from minitrain.evaluation.metrics import perplexity
from minitrain.loop import evaluate, train_step
from minitrain.monitor.early_stopping import is_better
from minitrain.optim.clip import clip_grad_value_
from minitrain.runs.checkpoint_manager import BEST_FILE
from minitrain.runs.run_files import COMPLETED, DIVERGED, EARLY_STOPPED, HALTED, INTERRUPTED
from minitrain.training import artifacts
from minitrain.training.loop_inputs import STATEFUL, Bookkeeping, LoopData, LoopSettings, LoopState
from minitrain.training.stopping import StopSignal, catch_stop_signals
from minitrain.training.tasks import LANGUAGE_MODELING, task_train_step

# ------------------------------------------------------------------------------------------------ the loop


def train(model: Any, optimizer: Any, scheduler: Any, data: LoopData, settings: LoopSettings,
          books: Bookkeeping | None = None) -> dict[str, Any]:
    """Train for steps `books.start.step` .. `settings.total_steps` − 1; return the outcome (numbering: module
    docstring).

    Returns {"status", "steps_done", "loss", "val_loss", "val_ppl", "best_val_loss", "best_val_ppl",
    "best_val_step", "wall_seconds", "eval_seconds", "ms_per_step" (training steps only), "checkpoint",
    "messages"}, plus "stopped_at" (the step after which it stopped) unless it completed, and "signal"
    (SIGINT/SIGTERM) when interrupted.
    """
    loop = _Loop(model, optimizer, scheduler, data, settings, books or Bookkeeping())
    state = loop.state
    # A diverging run overflows inside many ops; the loop reports it once, itself, so NumPy's per-op overflow
    # warnings would only bury that message.
    with catch_stop_signals() as signals, np.errstate(over="ignore", invalid="ignore"):
        for step in range(state.step, loop.total_steps):
            batches = [next(data.train) for _ in range(settings.grad_accumulation)]
            lr = scheduler.lr  # the rate this update uses: lr_at(step)
            loss, grad_norm = loop.gradients(batches)  # forward, backward, clip: the weights are not changed yet
            if loop.diverges(loss, grad_norm):
                loop.diverged(step, f"loss {loss}, grad_norm {grad_norm} at step {step} (update not applied)")
                break
            if loop.books.pruning is not None:  # pruning (minitrain/pruning/): no gradient for a pruned weight
                loop.books.pruning.before_update(model)
            apply_update(optimizer, lambda: loop.gradients(batches)[0])  # noqa: B023 (called within this step)
            if loop.books.pruning is not None:  # the pruned weights stay 0
                loop.books.pruning.after_update(step + 1, model)
            state.last_loss = loss
            out_of_time = loop.out_of_time()
            last = step == loop.total_steps - 1 or out_of_time
            loop.show_progress(step, loss, lr, batches)

            if step % settings.log_every == 0 or last:
                loop.log_train(step, loss, lr, grad_norm)
            measured = None
            if (step + settings.val_offset) % settings.val_every == 0 or last:
                measured = loop.validate(step, loss)  # on the weights after this update
                if measured is None:  # diverged: the weights after this update are neither logged nor saved
                    break
                loop.check_early_stopping(step, measured)
            scheduler.step(None if measured is None else measured[settings.schedule_metric])
            state.step = step + 1  # a step boundary: everything below sees the state after update `step`

            loop.save_best(measured)
            loop.tell_callbacks(step, {"loss": loss, "lr": lr, "grad_norm": grad_norm, **(measured or {})},
                                validated=measured is not None)
            stopping = loop.stops_after(step, signals, last)
            loop.save_checkpoint_if_due(stopping)
            if stopping:
                if out_of_time:
                    loop.warn(f"training.duration reached after {state.step} steps")
                break
    return loop.finish(signals)


class _Loop:
    """What train()'s steps share: the objects trained, the settings, where rows go and who hears messages, the
    monitors, the loop state, and how the run stands (`status`, `stopped_at`, the last checkpoint saved).

    Built at the start of train(): the manifest is written with status "running" and the clock starts."""

    def __init__(self, model: Any, optimizer: Any, scheduler: Any, data: LoopData, settings: LoopSettings,
                 books: Bookkeeping) -> None:
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.data, self.settings, self.books = data, settings, books
        self.log_path = Path(books.log_path) if books.log_path else None
        self.state = books.start or LoopState()
        self.messages: list[str] = []
        self.halt = False  # an alert with action "halt" fired: the run stops after this step
        books.manifest.update(seed=settings.rng_seed, status="running")
        if books.manifest_path is not None:
            artifacts.write_manifest(books.manifest_path, books.manifest)

        self.t0 = time.perf_counter()
        self.first_step = self.state.step
        self.total_steps = settings.total_steps
        self.status, self.stopped_at, self.checkpoint = COMPLETED, None, None
        if self.state.stopped_by is not None:  # a callback stopped this run before the checkpoint it resumes from
            self.status, self.stopped_at, self.total_steps = EARLY_STOPPED, self.first_step - 1, self.first_step
        self.eval_seconds = 0.0
        if books.callbacks:
            books.callbacks.start(data.train, self.total_steps)
            self.actions = self._callback_actions()

    # -------------------------------------------------------------------------------------- messages and rows

    def info(self, message: str) -> None:
        """A progress message (a val result): shown by the progress display, if there is one."""
        if self.books.progress is not None:
            self.books.progress.write(message)

    def warn(self, message: str) -> None:
        """A message the user must see (a warning, an alert, why the run stopped); kept for the outcome."""
        self.messages.append(message)
        progress = self.books.progress
        if progress is not None and progress.mode not in ("none", "log"):  # "log": not on the screen
            progress.write(message)
        else:
            print(message, file=sys.stderr, flush=True)

    def log(self, row: dict[str, Any]) -> None:
        """Append `row` to train_log.jsonl and tell the callbacks."""
        # json.dumps writes floats with repr(): the shortest text that reads back to the same double, so the
        # same seed gives byte-identical logs.
        if self.log_path is not None:
            append_line(self.log_path, json.dumps(row))
        if self.books.callbacks:
            self.books.callbacks.logged(row)

    def show_progress(self, step: int, loss: float, lr: float, batches: list) -> None:
        if self.books.progress is not None:
            self.books.progress.update(step, loss=loss, lr=lr, tokens=sum(self.data.task.size(b) for b in batches))

    # -------------------------------------------------------------------------------------- one step

    def gradients(self, batches: list) -> tuple[float, float]:
        """(loss, grad_norm) of this step's batches, the gradient in `model.buffer.grad`: clipped to `clip_norm`
        (grad_norm is the norm before), then each element to ±`clip_value`."""
        settings = self.settings
        if self.data.workers is not None:
            loss, grad_norm = self.data.workers.gradients(self.model, batches, settings.clip_norm, self.state.step)
        else:
            loss, grad_norm = step_gradients(self.model, self.optimizer, batches, settings.clip_norm, self.data.task)
        if settings.clip_value is not None:
            clip_grad_value_(self.model.buffer, settings.clip_value)
        return float(loss), float(grad_norm)

    def log_train(self, step: int, loss: float, lr: float, grad_norm: float) -> None:
        """Write a train row, run the alerts on it, warn (once) about a high loss after the warm-up."""
        row = {"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm}
        self.log(row)
        warmup_steps = self.settings.warmup_steps
        # Step 0 is the untrained model, so even without a warm-up the check starts at step 1.
        high = self.settings.high_loss
        if step >= max(warmup_steps, 1) and not self.state.warned_high_loss and loss > high:
            self.state.warned_high_loss = True
            self.warn(f"warning: loss {loss:.3f} at step {step} is above {high:.1f} after the warm-up "
                      f"({warmup_steps} steps): the model is barely learning; check the lr, the masks and the data")
        self._alerts(step, row)

    def validate(self, step: int, loss: float) -> dict[str, float] | None:
        """Score the model (`data.validate`, else loop.evaluate on `data.val`), write the val row, track the best
        val so far and run the alerts on it; return the row's values plus this step's train `loss`. None when
        the run diverged: a val loss that is not finite, or a perplexity that overflows."""
        eval_start = time.perf_counter()
        if self.data.validate is not None:
            values = self.data.validate(self.model)
        else:
            val_loss, val_ppl = evaluate(self.model, self.data.val)
            values = {"val_loss": val_loss, "val_ppl": val_ppl}
        self.eval_seconds += time.perf_counter() - eval_start
        scored = {key: values[key] for key in ("val_loss", "val_ppl") if key in values}
        if any(math.isinf(v) for v in scored.values()) or (any(math.isnan(v) for v in scored.values())
                                                           and self._val_has_rows()):
            shown = ", ".join(f"{key} {value}" for key, value in scored.items())
            self.diverged(step, f"{shown} after the update of step {step}")
            return None
        self._log_val(step, values)
        return {**values, "loss": loss}

    def _val_has_rows(self) -> bool:
        """Whether validation scores anything: NaN is also the mean over no batches at all (nothing measured)."""
        val = self.data.val
        return self.data.validate is not None or not isinstance(val, Sized) or len(val) > 0

    def _log_val(self, step: int, values: dict[str, float]) -> None:
        state = self.state
        row = {"step": step, **values}
        val_loss, val_ppl = values["val_loss"], values.get("val_ppl")  # a table task has no perplexity
        self.log(row)
        state.last_val_loss, state.last_val_ppl = val_loss, val_ppl
        if state.best_val_loss is None or val_loss < state.best_val_loss:
            state.best_val_loss, state.best_val_ppl, state.best_val_step = val_loss, val_ppl, step
        if val_ppl is not None:
            self.info(f"step {step}: val_loss {val_loss:.4f}  val_ppl {val_ppl:.3f}  "
                      f"(best {state.best_val_ppl:.3f} at step {state.best_val_step})")
        else:
            shown = "  ".join(f"{k} {v:.4f}" for k, v in values.items())
            self.info(f"step {step}: {shown}  (best val_loss {state.best_val_loss:.4f} at step "
                      f"{state.best_val_step})")
        self._alerts(step, row)

    def _alerts(self, step: int, row: dict[str, Any]) -> None:
        """Run the alert rules on a logged row: each one that fires is a warning; a "halt" stops the run."""
        if self.books.alerts is None:
            return
        fired = self.books.alerts.check(step, row)
        for f in fired:
            self.warn(f"{f.action}: {f.message}")
        self.halt |= any(f.action == "halt" for f in fired)

    def tell_callbacks(self, step: int, metrics: dict[str, float], validated: bool) -> None:
        if self.books.callbacks:
            self.books.callbacks.after_step(step, metrics, validated, self.data.train, self.model, self.actions)

    # -------------------------------------------------------------------------------------- stopping

    def diverges(self, loss: float, grad_norm: float) -> bool:
        """A NaN or infinite loss or gradient norm, or a language model's loss whose perplexity overflows."""
        if not (math.isfinite(loss) and math.isfinite(grad_norm)):
            return True
        return self.data.task is LANGUAGE_MODELING and math.isinf(perplexity(loss))

    def diverged(self, step: int, what: str) -> None:
        """Stop at `step` with status "diverged"; `what` the numbers that say so."""
        self.status, self.stopped_at = DIVERGED, step
        # Not printed: the caller turns the outcome into the one error line the user sees.
        self.messages.append(what)

    def out_of_time(self) -> bool:
        """training.duration: whether the run has used its time (the one decision the clock makes)."""
        duration = self.settings.duration_seconds
        return duration is not None and time.perf_counter() - self.t0 >= duration

    def check_early_stopping(self, step: int, measured: dict[str, float]) -> None:
        """Count this validation for early stopping; at the patience-th one without improvement the run stops
        after this step (status early_stopped)."""
        stopper = self.books.early_stopping
        if stopper is not None and stopper.update(step, measured[stopper.metric]):
            self.status, self.stopped_at = EARLY_STOPPED, step
            self.warn(f"early stopping at step {step}: {stopper.metric} has not improved on {stopper.best:.6g} "
                      f"(step {stopper.best_step}) for {stopper.patience} evaluations")

    def stops_after(self, step: int, signals: StopSignal, last: bool) -> bool:
        """Whether the run ends after `step`: it already stopped (early stopping), a callback asked to, an alert
        halted it, a SIGINT/SIGTERM came, or this was the last step (by count or by training.duration). The first
        reason found is the status."""
        callbacks = self.books.callbacks
        if self.status != COMPLETED:
            return True
        if callbacks and callbacks.stop_reason is not None:
            self.status, self.stopped_at, self.state.stopped_by = EARLY_STOPPED, step, callbacks.stop_reason
            self.warn(f"stopped after {self.state.step} steps: {callbacks.stop_reason}")
        elif self.halt:
            self.status, self.stopped_at = HALTED, step
        elif signals.signum is not None and not last:
            self.status, self.stopped_at = INTERRUPTED, step
            self.warn(f"{signals.name} received: stopped after {self.state.step} steps")
        return self.status != COMPLETED or last

    # -------------------------------------------------------------------------------------- checkpoints

    def save_checkpoint_if_due(self, stopping: bool) -> None:
        """A checkpoint of the state after this step when the run stops here, and every `save_every` updates."""
        ckpt = self.books.checkpointing
        if ckpt is not None and (stopping or (ckpt.save_every and self.state.step % ckpt.save_every == 0)):
            self.checkpoint = str(self._write_checkpoint(best=False))

    def save_best(self, measured: dict[str, float] | None) -> None:
        """save_best: after a validation, write checkpoints/best.safetensors when the watched metric beats the
        best one saved."""
        ckpt, state = self.books.checkpointing, self.state
        if measured is None or ckpt is None or not ckpt.save_best:
            return
        value = measured[ckpt.metric]
        if state.best_saved is None or is_better(value, state.best_saved, ckpt.mode):
            state.best_saved = value
            self._write_checkpoint(best=True)

    def _callback_actions(self) -> Actions:
        """What a callback may ask of this loop: a log row, a progress line, a checkpoint of the state after the
        step, a stop."""

        def checkpoint(best: bool) -> Path | None:
            return None if self.books.checkpointing is None else self._write_checkpoint(best)

        return Actions(log=self.log, info=self.info, save_checkpoint=checkpoint,
                       request_stop=self.books.callbacks.request_stop)

    def _write_checkpoint(self, best: bool) -> Path:
        """The state after this step, by lab 02's `save_checkpoint`: into checkpoints/step-<N>.safetensors, which
        `latest` then names; `best`: into best.safetensors (never pruned), `latest` left alone."""
        manager, step = self.books.checkpointing.manager, self.state.step
        path = manager.dir / BEST_FILE if best else manager.path_for(step)
        save_checkpoint(path, step=step, **self._checkpoint_objects())
        if not best:
            manager.point_latest(path)
        return path

    def _checkpoint_objects(self) -> dict[str, Any]:
        """The keyword arguments of save_checkpoint but the step: the five state machines plus the loop's own state."""
        books = self.books
        extra = {"loop": asdict(self.state)}
        if books.checkpointing.data_sha256:
            extra["data_sha256"] = books.checkpointing.data_sha256
        extra.update({name: watcher.state_dict() for name in STATEFUL if (watcher := getattr(books, name))})
        return {
            "model": self.model,
            "optimizer": self.optimizer,
            "scheduler": self.scheduler,
            "batcher": self.data.train,
            "train_rng": self.model.rng,
            "config_hash": books.checkpointing.config_hash,
            "extra": extra,
        }

    # -------------------------------------------------------------------------------------- the outcome

    def finish(self, signals: StopSignal) -> dict[str, Any]:
        """The outcome (see train()), also recorded in the manifest."""
        wall = time.perf_counter() - self.t0
        state, books = self.state, self.books
        if self.checkpoint is None and books.checkpointing is not None:
            latest = books.checkpointing.manager.latest()  # diverged: the last good checkpoint stays the one to resume
            self.checkpoint = None if latest is None else str(latest)
        steps_run = state.step - self.first_step
        outcome = {
            "status": self.status,
            "steps_done": state.step,
            "loss": state.last_loss,
            "val_loss": state.last_val_loss,
            "val_ppl": state.last_val_ppl,
            "best_val_loss": state.best_val_loss,
            "best_val_ppl": state.best_val_ppl,
            "best_val_step": state.best_val_step,
            "wall_seconds": round(wall, 3),
            "eval_seconds": round(self.eval_seconds, 3),
            # Training steps alone: the validations' time is reported apart (eval_seconds).
            "ms_per_step": round(1000 * (wall - self.eval_seconds) / steps_run, 3) if steps_run else None,
            "checkpoint": self.checkpoint,
            "messages": self.messages,
        }
        if self.stopped_at is not None:
            outcome["stopped_at"] = self.stopped_at
        if self.status == INTERRUPTED:
            outcome["signal"] = signals.name
        if books.manifest_path is not None:
            artifacts.complete_manifest(
                books.manifest_path,
                books.manifest,
                status=self.status,
                steps_done=state.step,
                stopped_at=self.stopped_at,
                train_wall_seconds=outcome["wall_seconds"],
                eval_seconds=outcome["eval_seconds"],
                ms_per_step=outcome["ms_per_step"],
                checkpoint=self.checkpoint,
            )
        return outcome


def apply_update(optimizer: Any, gradients: Callable[[], float]) -> None:
    """optimizer.step(); a full-batch optimizer (L-BFGS, CG) gets `gradients` (the step's loss, its gradient
    recomputed on the same batches) as its closure, for its line search to call."""
    if optimizer.full_batch:
        optimizer.step(gradients)
    else:
        optimizer.step()


def step_gradients(
    model: Any, optimizer: Any, batches: list, clip_norm: float | None, task: Any
) -> tuple[float, float]:
    """(loss, grad_norm) of one step: lab 01's `loop.train_step` for the language model (so a student's own
    trains it), `tasks.task_train_step` for a table task."""
    if task is LANGUAGE_MODELING:
        return train_step(model, optimizer, batches, clip_norm)
    return task_train_step(model, optimizer, batches, clip_norm, task)
