"""The measured thread choice (minitrain/callbacks/thread_choice.py): it alternates the candidates, picks the fastest
from its own timings, measures again when the step time drifts, skips the intervals that hold a validation, and in a
run reports its decisions outside train_log.jsonl. Timings here are made up (no test reads the clock)."""

from __future__ import annotations

import json

import pytest
from test_run import train_tiny, write_tiny_run

from minitrain.callbacks.base import Context
from minitrain.callbacks.thread_choice import MeasuredThreads, ThreadChooser
from minitrain.common.errors import UserError
from minitrain.common.runtime import get_blas_threads, set_blas_threads
from minitrain.config import load_config
from minitrain.training.plan import configure_runtime


class FakeMachine:
    """Step times by thread count, which a test can change (another process starting)."""

    def __init__(self, ms: dict[int, float]) -> None:
        self.ms, self.threads, self.set_calls, self.messages = dict(ms), None, [], []

    def set_threads(self, n: int) -> None:
        self.threads = n
        self.set_calls.append(n)

    def chooser(self, **options) -> ThreadChooser:
        return ThreadChooser([1, 2], set_threads=self.set_threads, announce=self.messages.append, **options)

    def run(self, chooser: ThreadChooser, steps: int) -> list[int]:
        used = []
        for _ in range(steps):
            used.append(self.threads)
            chooser.observe(self.ms[self.threads] / 1e3)
        return used


def test_the_trial_alternates_candidates_and_picks_the_fastest():
    machine = FakeMachine({1: 3.0, 2: 2.5})
    chooser = machine.chooser(trial_steps=3, rounds=2)
    used = machine.run(chooser, 12)
    assert used == [1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2]
    assert chooser.threads == 2 and machine.threads == 2
    assert chooser.decisions == [{"step": 12, "threads": 2, "ms": {1: 3.0, 2: 2.5}}]
    assert machine.messages == ["threads: measured 1 → 3.0 ms, 2 → 2.5 ms per step; using 2 BLAS thread(s)"]


def test_a_clearly_slower_candidate_gets_no_more_blocks():
    machine = FakeMachine({1: 3.0, 2: 9.0})  # 2 threads with one core busy: 3x slower
    chooser = machine.chooser(trial_steps=3, rounds=3, give_up=1.5)
    used = machine.run(chooser, 12)
    assert used == [1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1]  # rounds 2 and 3 skip 2 threads: 6 steps saved
    assert chooser.decisions == [{"step": 12, "threads": 1, "ms": {1: 3.0, 2: 9.0}}]
    close = FakeMachine({1: 3.0, 2: 4.0})  # 1.33x: inside give_up, both candidates run every round
    assert close.run(close.chooser(trial_steps=2, rounds=2, give_up=1.5), 8) == [1, 1, 2, 2, 1, 1, 2, 2]


def test_the_first_step_after_a_switch_is_not_counted():
    machine = FakeMachine({1: 3.0, 2: 2.5})
    chooser = machine.chooser(trial_steps=2, rounds=1)
    chooser.observe(1.0)  # 1 thread, first of its block: a wake-up outlier that must not count
    chooser.observe(0.003)
    chooser.observe(1.0)  # 2 threads, first of its block
    chooser.observe(0.004)
    assert chooser.threads == 1 and chooser.decisions[0]["ms"] == {1: 3.0, 2: 4.0}


def test_a_drift_in_step_time_starts_a_new_trial_that_can_change_the_choice():
    machine = FakeMachine({1: 8.0, 2: 5.0})
    chooser = machine.chooser(trial_steps=2, rounds=1, window=5, drift=0.3)
    machine.run(chooser, 4 + 10)  # the trial, then two quiet windows: no new trial
    assert chooser.threads == 2 and len(chooser.decisions) == 1
    machine.ms = {1: 8.5, 2: 11.0}  # another process takes a core: 2 threads now wait for it
    machine.run(chooser, 5 + 4)  # a window shows the drift, then the new trial
    assert len(chooser.decisions) == 2 and chooser.threads == 1 and machine.threads == 1
    assert any(m.startswith("threads: step time moved from 5.0 ms to 11.0 ms") for m in machine.messages)
    machine.run(chooser, 15)  # steady again: the choice holds
    assert len(chooser.decisions) == 2


