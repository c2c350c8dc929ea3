"""Monitoring pieces the loop calls: alerts, early stopping, progress, quality score, metrics.csv, report.md."""

from __future__ import annotations

import csv
import io
import json
import math
import re

import pytest

from minitrain.common.errors import UserError
from minitrain.evaluation.alerts import AlertMonitor, parse_alert
from minitrain.monitor.early_stopping import EarlyStopping, is_better
from minitrain.monitor.progress import Progress, format_seconds, sparkline
from minitrain.monitor.quality import grade_for, quality_score
from minitrain.monitor.report import metrics_csv, read_log, report_markdown

# --- alerts ---------------------------------------------------------------------------------------------------


def test_alert_grammar():
    spaced, tight = parse_alert("loss > 10: warn"), parse_alert("loss>10:warn")
    assert (spaced.kind, spaced.metric, spaced.op, spaced.value) == (tight.kind, tight.metric, tight.op, tight.value)
    rule = parse_alert("grad_norm >= 1e3: halt")
    assert (rule.kind, rule.metric, rule.op, rule.value, rule.action) == ("threshold", "grad_norm", ">=", 1000.0,
                                                                          "halt")
    assert parse_alert("stall(50): warn").window == 50 and parse_alert("stall(50): warn").metric == "loss"
    assert parse_alert("val_loss.stall(3): halt").metric == "val_loss"
    assert parse_alert("nan: halt").kind == "nan"


@pytest.mark.parametrize(("text", "fragment"), [
    ("loss > 10", "must look like 'CONDITION: ACTION'"),
    ("loss > 10: panic", "action must be warn or halt"),
    ("loss == 10: warn", "unexpected"),
    ("loss > abc: warn", "condition must be"),
    ("stall(x): warn", "condition must be"),
    ("stall(0): warn", "whole number of steps >= 1"),
    ("__import__('os'): warn", "unexpected"),
    (": warn", "condition must be"),
])
def test_bad_alerts_are_rejected(text, fragment):
    with pytest.raises(ValueError, match="alert") as info:
        parse_alert(text)
    assert fragment in str(info.value)


def test_threshold_alert_fires_on_crossing_and_rearms():
    monitor = AlertMonitor(["loss > 10: warn"])
    fired = [bool(monitor.check(s, {"loss": v})) for s, v in enumerate([5, 11, 12, 9, 15])]
    assert fired == [False, True, False, False, True]
    assert monitor.check(5, {"val_loss": 20}) == []  # rows without the metric are skipped


def test_nan_alert_halts():
    monitor = AlertMonitor(["nan: halt", "loss > 10: warn"])
    assert monitor.check(0, {"loss": 2.0, "lr": 1e-3}) == []
    fired = monitor.check(10, {"loss": math.nan, "lr": 1e-3})
    assert [f.action for f in fired] == ["halt"]
    assert "step 10" in fired[0].message and "loss not finite" in fired[0].message


def test_stall_alert_fires_once_after_the_window_and_rearms_on_improvement():
    monitor = AlertMonitor(["stall(30): warn"])
    steps = range(0, 100, 10)
    losses = [5, 4, 4.5, 4.2, 4.1, 3.9, 4.0, 4.0, 4.0, 4.0]
    fired = [s for s, v in zip(steps, losses, strict=True) if monitor.check(s, {"loss": v})]
    # best 4 at step 10; steps 20, 30 are within 30 steps; step 40 is 30 steps later -> fires once.
    # A new best 3.9 at step 50 re-arms; 30 steps later (step 80) it fires again.
    assert fired == [40, 80]


def test_alert_state_round_trips():
    a, b = AlertMonitor(["stall(20): warn", "loss > 3: warn"]), AlertMonitor(["stall(20): warn", "loss > 3: warn"])
    for s, v in [(0, 4.0), (10, 2.0), (20, 3.5)]:
        a.check(s, {"loss": v})
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert [f.alert.text for f in a.check(30, {"loss": 2.5})] == [f.alert.text for f in b.check(30, {"loss": 2.5})]


# --- early stopping ---------------------------------------------------------------------------------------------


def test_early_stopping_stops_at_the_patience_th_bad_evaluation():
    stopper = EarlyStopping("val_loss", patience=3, min_delta=0.0, mode="min")
    history = [(0, 3.0), (50, 2.5), (100, 2.0), (150, 2.1), (200, 2.0), (250, 2.05), (300, 1.0)]
    stopped_at = next(step for step, value in history if stopper.update(step, value))
    assert stopped_at == 250  # 150, 200 (ties do not improve) and 250 fail to improve on 2.0 of step 100
    assert (stopper.best, stopper.best_step, stopper.bad_evaluations) == (2.0, 100, 3)


