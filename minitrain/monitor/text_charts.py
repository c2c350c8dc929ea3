"""The dashboard's charts drawn as lines of plain text, one function per `monitoring.dashboard.charts[].type`
(config/observing.py's CHARTS names them): `draw(chart, view, width) -> lines`, each line at most `width` long.

    progress   step 450/1000 ██████████░░░░░░░░░░░░  45%  eta 1m05s
    sparkline  lr        ▁▂▄▆███▇▇▆▆▅▄▃▂▁  2.95e-04
    curve      loss: last 1.82, min 1.79 at step 430 (44 values)
                  4.16 ┤█▇
                       │██▆▄▃
                  1.79 ┤██████▇▇▆▆▆▅▅▅▅▅▅▅▅▅▅▅

A curve is a column chart `height` rows tall: each column is the mean of its share of the values (the series cut
into as many equal runs as there are columns, in step order), and its height goes from one eighth of a row for
the lowest value to `height` full rows for the highest, in eighths (▁ to █): 8 · height levels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from minitrain.monitor.progress import BLOCKS, format_seconds, sparkline

LABEL = 10  # the width of a curve's value labels


def buckets(values: Sequence[float], columns: int) -> list[float]:
    """`values` cut into min(columns, len) runs of equal length (±1, in order), each replaced by its mean."""
    n = len(values)
    count = min(columns, n)
    return [math.fsum(part) / len(part) for part in (values[i * n // count:(i + 1) * n // count]
                                                    for i in range(count))]


def column_levels(values: Sequence[float], height: int) -> list[int]:
    """Each value's height in eighths of a row: 1 for the lowest finite value, 8 · height for the highest, linear
    between (the middle when all are equal); 0 for a value that is not finite."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return [0] * len(values)
    low, high, top = min(finite), max(finite), 8 * height
    return [0 if not math.isfinite(v) else 1 + round((v - low) / (high - low) * (top - 1)) if high > low
            else top // 2 for v in values]


def columns_text(levels: Sequence[int], height: int) -> list[str]:
    """The rows (top first) of columns `levels` eighths tall."""
    rows = []
    for row in range(height - 1, -1, -1):
        cells = (min(max(level - 8 * row, 0), 8) for level in levels)
        rows.append("".join(BLOCKS[eighths - 1] if eighths else " " for eighths in cells))
    return rows


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _series(view: Any, chart: Any) -> tuple[str, list[float], list[int]]:
    key = view.key_of(chart.metric)
    rows = view.rows_of(key)[-chart.window:] if chart.window else view.rows_of(key)
    return key, [r[key] for r in rows], [r["step"] for r in rows]


def curve_chart(chart: Any, view: Any, width: int) -> list[str]:
    """A title line, then `chart.height` rows: the column chart of the metric, labelled with its max and min."""
    key, values, steps = _series(view, chart)
    if not values:
        return [f"{key}: nothing logged yet"]
    finite = [(v, s) for v, s in zip(values, steps, strict=True) if math.isfinite(v)]
    low, high = min(v for v, _ in finite) if finite else math.nan, max(v for v, _ in finite) if finite else math.nan
    at = next((s for v, s in finite if v == low), None)
    count = f"{len(values)} value{'s' * (len(values) != 1)}"
    title = f"{key}: last {_fmt(values[-1])}, min {_fmt(low)} at step {at} ({count})"
    means = buckets(values, max(width - LABEL - 2, 1))
    body = columns_text(column_levels(means, chart.height), chart.height)
    labels = [f"{_fmt(high):>{LABEL}} ┤", *[" " * LABEL + " │"] * (chart.height - 2), f"{_fmt(low):>{LABEL}} ┤"]
    return [title[:width], *(label + row for label, row in zip(labels, body, strict=True))]


def sparkline_chart(chart: Any, view: Any, width: int) -> list[str]:
    """One line: the metric's name, a sparkline of its last `window` values (averaged to fit) and the last."""
    key, values, _ = _series(view, chart)
    if not values:
        return [f"{key:<10} nothing logged yet"]
    last = f"  {_fmt(values[-1])}"
    return [f"{key:<10} {sparkline(buckets(values, max(width - 11 - len(last), 1)))}{last}"[:width]]


def progress_chart(chart: Any, view: Any, width: int) -> list[str]:
    """One line: steps done of the total, a bar, the share done and (show_eta) the time left."""
    done, total = view.steps_done, view.total_steps
    if total is None:
        return [f"step {done}"]
    eta = view.eta_seconds() if chart.show_eta else None
    tail = f" {100 * done / max(total, 1):3.0f}%" + ("" if not chart.show_eta else
                                                      f"  eta {'—' if eta is None else format_seconds(eta)}")
    head = f"step {done}/{total} "
    bar = max(width - len(head) - len(tail), 1)
    filled = min(round(bar * done / max(total, 1)), bar)
    return [f"{head}{'█' * filled}{'░' * (bar - filled)}{tail}"[:width]]