def test_a_trial_that_keeps_the_count_doubles_the_watch_window():
    machine = FakeMachine({1: 8.0, 2: 5.0})
    chooser = machine.chooser(trial_steps=2, rounds=1, window=4, max_window=8, drift=0.3)
    machine.run(chooser, 4)
    assert chooser.window == 4
    machine.ms[2] = 7.0  # 40 % slower, still the faster count
    machine.run(chooser, 4 + 4)  # a window, then the trial: the same choice
    assert len(chooser.decisions) == 2 and chooser.threads == 2 and chooser.window == 8
    machine.ms[2] = 9.5  # 36 % slower again: now a full window of 8 steps before the next trial
    machine.run(chooser, 7)
    assert len(chooser.decisions) == 2 and chooser.threads == 2
    machine.run(chooser, 1 + 4)
    assert len(chooser.decisions) == 3 and chooser.threads == 1 and chooser.window == 4  # changed: back to 4
    machine.run(chooser, 4 + 4)
    assert chooser.window == 4 and len(chooser.decisions) == 3


def test_small_changes_do_not_start_a_trial():
    machine = FakeMachine({1: 3.0, 2: 4.0})
    chooser = machine.chooser(trial_steps=2, rounds=1, window=4, drift=0.3)
    machine.run(chooser, 4)
    machine.ms[1] = 3.6  # +20 %: inside the tolerance
    machine.run(chooser, 40)
    assert len(chooser.decisions) == 1


@pytest.mark.parametrize("options", [dict(trial_steps=1), dict(rounds=0), dict(window=0), dict(drift=0.0),
                                     dict(window=30, max_window=20), dict(give_up=1.0)])
def test_bad_settings_are_refused(options):
    with pytest.raises(ValueError):
        ThreadChooser([1, 2], **options)
    with pytest.raises(ValueError, match="candidates"):
        ThreadChooser([0, 1])


def test_the_callback_times_step_ends_and_skips_intervals_with_a_validation():
    seen = []

    class Recording(ThreadChooser):
        def observe(self, seconds: float) -> None:
            seen.append(round(seconds, 6))

    now = [0.0]
    callback = MeasuredThreads(Recording([1], set_threads=lambda n: None), clock=lambda: now[0])
    for step, (elapsed, metrics) in enumerate([(1.0, {}), (0.5, {}), (9.0, {"val_loss": 1.0}), (0.25, {})]):
        now[0] += elapsed
        callback.on_step_end(Context(step=step, total_steps=4, epoch=0, metrics=metrics))
    assert seen == [0.5, 0.25]  # the first end has no interval before it; the validated one is left out


def test_runtime_threads_in_the_config(tmp_path):
    config = write_tiny_run(tmp_path)
    before = get_blas_threads()
    try:
        assert configure_runtime(load_config(config, ["runtime.threads=1"]))["blas_threads"] == 1
        assert get_blas_threads() == 1
        assert configure_runtime(load_config(config, ["runtime.threads=measure"]))["blas_threads"] == "measure"
        assert configure_runtime(load_config(config))["blas_threads"] == 1  # the rule, at the tiny size
    finally:
        set_blas_threads(before)
    with pytest.raises(UserError, match=r"runtime\.threads"):
        load_config(config, ["runtime.threads=several"])


@pytest.mark.slow
def test_a_measured_run_reports_its_decisions_outside_the_train_log(tmp_path):
    config = write_tiny_run(tmp_path)  # 24 steps, val_every 5
    before = get_blas_threads()
    try:
        train_tiny(config, tmp_path / "measured", ["runtime.threads=measure"])
    finally:
        set_blas_threads(before)
    run_dir = tmp_path / "measured"
    rows = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
    assert all(set(row) <= {"step", "loss", "lr", "grad_norm", "val_loss", "val_ppl"} for row in rows)
    assert "threads: measured 1 →" in (run_dir / "logs" / "train.log").read_text()
    assert "## Threads (measured)" in (run_dir / "report.md").read_text()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["runtime"]["blas_threads"] == "measure" and manifest["steps_done"] == 24