def test_min_delta_and_max_mode():
    stopper = EarlyStopping("val_ppl", patience=2, min_delta=0.1, mode="min")
    assert not stopper.update(0, 10.0)
    assert not stopper.update(1, 9.95)  # better, but by less than min_delta
    assert stopper.update(2, 9.5) is False and stopper.best == 9.5
    up = EarlyStopping("score", patience=1, mode="max")
    assert not up.update(0, 1.0) and not up.update(1, 2.0) and up.update(2, 1.5)


def test_is_better_by_mode_and_min_delta():
    assert is_better(1.0, None) and not is_better(math.nan, None) and not is_better(math.nan, 2.0)
    assert is_better(1.0, 2.0) and not is_better(2.0, 2.0) and not is_better(1.95, 2.0, "min", 0.1)
    assert is_better(3.0, 2.0, "max") and not is_better(1.0, 2.0, "max") and not is_better(2.05, 2.0, "max", 0.1)


def test_early_stopping_state_round_trip():
    stopper = EarlyStopping("val_loss", patience=2, min_delta=0.5)
    stopper.update(0, 3.0)
    stopper.update(1, 2.9)
    again = EarlyStopping("val_loss", patience=2, min_delta=0.5)
    again.load_state_dict(json.loads(json.dumps(stopper.state_dict())))
    assert again.update(2, 2.8) and stopper.update(2, 2.8)


# --- progress ---------------------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_sparkline_scales_between_min_and_max():
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == "▁▂▃▄▅▆▇█"
    assert sparkline([8, 1]) == "█▁"
    assert sparkline([2, 2, 2]) == "▄▄▄"
    assert sparkline([1, math.nan, 2]) == "▁×█"
    assert format_seconds(3725) == "1h02m05s" and format_seconds(65) == "1m05s" and format_seconds(7) == "7s"


def test_plain_progress_lines_on_a_non_terminal():
    stream, clock = io.StringIO(), FakeClock()
    progress = Progress(100, "auto", every=10, stream=stream, clock=clock)
    assert progress.mode == "plain"  # StringIO is not a TTY
    for step in range(20):
        progress.update(step, loss=5.0 - step * 0.1, lr=3e-4, tokens=256)
        clock.now += 0.5
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[1].startswith("step 20/100 | loss 3.1000 | lr 3.00e-04 | ")
    # 19 steps of 256 tokens after the first report, in 9.5 s; 80 steps left at 0.5 s each.
    assert "512 tok/s" in lines[1] and "eta 40s" in lines[1]
    assert lines[1].endswith(" | " + sparkline([5.0 - s * 0.1 for s in range(20)]))
    assert lines[1].endswith("▁") and lines[1][-20] == "█"
    progress.write("val_loss 2.0")
    assert stream.getvalue().endswith("val_loss 2.0\n")


def test_quiet_and_none_print_nothing():
    for kwargs in ({"quiet": True}, {"mode": "none"}, {"mode": "bar", "quiet": True}):
        stream = io.StringIO()
        progress = Progress(10, stream=stream, **kwargs)
        for step in range(10):
            progress.update(step, loss=1.0, lr=1e-3, tokens=10)
        progress.write("hello")
        progress.close()
        assert stream.getvalue() == ""


def test_bar_mode_draws_a_tqdm_bar_with_the_status():
    stream = io.StringIO()
    progress = Progress(4, "bar", stream=stream, clock=FakeClock())
    for step in range(4):
        progress.update(step, loss=2.0 - step * 0.5, lr=1e-3, tokens=8)
    progress.close()
    text = stream.getvalue()
    assert "4/4" in text and "loss 0.5000" in text and "lr 1.00e-03" in text and "█▆▃▁" in text


# --- quality ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("score", "grade"), [
    (100, "A+"), (95, "A+"), (94.9, "A"), (90, "A"), (89.9, "A-"), (85, "A-"), (84.9, "B+"), (80, "B+"),
    (79.9, "B"), (75, "B"), (74.9, "B-"), (70, "B-"), (69.9, "C+"), (65, "C+"), (64.9, "C"), (60, "C"),
    (59.9, "D"), (50, "D"), (49.9, "F"), (0, "F"),
])
def test_grade_boundaries(score, grade):
    assert grade_for(score) == grade


def _log(train, val=(), norms=()):
    return ([{"step": s, "loss": v} for s, v in train] + [{"step": s, "val_loss": v} for s, v in val]
            + [{"step": s, "grad_norm": g} for s, g in norms])


