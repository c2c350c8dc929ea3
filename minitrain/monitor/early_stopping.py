"""Lab 04: early stopping and checkpoint selection, both a matter of "is this value better than the best?".

After each validation the engine (`minitrain/training/engine.py`) calls `stopper.update(step, value)` with the watched
metric (`training.early_stopping.metric`, val_loss by default). A value improves on the best so far when

    mode "min":  value < best − min_delta          mode "max":  value > best + min_delta

and the `patience`-th evaluation in a row that does not improve returns True: stop there. With val_every = 50
and patience = 3, a best val_loss at step 500 followed by no improvement at 550, 600 and 650 stops at step 650.
The best step and value are kept so the engine can report them, and the state goes into every checkpoint, so
a resumed run stops exactly where the uninterrupted one would.

`save_best` (`training.checkpoint.save_best`) uses `is_better` (with min_delta 0) to decide when
checkpoints/best.safetensors is rewritten.

    stopper = EarlyStopping("val_loss", patience=5)
    if stopper.update(step, val_loss):
        break
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def is_better(value: float, best: float | None, mode: str = "min", min_delta: float = 0.0) -> bool:
    """True when `value` improves on `best` by more than `min_delta`: lower for mode "min", higher for "max".

    Nothing improves on a NaN-free best with a NaN; when there is no best yet (`best` is None), any value that
    is not NaN does.
    """
    if math.isnan(value):
        return False
    if best is None:
        return True
    if mode == "min":
        return value < best - min_delta
    return value > best + min_delta


class EarlyStopping:
    """Tracks the best value of one metric and says when `patience` evaluations brought no improvement.

    Attributes the engine reads: `metric`, `patience`, `min_delta`, `mode` (as given), `best` (the best value
    so far, None before the first update) and `best_step` (where it was measured).
    """

    def __init__(self, metric: str = "val_loss", patience: int = 5, min_delta: float = 0.0, mode: str = "min") -> None:
        """A ValueError for patience < 1, min_delta < 0 or a mode other than "min" / "max"."""
        if patience < 1:
            raise ValueError(f"patience must be at least 1, got {patience}")
        if min_delta < 0:
            raise ValueError(f"min_delta must be >= 0, got {min_delta}")
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        self.metric, self.patience, self.min_delta, self.mode = metric, patience, min_delta, mode
        self.best: float | None = None
        self.best_step: int | None = None
        self.bad_evaluations = 0

    def update(self, step: int, value: float) -> bool:
        """Record the metric measured at `step`; True means stop now.

        An improvement (`is_better` with this stopper's mode and min_delta) becomes the new best and resets the
        count of evaluations without improvement; anything else adds one to it, and reaching `patience` stops.
        """
        if is_better(value, self.best, self.mode, self.min_delta):
            self.best, self.best_step, self.bad_evaluations = float(value), step, 0
            return False
        self.bad_evaluations += 1
        return self.bad_evaluations >= self.patience

    def state_dict(self) -> dict[str, Any]:
        """Everything `update` depends on, as JSON-serialisable values (a checkpoint stores it)."""
        return {"best": self.best, "best_step": self.best_step, "bad_evaluations": self.bad_evaluations}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a `state_dict()`: the next `update` decides as the saved stopper would have."""
        self.best = None if state["best"] is None else float(state["best"])
        self.best_step = None if state["best_step"] is None else int(state["best_step"])
        self.bad_evaluations = int(state["bad_evaluations"])
