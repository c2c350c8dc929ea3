"""Choosing how a step computes by timing training steps (`runtime.threads: measure`), not by a size rule.

`minitrain.common.runtime.blas_threads_for` guesses from the model's size: 1 thread below 2²⁴ multiply-adds per product,
every core above. The guess is right on a quiet machine and can be badly wrong on a busy one: when another
process holds one of two cores, a step on 2 BLAS threads waits for a descheduled worker at every product (the
scaled config: 1.5-1.8 s instead of 0.8-0.9 s on 1 thread). `SettingChooser` measures instead. What it chooses
among are compute settings (minitrain/common/compute.py): 1 process × 1 .. cpu_count BLAS threads and, when the
run allows data-parallel workers (`runtime.data_parallel` with backend local), N workers × 1 thread.

- **Trial.** Each candidate runs `trial_steps` consecutive training steps, in `rounds` alternating rounds
  (1 thread, 2 threads, 2 workers, 1 thread, ...), so a load change during the trial hits every candidate. The
  first step of each block is not counted (after a switch the BLAS threads are waking up, or the worker pool is
  starting). A candidate whose median is already more than `give_up` times the best one's is not given its later
  blocks: on a busy machine the wrong setting can be 2-3× slower, and its steps are what a trial costs. The choice
  is the candidate with the smallest median.
- **Watch.** Afterwards the median of the last `window` steps is compared with the chosen candidate's median in
  the trial; when it has moved by more than `drift` (relative, either way: a process started or stopped), the
  trial runs again. A trial that keeps the same setting doubles the window (up to `max_window`), so a machine
  whose load only jitters does not pay for trial after trial; a trial that changes the setting resets it.

`apply(setting, final)` puts a setting in force before the next step: `final` is False for a trial's block and
True for a decision, so the applier can keep a worker pool alive between a trial's blocks and stop it only when
the decision is a one-process setting. Every decision is printed (so it reaches logs/train.log) and listed in
report.md; nothing goes into train_log.jsonl, whose bytes do not depend on timing.

Why this is opt-in: 1 and 2 BLAS threads give results that differ in the last bits (for every product shape of
MiniGPT, on this project's machines). A choice made from timings therefore makes a run's numbers depend on the
machine's load, and the project promises byte-identical logs and weights for the same config and seeds. The
default (`rule`) keeps the size rule, which depends only on the config and the machine's core count. A run whose
choices never leave the 1-thread settings (1 thread, workers) keeps the bytes of `runtime.threads: 1`.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from minitrain.callbacks.callback import Callback, Context
from minitrain.common.compute import Setting
from minitrain.common.runtime import set_blas_threads


def thread_settings(cpu_count: int | None = None) -> list[Setting]:
    """1 process × 1 .. cpu_count BLAS threads: the candidates when no worker is allowed."""
    return [Setting(n) for n in range(1, (cpu_count or os.cpu_count() or 1) + 1)]


def apply_threads(setting: Setting, final: bool) -> None:
    """The applier for one-process settings: the BLAS thread count, in this process."""
    if setting.workers > 1:
        raise ValueError(f"apply_threads cannot start workers ({setting}); give the run's applier")
    set_blas_threads(setting.threads)


class SettingChooser:
    """Feed it each training step's wall time (`observe(seconds)`); it applies the settings as it decides.

    `apply(setting, final)` puts a setting in force (default: `apply_threads`), `announce` reports a decision
    (default: print). `decisions` lists each as {"step", "setting", "ms": {setting: median ms}}.
    """

    def __init__(
        self,
        candidates: Sequence[Setting] | None = None,
        *,
        trial_steps: int = 4,
        rounds: int = 2,
        window: int = 20,
        max_window: int = 320,
        drift: float = 0.3,
        give_up: float = 1.5,
        apply: Callable[[Setting, bool], Any] = apply_threads,
        announce: Callable[[str], Any] = print,
    ) -> None:
        self.candidates = list(candidates or thread_settings())
        if not all(isinstance(c, Setting) for c in self.candidates) or len(set(self.candidates)) < len(self.candidates):
            raise ValueError(f"SettingChooser: candidates must be distinct Settings, got {self.candidates}")
        if trial_steps < 2 or rounds < 1 or not 1 <= window <= max_window or drift <= 0 or give_up <= 1:
            raise ValueError("SettingChooser: need trial_steps >= 2, rounds >= 1, 1 <= window <= max_window, "
                             "drift > 0 and give_up > 1")
        self.trial_steps, self.rounds, self.drift, self.give_up = trial_steps, rounds, drift, give_up
        self.window, self._first_window, self._max_window = window, window, max_window
        self._apply, self._announce = apply, announce
        self.decisions: list[dict[str, Any]] = []
        self.setting: Setting | None = None  # the chosen one; None while the first trial runs
        self._steps_seen = 0
        self._start_trial()

    # A trial is a queue of blocks, one candidate each, run `trial_steps` steps at a time; the first step of a
    # block is not counted.
    def _start_trial(self) -> None:
        self._blocks = deque(c for _ in range(self.rounds) for c in self.candidates)
        self._trial_times: dict[Setting, list[float]] = {c: [] for c in self.candidates}
        self._block_step = 0
        self._apply(self._blocks[0], False)

    def _clearly_slower(self, c: Setting) -> bool:
        medians = {m: statistics.median(t) for m, t in self._trial_times.items() if t}
        return c in medians and medians[c] > self.give_up * min(medians.values())

    def observe(self, seconds: float) -> None:
        """Record the step just run (on the setting applied before it) and apply the one for the next step."""
        self._steps_seen += 1
        if self._blocks:
            c = self._blocks[0]
            if self._block_step > 0:
                self._trial_times[c].append(seconds)
            self._block_step += 1
            if self._block_step == self.trial_steps:
                self._blocks.popleft()
                while self._blocks and self._clearly_slower(self._blocks[0]):
                    self._blocks.popleft()
                self._block_step = 0
                if not self._blocks:
                    self._decide()
                elif self._blocks[0] != c:
                    self._apply(self._blocks[0], False)
            return
        self._recent.append(seconds)
        if len(self._recent) == self.window:
            reference = self.decisions[-1]["ms"][self.setting] / 1e3
            if abs(statistics.median(self._recent) / reference - 1) > self.drift:
                self._announce(f"threads: step time moved from {1e3 * reference:.1f} ms to "
                               f"{1e3 * statistics.median(self._recent):.1f} ms; measuring again")
                self._start_trial()

    def _decide(self) -> None:
        ms = {c: round(1e3 * statistics.median(times), 3) for c, times in self._trial_times.items()}
        previous, self.setting = self.setting, min(ms, key=ms.get)
        self.window = min(2 * self.window, self._max_window) if self.setting == previous else self._first_window
        self._recent: deque[float] = deque(maxlen=self.window)  # the watch's steps
        self._apply(self.setting, True)
        self.decisions.append({"step": self._steps_seen, "setting": self.setting, "ms": ms})
        timings = ", ".join(f"{c} → {t:.1f} ms" for c, t in ms.items())
        self._announce(f"threads: measured {timings} per step; using {self.setting}")


class MeasuredSettings(Callback):
    """The loop's side of `SettingChooser`: times the interval between one step's end and the next, leaving out
    the intervals that hold a validation (the loop validates before it calls the step-end hooks)."""

    def __init__(self, chooser: SettingChooser | None = None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.chooser = chooser if chooser is not None else SettingChooser()
        self._clock = clock
        self._last: float | None = None

    def on_step_end(self, ctx: Context) -> None:
        now = self._clock()
        if self._last is not None and "val_loss" not in ctx.metrics:
            self.chooser.observe(now - self._last)
        self._last = now

    def report_lines(self) -> list[str]:
        lines = ["## Threads and workers (measured)", "", "| after step | setting | median ms per step, by setting |",
                 "| --- | --- | --- |"]
        for d in self.chooser.decisions:
            timings = ", ".join(f"{c}: {t:.1f}" for c, t in d["ms"].items())
            lines.append(f"| {d['step']} | {d['setting']} | {timings} |")
        return lines if self.chooser.decisions else []