def test_quality_of_a_clean_run_is_full_marks():
    train = [(s, 4.0 * 0.5 ** (s / 500)) for s in range(0, 2001, 10)]  # smooth, ÷16 over the run
    val = [(s, 4.0 * 0.5 ** (s / 500)) for s in range(0, 2001, 100)]  # no gap, best at the end
    norms = [(s, 1.0 + 0.1 * math.sin(s)) for s in range(0, 2001, 10)]  # no spike
    results = {"steps": 2000, "ms_per_step": 5.0, "wall_seconds": 10.0}  # all the wall time in steps
    quality = quality_score(_log(train, val, norms), results)
    assert quality.breakdown == {"convergence": 100.0, "stability": 100.0, "efficiency": 100.0,
                                 "generalization": 100.0, "reproducibility": None}
    assert quality.score == 100.0 and quality.grade == "A+"


def test_a_healthy_fine_tune_is_not_graded_down_for_starting_near_its_floor():
    """Issue 26: the loss of a fine-tune falls a little, smoothly; §16's convergence is smoothness, not size."""
    train = [(s, 1.2 - 0.2 * s / 300) for s in range(0, 301, 10)]  # 1.2 -> 1.0, never climbing
    quality = quality_score(_log(train, [(300, 1.0)], [(s, 2.0) for s in range(0, 301, 10)]),
                            {"steps": 300, "ms_per_step": 30.0, "wall_seconds": 10.0})
    assert quality.breakdown["convergence"] == 100.0 and quality.grade in ("A+", "A")


def test_quality_components_follow_the_specs_formulas():
    train = [(0, 4.0), (10, 2.0), (20, 3.9), (30, 2.0)]  # one setback of three
    val = [(10, 2.0 + math.log(2)), (20, 3.0)]  # last val_loss 3.0; train L_end 2.0
    norms = [(0, 1.0), (10, 2.0), (20, 9.0), (30, 3.0)]  # 9 > 4 × median(1, 2) = 8: one spike of three
    results = {"steps": 30, "ms_per_step": 100.0, "wall_seconds": 4.0}  # 3 s of steps in 4 s
    quality = quality_score(_log(train, val, norms), results)
    expected = {"convergence": 100 * 2 / 3, "stability": 100 * 2 / 3, "efficiency": 75.0,
                "generalization": 100 * math.exp(-1), "reproducibility": None}
    assert quality.breakdown == {k: None if v is None else round(v, 1) for k, v in expected.items()}
    measured = [v for v in expected.values() if v is not None]
    assert quality.score == round(sum(measured) / 4, 1) and quality.grade == grade_for(quality.score)


def test_quality_without_val_rows_results_or_grad_norms_and_with_nan():
    quality = quality_score(_log([(0, 4.0), (10, 1.0)]))
    assert quality.breakdown == {"convergence": 100.0, "stability": None, "efficiency": None,
                                 "generalization": None, "reproducibility": None}
    assert quality.score == 100.0
    assert quality_score(_log([(0, 4.0), (10, 5.0)])).breakdown["convergence"] == 0.0  # it did not fall
    nan = quality_score(_log([(0, 4.0), (10, 1.0)], norms=[(0, 1.0), (10, math.inf)])).breakdown
    assert nan["stability"] == 0.0 and nan["convergence"] == 0.0
    assert quality_score(_log([(0, 4.0), (10, math.nan)]), {"steps": 0}).breakdown["convergence"] == 0.0
    with pytest.raises(ValueError, match="no training losses"):
        quality_score(_log([], [(0, 1.0)]))


# --- metrics.csv and report.md ------------------------------------------------------------------------------------


def test_metrics_csv_merges_rows_by_step(tmp_path):
    log = tmp_path / "train_log.jsonl"
    log.write_text('{"step": 0, "loss": 4.1, "lr": 3e-06}\n{"step": 0, "val_loss": 4.0, "val_ppl": 54.6}\n'
                   '{"step": 10, "loss": 3.2, "lr": 3.3e-05}\n', encoding="utf-8")
    rows = read_log(log)
    table = list(csv.reader(metrics_csv(rows).splitlines()))
    assert table == [["step", "loss", "lr", "val_loss", "val_ppl"], ["0", "4.1", "3e-06", "4.0", "54.6"],
                     ["10", "3.2", "3.3e-05", "", ""]]
    assert metrics_csv(rows) == metrics_csv(read_log(log))


