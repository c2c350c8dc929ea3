"""A training-quality score, 0–100, with a letter grade: the yaml-mode spec's §16, from train_log.jsonl rows and
results.json.

The spec's five components, each 0–100 (train rows carry `loss` and `grad_norm`, val rows `val_loss`; L₀ is the
first logged train loss and L_end the mean of the last tenth of the logged train losses, at least one):

    convergence      loss reduction smoothness: 100 · (1 − setbacks / (n − 1)) if L_end < L₀, else 0.
                     A logged loss L_i is a setback when it climbs above the best loss so far, m, by more than
                     a quarter of the progress made so far plus 2 % of L₀:  L_i − m > 0.25·(L₀ − m) + 0.02·L₀.
                     How far the loss fell is not graded: a fine-tune starts near its floor.
    stability        gradient stability: 100 · (1 − spikes / (n − 1)) over the logged grad norms g_i, and 0 if
                     any loss or grad norm is NaN or infinite. g_i is a spike when it exceeds 4 × the median of
                     the norms logged before it.
    efficiency       samples/second: the run's samples/s over its whole wall time as a share of the samples/s
                     of its training steps alone, 100 · steps · ms_per_step / (1000 · wall_seconds) (results.json);
                     validation, checkpoints, setup and scoring are what it loses.
    generalization   train/val gap: 100 · min(1, exp(L_end − val_end)) = 100 · train PPL / val PPL (val_end: the
                     last val_loss); val PPL twice train PPL earns 50.
    reproducibility  cross-run variance: one run has none to measure, so it is "not measured" (a re-run with
                     the recorded seeds gives the same numbers bit for bit; tests/training/test_resume.py checks it).

score = the mean of the measured components (the spec weighs them alike), rounded to one decimal; a component a
run cannot measure (no val rows, no grad norms, no results.json yet) is left out. Grades are the spec's §16.2:
A+ ≥ 95, A ≥ 90, A- ≥ 85, B+ ≥ 80, B ≥ 75, B- ≥ 70, C+ ≥ 65, C ≥ 60, D ≥ 50, F below. The score grades how the
training went, not how good the model is: report.md shows the task's metrics beside it.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

COMPONENTS = ("convergence", "stability", "efficiency", "generalization", "reproducibility")
GRADES = ((95, "A+"), (90, "A"), (85, "A-"), (80, "B+"), (75, "B"), (70, "B-"), (65, "C+"), (60, "C"), (50, "D"))
GRADE_MEANING = {"A+": "production-ready, optimal", "A": "production-ready", "A-": "near-optimal",  # the spec's §16.2
                 "B+": "good, minor issues", "B": "acceptable", "B-": "needs improvement",
                 "C+": "significant issues", "C": "major issues", "D": "critical issues", "F": "failed"}
SPIKE = 4.0  # a grad norm above SPIKE × the median before it is a spike


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
    breakdown: dict[str, float | None]  # component -> 0–100, None when the run cannot measure it

    def as_dict(self) -> dict[str, Any]:
        return {"score": self.score, "grade": self.grade, "breakdown": dict(self.breakdown)}

    def explained(self) -> str:
        """What the grade means, then the components whose mean the score is (`minitrain info`'s two lines)."""
        measured = ", ".join(f"{name} {value:.1f}" for name, value in self.breakdown.items() if value is not None)
        missing = ", ".join(name for name, value in self.breakdown.items() if value is None)
        return (f"grade {self.grade} ({GRADE_MEANING[self.grade]}): how training went, not how good the model is\n"
                f"  the mean of {measured} (each 0–100{'; not measured: ' + missing if missing else ''}; report.md "
                "says what each measures)")


def _clamp(x: float) -> float:
    return min(max(x, 0.0), 1.0)


def convergence(losses: list[float]) -> float:
    if len(losses) < 2 or not _tail_mean(losses) < losses[0]:
        return 0.0
    first, best, setbacks = losses[0], losses[0], 0
    for value in losses[1:]:
        if value - best > 0.25 * (first - best) + 0.02 * abs(first):
            setbacks += 1
        best = min(best, value)
    return 100 * (1 - setbacks / (len(losses) - 1))


def stability(norms: list[float]) -> float:
    if len(norms) < 2:
        return 100.0
    seen, spikes = [norms[0]], 0
    for value in norms[1:]:
        spikes += value > SPIKE * seen[len(seen) // 2]  # the upper median, on a list kept sorted
        bisect.insort(seen, value)
    return 100 * (1 - spikes / (len(norms) - 1))


def efficiency(results: Mapping[str, Any]) -> float | None:
    steps, ms, wall = results.get("steps"), results.get("ms_per_step"), results.get("wall_seconds")
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in (steps, ms, wall)) or wall <= 0:
        return None
    return 100 * _clamp(steps * ms / (1000 * wall))


def generalization(train_end: float, val_end: float) -> float:
    return 100 * math.exp(min(0.0, train_end - val_end))  # = 100 · min(1, exp(·)), and exp never overflows


def _tail_mean(losses: list[float]) -> float:
    tail = losses[-max(1, len(losses) // 10) :]
    return sum(tail) / len(tail)


def quality_score(rows: Iterable[Mapping[str, Any]], results: Mapping[str, Any] | None = None) -> Quality:
    """Score a run from its log rows (dicts with `step` and `loss`, `grad_norm` or `val_loss`) and, when it has
    finished, its results.json (steps, ms_per_step, wall_seconds: the efficiency)."""
    rows = list(rows)
    losses = [float(r["loss"]) for r in rows if r.get("loss") is not None]
    norms = [float(r["grad_norm"]) for r in rows if r.get("grad_norm") is not None]
    val = [float(r["val_loss"]) for r in rows if r.get("val_loss") is not None]
    if not losses:
        raise ValueError("no training losses in the log: nothing to score")
    finite = all(math.isfinite(v) for v in losses + norms)
    breakdown: dict[str, float | None] = dict.fromkeys(COMPONENTS)
    breakdown["convergence"] = convergence(losses) if finite else 0.0
    if norms:
        breakdown["stability"] = stability(norms) if finite else 0.0
    breakdown["efficiency"] = efficiency(results or {})
    if val:
        ends = (_tail_mean(losses), val[-1])
        breakdown["generalization"] = generalization(*ends) if all(map(math.isfinite, ends)) else 0.0
    measured = [v for v in breakdown.values() if v is not None]
    score = round(sum(measured) / len(measured), 1)
    return Quality(score, grade_for(score), {k: None if v is None else round(v, 1) for k, v in breakdown.items()})
