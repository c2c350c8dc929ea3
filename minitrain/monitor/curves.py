"""Lab 03: reading overfitting off a training log, the numbers behind `dashboard.png` and report.md.

A train row logs the loss of ONE batch, so the train curve is noisy; a val row scores the whole val split. To
compare the two at a validation, the train side is smoothed over the last few logged losses:

    train_ppl(s) = exp(mean of the last `window` train losses logged at or before step s)
    gap(s)       = val_ppl(s) / train_ppl(s)          1: no gap; 2: val is twice as perplexed as train

Losses are averaged, never perplexities: PPL = exp(mean loss) over tokens, and the exp of a mean is not the mean
of the exps. Overfitting shows as val PPL turning up after its best validation while train PPL keeps falling;
`overfitting_onset` names that best step when the run went on past it and val got clearly worse.

    gaps = train_val_gap(read_log(run_dir / "train_log.jsonl"), window=10)
    onset = overfitting_onset(gaps)          # e.g. 200, or None when val ended near its best
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """The trailing mean: out[i] = mean(values[max(0, i − window + 1) : i + 1]), same length as `values`.

    Trailing, never centred: out[i] uses nothing that comes after i (a dashboard must not see the future). The
    first window − 1 entries average the fewer values there are. A ValueError when window < 1.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    out = []
    for i in range(len(values)):
        recent = values[max(0, i - window + 1) : i + 1]
        out.append(sum(recent) / len(recent))
    return out


def train_val_gap(rows: Sequence[Mapping[str, Any]], window: int = 10) -> list[dict[str, float]]:
    """One entry per val row of a train_log.jsonl, in step order: {"step", "train_ppl", "val_ppl", "gap"}.

    `rows` are the log's rows in file order: train rows {step, loss, lr, grad_norm} and val rows {step,
    val_loss, val_ppl}, a val row after the train row of its step. For a val row at step s, train_ppl is exp of
    the mean `loss` of the last `window` train rows with step <= s (fewer if fewer were logged), val_ppl is the
    row's own, and gap = val_ppl / train_ppl. A val row logged before any train row is left out.
    """
    train_steps = [r["step"] for r in rows if "loss" in r]
    smoothed = moving_average([r["loss"] for r in rows if "loss" in r], window)
    gaps, seen = [], 0  # seen: train rows with step <= the current val step
    for row in (r for r in rows if "val_ppl" in r):
        while seen < len(train_steps) and train_steps[seen] <= row["step"]:
            seen += 1
        if seen == 0:
            continue
        train_ppl = math.exp(smoothed[seen - 1])
        gaps.append({"step": row["step"], "train_ppl": train_ppl, "val_ppl": row["val_ppl"],
                     "gap": row["val_ppl"] / train_ppl})
    return gaps


def overfitting_onset(gaps: Sequence[Mapping[str, float]], tolerance: float = 0.05) -> int | None:
    """The step of the lowest val PPL, if the run went on past it and the last val PPL is more than `tolerance`
    (relative: 0.05 = 5 %) above that lowest value; None otherwise (val ended near its best, or no entries).

    `gaps` is `train_val_gap`'s output. On a tie the earliest of the lowest steps counts: that is when val
    stopped improving.
    """
    if not gaps:
        return None
    best = min(gaps, key=lambda g: g["val_ppl"])  # min keeps the first of equal values
    return best["step"] if gaps[-1]["val_ppl"] > best["val_ppl"] * (1 + tolerance) else None
