"""Lab 03's curves (minitrain/monitor/curves.py): the smoothed train curve, the train/val gap at each validation
and the onset of overfitting, checked against hand computations; and the report section built from them."""

from __future__ import annotations

import math

import pytest

from minitrain.monitor.curves import moving_average, overfitting_onset, train_val_gap
from minitrain.monitor.report import report_markdown


def test_moving_average_is_trailing_and_short_at_the_start():
    assert moving_average([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
    assert moving_average([1.0, 3.0, 5.0, 7.0], 3) == [1.0, 2.0, 3.0, 5.0]
    assert moving_average([2.0, 4.0], 1) == [2.0, 4.0] and moving_average([], 5) == []
    with pytest.raises(ValueError, match="window must be at least 1"):
        moving_average([1.0], 0)


ROWS = [
    {"step": 0, "loss": 4.0, "lr": 1e-4, "grad_norm": 2.0},
    {"step": 0, "val_loss": 4.1, "val_ppl": 60.0},
    {"step": 10, "loss": 2.0, "lr": 2e-4, "grad_norm": 1.0},
    {"step": 20, "loss": 1.0, "lr": 3e-4, "grad_norm": 1.0},
    {"step": 20, "val_loss": 1.5, "val_ppl": 4.5},
    {"step": 30, "loss": 0.5, "lr": 3e-4, "grad_norm": 1.0},
    {"step": 40, "loss": 0.3, "lr": 3e-4, "grad_norm": 1.0},
    {"step": 40, "val_loss": 1.7, "val_ppl": 5.5},
]


def test_the_gap_uses_the_mean_loss_of_the_last_window_train_rows_at_or_before_each_validation():
    gaps = train_val_gap(ROWS, window=2)
    assert [g["step"] for g in gaps] == [0, 20, 40]
    expected_train = [math.exp(4.0), math.exp((2.0 + 1.0) / 2), math.exp((0.5 + 0.3) / 2)]
    assert [g["train_ppl"] for g in gaps] == pytest.approx(expected_train)
    assert [g["val_ppl"] for g in gaps] == [60.0, 4.5, 5.5]
    assert [g["gap"] for g in gaps] == pytest.approx([60 / t for t in expected_train[:1]] + [
        4.5 / expected_train[1], 5.5 / expected_train[2]])
    # A val row with no train row before it has nothing to compare with.
    assert train_val_gap([{"step": 0, "val_loss": 1.0, "val_ppl": 2.7}]) == []


def test_overfitting_onset_is_the_best_step_when_val_ended_clearly_worse():
    gaps = train_val_gap(ROWS, window=2)
    assert overfitting_onset(gaps) == 20  # 5.5 is 22 % above 4.5
    assert overfitting_onset(gaps, tolerance=0.25) is None
    flat = [{"step": s, "train_ppl": 1.0, "val_ppl": v, "gap": v} for s, v in ((0, 3.0), (1, 2.0), (2, 2.0), (3, 2.05))]
    assert overfitting_onset(flat) is None  # ended 2.5 % above the best: within 5 %
    flat[-1]["val_ppl"] = 2.2
    assert overfitting_onset(flat) == 1  # a tie: the earliest lowest step
    assert overfitting_onset([]) is None


def test_the_report_says_whether_val_turned_up():
    text = report_markdown(title="t", results={"val_ppl": 5.5}, quality=None, gaps=train_val_gap(ROWS, window=2))
    assert "## Train vs val" in text and "![dashboard](dashboard.png)" in text
    assert "| lowest val PPL | 20 | 4.482 | 4.5 | 1 |" in text
    assert "val PPL ended 22.2 % above its lowest, reached at step 20" in text
    assert "## Train vs val" not in report_markdown(title="t", results={}, quality=None)
