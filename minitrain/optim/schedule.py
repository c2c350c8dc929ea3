"""Learning-rate schedules: a linear warm-up, then one of several decay shapes.

Every schedule is a function of the 0-based step s (the index of the optimizer step about to be taken):

    lr(s) = lr_max · (s + 1) / warmup_steps                       while s < warmup_steps   (warm-up, optional)
    lr(s) = start + (lr_max − start) · s / warmup_steps          the same, with warmup_start_lr = start > 0
    lr(s) = decay(k),  k = s − warmup_steps                      afterwards

The first is lab 01's warm-up (warmup_start_lr 0, the default: no step at lr 0); the second is torch's
LinearLR(start_factor=start/lr_max, total_iters=warmup_steps): step 0 trains at start (torch refuses a start
factor of 0). decay(0) = lr_max and, for the schedules with an end, k running over
D = decay_steps (default total_steps − warmup_steps; lr_min after it):

    warmup_cosine  decay(k) = lr_min + ½(lr_max − lr_min)(1 + cos(π·k/D)),  lr_min once k >= D   (lab 01)
    linear         decay(k) = lr_max + (lr_min − lr_max)·min(k/D, 1)
    constant       decay(k) = lr_max
    step           decay(k) = lr_max · gamma^⌊k/step_size⌋
    exponential    decay(k) = max(lr_min, lr_max · gamma^k)
    one_cycle      torch's OneCycleLR: lr_max/div_factor up to lr_max over pct_start of the run, then down to
                   lr_min if it is above 0, else lr_max/(div_factor·final_div_factor), at step total_steps − 1
                   (it is its own warm-up); anneal_strategy "cos" (half cosines) or "linear" (straight lines)
    plateau        torch's ReduceLROnPlateau: lr ← max(lr·factor, lr_min) after `patience` reported metrics
                   without a relative improvement of `threshold`; metrics come through `step(metric=...)`.

Use: `lr_at(s)` is pure (plateau's depends on the metrics seen so far); `lr` is lr_at(current step); `step()`
advances one optimizer step and, if the schedule was given an optimizer, sets that optimizer's lr. The loop:

    for s in range(total_steps): ...backward...; optimizer.step(); scheduler.step(metric=val_loss or None)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Any, ClassVar, Protocol

from minitrain.common.errors import ArgumentError, UserError
from minitrain.common.registry import Registry, check_choice


class HasLearningRate(Protocol):
    def set_lr(self, lr: float) -> None: ...


def _require(ok: bool, key: str, rule: str, value: object) -> None:
    if not ok:
        raise ArgumentError(f"scheduler.{key}: must be {rule}, got {value!r}")


@dataclass(eq=False, repr=False)
class Schedule:
    """Warm-up (shared) + `_decay(k)` (each schedule's own shape); `step()`, `lr`, `state_dict()`.

    Every subclass is made a dataclass: its annotated attributes are its keywords after lr_max, with their
    defaults (warmup_steps, warmup_start_lr and the optimizer come last); its `__post_init__` checks its own and
    then calls this one, which checks the shared ones (and lr_min, where a schedule has it), stores each `float`
    as a float and sets the optimizer's first lr. `follows_metric`: it reads the metric `step` is given (the
    config's scheduler.metric names which).
    """

    name: ClassVar[str]
    follows_metric: ClassVar[bool] = False
    lr_max: float
    _: KW_ONLY
    warmup_steps: int = 0
    warmup_start_lr: float = 0.0
    optimizer: HasLearningRate | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(eq=False, repr=False)(cls)  # its annotated attributes become its constructor's keywords

    def __post_init__(self) -> None:
        lr_max, warmup_steps = self.lr_max, self.warmup_steps
        _require(lr_max > 0, "lr_max", "> 0", lr_max)
        _require(isinstance(warmup_steps, int) and warmup_steps >= 0, "warmup_steps", "an integer >= 0", warmup_steps)
        for key in ("warmup_start_lr", "lr_min"):  # the warm-up's start and the decay's floor
            if hasattr(self, key):
                _require(0 <= getattr(self, key) <= lr_max, key, f"in [0, lr_max={lr_max}]", getattr(self, key))
        for f in fields(self):
            if f.type == "float":
                setattr(self, f.name, float(getattr(self, f.name)))
        self.step_count = 0  # the 0-based index of the next optimizer step
        self._apply()

    def _decay(self, k: int) -> float:
        raise NotImplementedError

    def lr_at(self, step: int) -> float:
        """The learning rate of 0-based step `step`."""
        if step < 0:
            raise ValueError(f"lr_at: step must be >= 0, got {step}")
        if step < self.warmup_steps:
            start = self.warmup_start_lr  # 0: lab 01's rise from lr_max/warmup_steps; > 0: torch's LinearLR
            return start + (self.lr_max - start) * (step + (start == 0)) / self.warmup_steps
        return self._decay(step - self.warmup_steps)

    @property
    def lr(self) -> float:
        """The learning rate of the step about to be taken."""
        return self.lr_at(self.step_count)

    def step(self, metric: float | None = None) -> None:
        """Advance by one optimizer step; `metric` (e.g. the val loss) matters to `plateau` only."""
        self.step_count += 1
        if metric is not None:
            self._observe(float(metric))
        self._apply()

    def _observe(self, metric: float) -> None:
        """Schedules that follow a metric override this; the others ignore it."""

    def _apply(self) -> None:
        if self.optimizer is not None:
            self.optimizer.set_lr(self.lr)

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state: the type and the step (plateau adds what it tracks)."""
        return {"type": self.name, "step": self.step_count}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        missing = [key for key in self.state_dict() if key not in state]
        if missing:
            raise UserError(f"scheduler state: missing {', '.join(repr(key) for key in missing)}")
        if state["type"] != self.name:
            raise UserError(f"scheduler state: saved by '{state['type']}', cannot load into '{self.name}'")
        self._load(state)
        self._apply()

    def _load(self, state: Mapping[str, Any]) -> None:
        self.step_count = int(state["step"])


class _Finite(Schedule):
    """A schedule that decays towards `lr_min` over `decay_steps` after the warm-up (default: until `total_steps`,
    the warm-up counted inside it), then stays at lr_min: `anneal(lr_max, lr_min, min(k / decay_steps, 1))`."""

    anneal: ClassVar[Callable[[float, float, float], float]]

    total_steps: int
    lr_min: float = 0.0
    decay_steps: int | None = None

    def __post_init__(self) -> None:
        total_steps, warmup_steps, decay_steps = self.total_steps, self.warmup_steps, self.decay_steps
        _require(isinstance(total_steps, int) and total_steps > warmup_steps, "total_steps",
                 f"an integer > warmup_steps ({warmup_steps})", total_steps)
        _require(decay_steps is None or (isinstance(decay_steps, int) and decay_steps >= 1), "decay_steps",
                 "an integer >= 1", decay_steps)
        self.decay_steps = decay_steps if decay_steps is not None else total_steps - warmup_steps
        super().__post_init__()

    def _decay(self, k: int) -> float:
        return type(self).anneal(self.lr_max, self.lr_min, min(k / self.decay_steps, 1.0))


def _cosine_between(start: float, end: float, progress: float) -> float:
    """Half a cosine from `start` (progress 0) to `end` (progress 1)."""
    return end + 0.5 * (start - end) * (1.0 + math.cos(math.pi * progress))


def _line_between(start: float, end: float, progress: float) -> float:
    """A straight line from `start` (progress 0) to `end` (progress 1), as torch's linear annealing."""
    return (end - start) * progress + start


_ANNEAL = {"cos": _cosine_between, "linear": _line_between}


class WarmupCosine(_Finite):
    """Lab 01's schedule: linear warm-up to lr_max, cosine down to lr_min at total_steps, lr_min after."""

    name = "warmup_cosine"
    anneal = _cosine_between


class Linear(_Finite):
    """Straight line from lr_max down to lr_min at total_steps."""

    name = "linear"
    anneal = _line_between


class Constant(Schedule):
    """lr_max throughout (after the optional warm-up)."""

    name = "constant"

    def _decay(self, k: int) -> float:
        return self.lr_max


class Step(Schedule):
    """Multiply by `gamma` every `step_size` steps."""

    name = "step"

    step_size: int
    gamma: float = 0.1

    def __post_init__(self) -> None:
        step_size = self.step_size
        _require(isinstance(step_size, int) and step_size >= 1, "step_size", "an integer >= 1", step_size)
        _require(0 < self.gamma <= 1, "gamma", "in (0, 1]", self.gamma)
        super().__post_init__()

    def _decay(self, k: int) -> float:
        return self.lr_max * self.gamma ** (k // self.step_size)


class Exponential(Schedule):
    """Multiply by `gamma` every step, never below `lr_min`."""

    name = "exponential"

    gamma: float
    lr_min: float = 0.0

    def __post_init__(self) -> None:
        _require(0 < self.gamma <= 1, "gamma", "in (0, 1]", self.gamma)
        super().__post_init__()

    def _decay(self, k: int) -> float:
        return max(self.lr_min, self.lr_max * self.gamma**k)


class OneCycle(Schedule):
    """torch's OneCycleLR over `total_steps` steps, ending at lr_min when that is above 0."""

    name = "one_cycle"

    total_steps: int
    pct_start: float = 0.3
    div_factor: float = 25.0
    final_div_factor: float = 1e4
    anneal_strategy: str = "cos"
    lr_min: float = 0.0
    warmup_start_lr: float = field(default=0.0, init=False)  # not a keyword: the rise starts at lr_max/div_factor

    def __post_init__(self) -> None:
        lr_max, total_steps, pct_start, lr_min = self.lr_max, self.total_steps, self.pct_start, self.lr_min
        _require(self.warmup_steps == 0, "warmup_steps", "0 for one_cycle (its rising phase, pct_start, is the "
                 "warm-up)", self.warmup_steps)
        _require(isinstance(total_steps, int) and total_steps >= 2, "total_steps", "an integer >= 2", total_steps)
        _require(0 < pct_start < 1 and pct_start * total_steps > 1, "pct_start", "in (1/total_steps, 1)", pct_start)
        _require(self.div_factor >= 1, "div_factor", ">= 1", self.div_factor)
        _require(self.final_div_factor >= 1, "final_div_factor", ">= 1", self.final_div_factor)
        _require(self.anneal_strategy in _ANNEAL, "anneal_strategy", "'cos' or 'linear'", self.anneal_strategy)
        self.lr_start = lr_max / self.div_factor
        # lr_min is the floor every schedule decays to; 0 (its default) leaves torch's end, start/final_div_factor.
        self.lr_end = lr_min if lr_min > 0 else self.lr_start / self.final_div_factor
        self.peak_step = pct_start * total_steps - 1.0  # torch's end of the rising phase (may be fractional)
        self.anneal = _ANNEAL[self.anneal_strategy]
        super().__post_init__()

    def _decay(self, k: int) -> float:
        if k <= self.peak_step:
            return self.anneal(self.lr_start, self.lr_max, k / self.peak_step)
        progress = min((k - self.peak_step) / (self.total_steps - 1 - self.peak_step), 1.0)
        return self.anneal(self.lr_max, self.lr_end, progress)


class Plateau(Schedule):
    """torch's ReduceLROnPlateau (relative threshold): cut the lr when the reported metric stops improving.

    After the warm-up the lr is `level`, which starts at lr_max. Each reported metric is compared with the best
    so far: better means < best·(1 − threshold) (mode "min") or > best·(1 + threshold) ("max"). After more than
    `patience` reports in a row that are not better, level ← max(level·factor, lr_min) and `cooldown` reports
    are ignored. `lr_at(s)` past the warm-up is the current level (it depends on the metrics, not on s).
    """

    name = "plateau"
    follows_metric = True

    factor: float = 0.1
    patience: int = 10
    threshold: float = 1e-4
    mode: str = "min"
    cooldown: int = 0
    lr_min: float = 0.0

    def __post_init__(self) -> None:
        _require(0 < self.factor < 1, "factor", "in (0, 1)", self.factor)
        _require(isinstance(self.patience, int) and self.patience >= 0, "patience", "an integer >= 0", self.patience)
        _require(self.threshold >= 0, "threshold", ">= 0", self.threshold)
        _require(self.mode in ("min", "max"), "mode", "'min' or 'max'", self.mode)
        _require(isinstance(self.cooldown, int) and self.cooldown >= 0, "cooldown", "an integer >= 0", self.cooldown)
        self.level = float(self.lr_max)
        self.best: float | None = None
        self.num_bad = 0
        self.cooldown_left = 0
        super().__post_init__()

    def _decay(self, k: int) -> float:
        return self.level

    def _is_better(self, metric: float) -> bool:
        if self.best is None:
            return not math.isnan(metric)
        if self.mode == "min":
            return metric < self.best * (1.0 - self.threshold)
        return metric > self.best * (1.0 + self.threshold)

    def _observe(self, metric: float) -> None:
        if self._is_better(metric):
            self.best, self.num_bad = metric, 0
        else:
            self.num_bad += 1
        if self.cooldown_left > 0:
            self.cooldown_left -= 1
            self.num_bad = 0
        if self.num_bad > self.patience:
            self.level = max(self.level * self.factor, self.lr_min)
            self.cooldown_left, self.num_bad = self.cooldown, 0

    def state_dict(self) -> dict[str, Any]:
        tracked = {"level": self.level, "best": self.best, "num_bad": self.num_bad, "cooldown_left": self.cooldown_left}
        return {**super().state_dict(), **tracked}

    def _load(self, state: Mapping[str, Any]) -> None:
        super()._load(state)
        self.level, self.num_bad, self.cooldown_left = (float(state["level"]), int(state["num_bad"]),
                                                        int(state["cooldown_left"]))
        self.best = None if state["best"] is None else float(state["best"])


SCHEDULES: Registry[type[Schedule]] = Registry(
    "schedule", (WarmupCosine, Constant, Linear, Step, Exponential, Plateau, OneCycle))


def build_scheduler(type: str, optimizer: HasLearningRate | None = None, **keys: Any) -> Schedule:
    """Construct schedule `type` with `keys`; an unknown type, unknown key or missing key is a UserError."""
    check_choice("scheduler", SCHEDULES, type, keys, skip=("optimizer",))
    return SCHEDULES[type](optimizer=optimizer, **keys)
