"""The measured choice of threads and workers (minitrain/callbacks/thread_choice.py): it alternates the candidate
settings, picks the fastest from its own timings, measures again when the step time drifts, skips the intervals that
hold a validation, and in a run reports its decisions outside train_log.jsonl. Timings here are made up (no test
reads the clock); the real run that starts and stops workers is in tests/parallel/test_data_parallel.py."""

from __future__ import annotations

import json

import pytest
from test_run import train_tiny, write_tiny_run

from minitrain.callbacks.callback import Context
from minitrain.callbacks.thread_choice import MeasuredSettings, SettingChooser, apply_threads
from minitrain.common.compute import Setting
from minitrain.common.errors import UserError
from minitrain.common.runtime import get_blas_threads, set_blas_threads
from minitrain.config import load_config
from minitrain.training.plan import configure_runtime

T1, T2, W2 = Setting(1), Setting(2), Setting(1, workers=2)  # 1 thread, 2 threads, 2 workers × 1 thread


class FakeMachine:
    """Step times by setting, which a test can change (another process starting); it records what was applied."""

    def __init__(self, ms: dict[Setting, float]) -> None:
        self.ms, self.setting, self.applied, self.messages = dict(ms), None, [], []

    def apply(self, setting: Setting, final: bool) -> None:
        self.setting = setting
        self.applied.append((setting, final))

    def chooser(self, **options) -> SettingChooser:
        return SettingChooser(list(self.ms), apply=self.apply, announce=self.messages.append, **options)

    def run(self, chooser: SettingChooser, steps: int) -> list[Setting]:
        used = []
        for _ in range(steps):
            used.append(self.setting)
            chooser.observe(self.ms[self.setting] / 1e3)
        return used


def test_the_trial_alternates_candidates_and_picks_the_fastest():
    machine = FakeMachine({T1: 3.0, T2: 2.5})
    chooser = machine.chooser(trial_steps=3, rounds=2)
    used = machine.run(chooser, 12)
    assert used == [T1, T1, T1, T2, T2, T2, T1, T1, T1, T2, T2, T2]
    assert chooser.setting == T2 and machine.setting == T2
    assert chooser.decisions == [{"step": 12, "setting": T2, "ms": {T1: 3.0, T2: 2.5}}]
    assert machine.messages == ["threads: measured 1 thread → 3.0 ms, 2 threads → 2.5 ms per step; using 2 threads"]


def test_workers_are_one_more_setting_and_only_a_decision_is_final():
    machine = FakeMachine({T1: 2.6, T2: 2.5, W2: 1.8})  # each within give_up (1.5×) of the best: every round
    chooser = machine.chooser(trial_steps=2, rounds=2)
    used = machine.run(chooser, 12)
    assert used == [T1, T1, T2, T2, W2, W2] * 2
    assert chooser.setting == W2 and chooser.decisions[0]["ms"] == {T1: 2.6, T2: 2.5, W2: 1.8}
    # Each block's switch is a trial's (the applier may keep the pool); the decision is the one final apply.
    assert machine.applied == [(T1, False), (T2, False), (W2, False)] * 2 + [(W2, True)]
    assert machine.messages[-1].endswith("2 workers × 1 thread → 1.8 ms per step; using 2 workers × 1 thread")


def test_a_busy_core_moves_the_choice_from_workers_to_one_process():
    machine = FakeMachine({T1: 3.0, T2: 2.5, W2: 1.8})  # quiet: 2 workers on 2 cores are fastest
    chooser = machine.chooser(trial_steps=2, rounds=1, window=4, drift=0.3)
    machine.run(chooser, 6 + 8)
    assert chooser.setting == W2 and len(chooser.decisions) == 1
    machine.ms = {T1: 3.3, T2: 7.5, W2: 3.9}  # another process holds a core: a worker waits for it every step
    machine.run(chooser, 4 + 6)  # a window shows the drift, then the new trial
    assert [d["setting"] for d in chooser.decisions] == [W2, T1]
    assert machine.applied[-1] == (T1, True) and machine.setting == T1
    assert any(m.startswith("threads: step time moved from 1.8 ms to 2.9 ms") for m in machine.messages)
    machine.ms = {T1: 3.0, T2: 2.5, W2: 1.8}  # the other process ends: T1 got faster by 10 %, inside the drift
    machine.run(chooser, 40)
    assert len(chooser.decisions) == 2  # a quiet machine is not noticed from T1's step time alone (drift 0.3)


def test_a_clearly_slower_candidate_gets_no_more_blocks():
    machine = FakeMachine({T1: 3.0, T2: 9.0})  # 2 threads with one core busy: 3x slower
    chooser = machine.chooser(trial_steps=3, rounds=3, give_up=1.5)
    used = machine.run(chooser, 12)
    assert used == [T1, T1, T1, T2, T2, T2, T1, T1, T1, T1, T1, T1]  # rounds 2 and 3 skip 2 threads: 6 steps saved
    assert chooser.decisions == [{"step": 12, "setting": T1, "ms": {T1: 3.0, T2: 9.0}}]
    close = FakeMachine({T1: 3.0, T2: 4.0})  # 1.33x: inside give_up, both candidates run every round
    assert close.run(close.chooser(trial_steps=2, rounds=2, give_up=1.5), 8) == [T1, T1, T2, T2, T1, T1, T2, T2]


