"""Early stopping: stop when a watched metric has stopped improving.

After each evaluation the loop calls `update(step, value)`. A value improves on the best so far when

    mode "min":  value < best − min_delta          mode "max":  value > best + min_delta

and the `patience`-th evaluation in a row that does not improve returns True: stop there. With val_every = 50
and patience = 3, a best val_loss at step 500 followed by no improvement at 550, 600 and 650 stops at step 650.
The best step and value are kept so the loop can report them.

    stopper = EarlyStopping.from_config(cfg.training.early_stopping)   # None when the section is absent
    if stopper is not None and stopper.update(step, val_loss):
        break
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


class EarlyStopping:
    """Tracks the best value of one metric and says when `patience` evaluations brought no improvement."""

    def __init__(self, metric: str = "val_loss", patience: int = 5, min_delta: float = 0.0, mode: str = "min") -> None:
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
        self.stopped_step: int | None = None

    @classmethod
    def from_config(cls, section: Any) -> EarlyStopping | None:
        """From `cfg.training.early_stopping` (metric, patience, min_delta, mode); None when it is None."""
        if section is None:
            return None
        return cls(section.metric, section.patience, section.min_delta, section.mode)

    def improves(self, value: float) -> bool:
        if self.best is None:
            return not math.isnan(value)
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def update(self, step: int, value: float) -> bool:
        """Record the metric measured at `step`; True means stop now."""
        if self.improves(value):
            self.best, self.best_step, self.bad_evaluations = float(value), step, 0
            return False
        self.bad_evaluations += 1
        if self.bad_evaluations >= self.patience:
            self.stopped_step = step
            return True
        return False

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state for checkpoints."""
        return {"best": self.best, "best_step": self.best_step, "bad_evaluations": self.bad_evaluations}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.best = None if state["best"] is None else float(state["best"])
        self.best_step = None if state["best_step"] is None else int(state["best_step"])
        self.bad_evaluations = int(state["bad_evaluations"])
