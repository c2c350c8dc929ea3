"""A training-quality score, 0–100, with a letter grade, computed from train_log.jsonl rows.

Four components, each 0–100 (train rows carry `loss`, val rows `val_loss`; L₀ is the first logged train loss
and L_end the mean of the last tenth of the logged train losses, at least one):

    convergence      100 · clamp(ln(L₀ / L_end) / ln 4, 0, 1)
                     how far the loss fell: dividing it by 4 or more earns full marks.
    stability        100 · (1 − setbacks / (n − 1)), and 0 if any logged loss is NaN or infinite.
                     A logged loss L_i is a setback when it climbs above the best loss so far, m, by more than
                     a quarter of the progress made so far plus 2 % of L₀:  L_i − m > 0.25·(L₀ − m) + 0.02·L₀.
    generalisation   100 · min(1, exp(L_end − val_end)) = 100 · train PPL / val PPL  (val_end: last val_loss)
                     a val loss as low as the train loss earns full marks; val PPL twice train PPL earns 50.
    efficiency       100 · best_val_step / last_step
                     the share of the run that was still improving val_loss; steps after the best
                     validation bought nothing.

score = weighted mean with weights convergence 0.35, stability 0.20, generalisation 0.30, efficiency 0.15; a run
without val rows has no generalisation or efficiency, and the other weights are renormalised. Grades: A+ ≥ 95,
A ≥ 90, A- ≥ 85, B+ ≥ 80, B ≥ 75, B- ≥ 70, C+ ≥ 65, C ≥ 60, D ≥ 50, F below.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

WEIGHTS = {"convergence": 0.35, "stability": 0.20, "generalisation": 0.30, "efficiency": 0.15}
GRADES = ((95, "A+"), (90, "A"), (85, "A-"), (80, "B+"), (75, "B"), (70, "B-"), (65, "C+"), (60, "C"), (50, "D"))


def grade_for(score: float) -> str:
    """The letter grade of a 0–100 score (thresholds in the module docstring)."""
    for threshold, grade in GRADES:
        if score >= threshold:
            return grade
    return "F"


@dataclass(frozen=True)
class Quality:
    score: float
    grade: str
    breakdown: dict[str, float | None]  # component -> 0–100, None when the log cannot measure it

    def as_dict(self) -> dict[str, Any]:
        return {"score": self.score, "grade": self.grade, "breakdown": dict(self.breakdown)}


def _clamp(x: float) -> float:
    return min(max(x, 0.0), 1.0)


def convergence(losses: list[float]) -> float:
    first, end = losses[0], _tail_mean(losses)
    if first <= 0 or end <= 0:
        return 100.0 if end <= 0 < first else 0.0
    return 100 * _clamp(math.log(first / end) / math.log(4))


def stability(losses: list[float]) -> float:
    if any(not math.isfinite(v) for v in losses):
        return 0.0
    if len(losses) < 2:
        return 100.0
    first, best, setbacks = losses[0], losses[0], 0
    for value in losses[1:]:
        if value - best > 0.25 * (first - best) + 0.02 * abs(first):
            setbacks += 1
        best = min(best, value)
    return 100 * (1 - setbacks / (len(losses) - 1))


def generalisation(train_end: float, val_end: float) -> float:
    return 100 * math.exp(min(0.0, train_end - val_end))  # = 100 · min(1, exp(·)), and exp never overflows


def efficiency(val_rows: list[tuple[int, float]], last_step: int) -> float:
    best_step = min(val_rows, key=lambda r: r[1])[0]
    return 100.0 if last_step <= 0 else 100 * _clamp(best_step / last_step)


def _tail_mean(losses: list[float]) -> float:
    tail = losses[-max(1, len(losses) // 10) :]
    return sum(tail) / len(tail)


def quality_score(rows: Iterable[Mapping[str, Any]]) -> Quality:
    """Score a run from its log rows (dicts with `step` and `loss` or `val_loss`)."""
    rows = list(rows)
    train = [(int(r["step"]), float(r["loss"])) for r in rows if r.get("loss") is not None]
    val = [(int(r["step"]), float(r["val_loss"])) for r in rows if r.get("val_loss") is not None]
    if not train:
        raise ValueError("no training losses in the log: nothing to score")
    losses = [v for _, v in train]
    finite = [v for v in losses if math.isfinite(v)] or [math.inf]
    breakdown: dict[str, float | None] = {
        "convergence": convergence(finite) if math.isfinite(finite[0]) else 0.0,
        "stability": stability(losses),
        "generalisation": None,
        "efficiency": None,
    }
    finite_val = [(s, v) for s, v in val if math.isfinite(v)]
    if finite_val:
        breakdown["generalisation"] = generalisation(_tail_mean(finite), finite_val[-1][1])
        last_step = max(s for s, _ in train + val)
        breakdown["efficiency"] = efficiency(finite_val, last_step)
    elif val:
        breakdown["generalisation"] = breakdown["efficiency"] = 0.0
    measured = {k: v for k, v in breakdown.items() if v is not None}
    score = sum(WEIGHTS[k] * v for k, v in measured.items()) / sum(WEIGHTS[k] for k in measured)
    score = round(score, 1)
    return Quality(score, grade_for(score), {k: None if v is None else round(v, 1) for k, v in breakdown.items()})