def test_read_log_names_a_bad_line(tmp_path):
    log = tmp_path / "train_log.jsonl"
    log.write_text('{"step": 0, "loss": 1}\n{"step": 1, "loss"\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"train_log.jsonl:2: the log line is not valid JSON"):
        read_log(log)
    log.write_text('{"step": 0, "loss": 1}\n{"step": 1, "lo\n{"step": 2, "loss": 0.5}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"train_log.jsonl:2: the log line is not valid JSON"):
        read_log(log)


def test_read_log_skips_a_last_line_torn_by_a_kill(tmp_path):
    log = tmp_path / "train_log.jsonl"
    log.write_text('{"step": 0, "loss": 1}\n{"step": 1, "lo', encoding="utf-8")  # no newline: cut mid-append
    assert read_log(log) == [{"step": 0, "loss": 1}]


@pytest.mark.parametrize(("line", "message"), [
    ('{"loss": 1.0}', "a log row must be a JSON object with an integer 'step'"),
    ('{"step": "x", "loss": 1.0}', "a log row must be a JSON object with an integer 'step'"),
    ('{"step": true, "loss": 1.0}', "a log row must be a JSON object with an integer 'step'"),
    ('[0, 1.0]', "a log row must be a JSON object with an integer 'step'"),
    ('{"step": 1, "loss": "y"}', "a log row holds numbers only; 'loss' is 'y'"),
    ('{"step": 1, "val_loss": null}', "a log row holds numbers only; 'val_loss' is None"),
    ('{"step": -3, "loss": 1.0}', "'step' cannot be negative, found -3"),
    ('{"step": 1, "loss": -1e308}', "'loss' cannot be negative, found -1e+308"),
    ('{"step": 1, "val_ppl": 1.5}', "a validation row with 'val_ppl' has 'val_loss' too"),
    ('{"step": 1, "loss": 1' + "0" * 5000 + "}", "the log line holds an integer of more than 4,300 digits"),
    ("[" * 100_000 + "]" * 100_000, "the log line nests deeper than 64 levels"),
])
def test_read_log_refuses_rows_that_are_not_numbers(tmp_path, line, message):
    # `minitrain info`, the plot and the quality score read these rows; a hand-edited log must not crash them.
    log = tmp_path / "train_log.jsonl"
    log.write_text('{"step": 0, "loss": NaN, "lr": 1}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"train_log.jsonl:2: {re.escape(message)}$"):
        read_log(log)


def test_report_has_plot_results_and_grade():
    quality = quality_score(_log([(0, 4.0), (10, 1.0)], [(10, 1.2)]))
    text = report_markdown(title="lab01", results={"val_ppl": 3.3201, "beats_baseline": True, "note": "a|b"},
                           quality=quality)
    assert text.startswith("# Training report: lab01\n") and "![loss curve](loss_curve.png)" in text
    assert "| val_ppl | 3.32 |" in text and "| beats_baseline | true |" in text and "a\\|b" in text
    assert f"## Training quality: {quality.score:.1f} / 100 — grade {quality.grade}" in text
    assert "| generalization | " in text and "| reproducibility | not measured |" in text
    assert f"Grade {quality.grade}: " in text and "(the spec's §16.2)" in text


def test_report_shows_the_resolved_hyperparameters():
    text = report_markdown(title="t", results={}, quality=None,
                           hyperparameters={"optimizer.lr_max": 0.0003, "training.batch_size": 8})
    assert "## Hyperparameters\n\n| setting | value |\n|---|---|\n| optimizer.lr_max | 0.0003 |\n" in text
    assert "| training.batch_size | 8 |" in text


def test_the_loss_curve_names_the_val_split_by_what_it_holds(tmp_path, monkeypatch):
    """Issue 26: a plain-text run's val split is held-out lines, not "held-out verbs"."""
    from matplotlib.axes import Axes

    from minitrain.training.artifacts import plot_loss_curve

    labels = []
    real_plot = Axes.plot
    monkeypatch.setattr(Axes, "plot", lambda ax, *a, **k: labels.append(k.get("label")) or real_plot(ax, *a, **k))
    log = tmp_path / "train_log.jsonl"
    log.write_text('{"step": 0, "loss": 2.0}\n{"step": 0, "val_loss": 2.1, "val_ppl": 8.17}\n', encoding="utf-8")
    plot_loss_curve(tmp_path / "curve.png", log, None, val_label="val (held-out lines)")
    assert labels == ["train (one batch)", "val (held-out lines)"]


def test_the_dashboard_draws_a_log_whose_rows_lack_a_key(tmp_path):
    """Found by `make fuzz`: a run resumed from a log whose first train row had lost its `lr` died drawing it."""
    from minitrain.training.dashboard import plot_dashboard

    rows = [{"step": 0, "loss": 4.18, "grad_norm": 2.35}, {"step": 0, "val_loss": 4.16, "val_ppl": 64.2},
            {"step": 2, "loss": 4.04, "lr": 3e-3}, {"step": 4, "loss": 3.87, "lr": 2e-3, "grad_norm": 1.5},
            {"step": 4, "val_loss": 3.99, "val_ppl": 54.3}]
    plot_dashboard(tmp_path / "dashboard.png", rows)
    assert (tmp_path / "dashboard.png").read_bytes()[:4] == b"\x89PNG"