def test_the_first_step_after_a_switch_is_not_counted():
    machine = FakeMachine({T1: 3.0, T2: 2.5})
    chooser = machine.chooser(trial_steps=2, rounds=1)
    chooser.observe(1.0)  # 1 thread, first of its block: a wake-up outlier that must not count
    chooser.observe(0.003)
    chooser.observe(1.0)  # 2 threads, first of its block (or a worker pool starting)
    chooser.observe(0.004)
    assert chooser.setting == T1 and chooser.decisions[0]["ms"] == {T1: 3.0, T2: 4.0}


def test_a_drift_in_step_time_starts_a_new_trial_that_can_change_the_choice():
    machine = FakeMachine({T1: 8.0, T2: 5.0})
    chooser = machine.chooser(trial_steps=2, rounds=1, window=5, drift=0.3)
    machine.run(chooser, 4 + 10)  # the trial, then two quiet windows: no new trial
    assert chooser.setting == T2 and len(chooser.decisions) == 1
    machine.ms = {T1: 8.5, T2: 11.0}  # another process takes a core: 2 threads now wait for it
    machine.run(chooser, 5 + 4)  # a window shows the drift, then the new trial
    assert len(chooser.decisions) == 2 and chooser.setting == T1 and machine.setting == T1
    assert any(m.startswith("threads: step time moved from 5.0 ms to 11.0 ms") for m in machine.messages)
    machine.run(chooser, 15)  # steady again: the choice holds
    assert len(chooser.decisions) == 2


def test_a_trial_that_keeps_the_setting_doubles_the_watch_window():
    machine = FakeMachine({T1: 8.0, T2: 5.0})
    chooser = machine.chooser(trial_steps=2, rounds=1, window=4, max_window=8, drift=0.3)
    machine.run(chooser, 4)
    assert chooser.window == 4
    machine.ms[T2] = 7.0  # 40 % slower, still the faster count
    machine.run(chooser, 4 + 4)  # a window, then the trial: the same choice
    assert len(chooser.decisions) == 2 and chooser.setting == T2 and chooser.window == 8
    machine.ms[T2] = 9.5  # 36 % slower again: now a full window of 8 steps before the next trial
    machine.run(chooser, 7)
    assert len(chooser.decisions) == 2 and chooser.setting == T2
    machine.run(chooser, 1 + 4)
    assert len(chooser.decisions) == 3 and chooser.setting == T1 and chooser.window == 4  # changed: back to 4
    machine.run(chooser, 4 + 4)
    assert chooser.window == 4 and len(chooser.decisions) == 3


def test_small_changes_do_not_start_a_trial():
    machine = FakeMachine({T1: 3.0, T2: 4.0})
    chooser = machine.chooser(trial_steps=2, rounds=1, window=4, drift=0.3)
    machine.run(chooser, 4)
    machine.ms[T1] = 3.6  # +20 %: inside the tolerance
    machine.run(chooser, 40)
    assert len(chooser.decisions) == 1


@pytest.mark.parametrize("options", [dict(trial_steps=1), dict(rounds=0), dict(window=0), dict(drift=0.0),
                                     dict(window=30, max_window=20), dict(give_up=1.0)])
def test_bad_settings_are_refused(options):
    with pytest.raises(ValueError):
        SettingChooser([T1, T2], **options)
    with pytest.raises(ValueError, match="candidates"):
        SettingChooser([1, 2])
    with pytest.raises(ValueError, match="candidates"):
        SettingChooser([T1, Setting(1)])


def test_a_setting_names_itself_and_says_which_bytes_it_keeps():
    assert [str(s) for s in (T1, T2, W2)] == ["1 thread", "2 threads", "2 workers × 1 thread"]
    assert T1.same_bytes_as_one_thread and W2.same_bytes_as_one_thread and not T2.same_bytes_as_one_thread
    for bad in (dict(threads=0), dict(workers=0), dict(threads=2, workers=2)):
        with pytest.raises(ValueError):
            Setting(**bad)
    with pytest.raises(ValueError, match="cannot start workers"):
        apply_threads(W2, True)


def test_the_callback_times_step_ends_and_skips_intervals_with_a_validation():
    seen = []

    class Recording(SettingChooser):
        def observe(self, seconds: float) -> None:
            seen.append(round(seconds, 6))

    now = [0.0]
    callback = MeasuredSettings(Recording([T1], apply=lambda s, final: None), clock=lambda: now[0])
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
    assert "threads: measured 1 thread →" in (run_dir / "logs" / "train.log").read_text()
    assert "## Threads and workers (measured)" in (run_dir / "report.md").read_text()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["runtime"]["blas_threads"] == "measure" and manifest["steps_done"] == 24
