"""Declarative alerts (an "andon cord"): rules such as `loss > 10: warn`, `stall(50): warn`, `nan: halt`.

Grammar (parsed by a regex tokenizer and a few lines of recursive descent; nothing is evaluated as code):

    rule       := condition ":" action                  action := "warn" | "halt"
    condition  := "nan"                                 any logged number is NaN or ±inf
                | [metric "."] "stall" "(" INT ")"      metric (default loss) has not reached a new
                                                        minimum for INT steps
                | metric op NUMBER                      op := ">" | ">=" | "<" | "<="
    metric     := identifier                            a key of the logged row: loss, val_loss, grad_norm, lr, ...

Use from the loop: build `AlertMonitor(cfg.monitoring.alert_rules())` once, call `check(step, row)` on every logged row
(a dict such as `{"loss": 2.3, "lr": 3e-4, "grad_norm": 0.8}`), print each returned `Fired.message`, and stop
the run when `any(f.action == "halt" for f in fired)`. A threshold or nan alert fires when its condition becomes
true and re-arms when it is false again; a stall alert fires once per stall and re-arms on a new minimum.
"""

from __future__ import annotations

import math
import numbers
import operator
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(
    r"\s*(?:(?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>>=|<=|>|<)|(?P<punct>[():.]))"
)
_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
ACTIONS = ("warn", "halt")


@dataclass(frozen=True)
class Alert:
    """A parsed rule. `kind` is 'threshold', 'stall' or 'nan'."""

    text: str
    kind: str
    action: str
    metric: str = "loss"
    op: str = ""
    value: float = 0.0
    window: int = 0
    message: str = ""  # the user's own words, shown when it fires (the spec's mapping form)


@dataclass(frozen=True)
class Fired:
    """An alert that fired at `step`; `message` is ready to print."""

    alert: Alert
    step: int
    action: str
    message: str


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos, text = [], 0, text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"alert {text!r}: unexpected {text[pos:].strip()!r}")
        kind = match.lastgroup
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


def parse_alert(text: str, message: str = "") -> Alert:
    """Parse one rule (`message`: words to show when it fires); ValueError naming the problem (config validation
    uses it too)."""
    if not isinstance(text, str) or ":" not in text:
        raise ValueError(f"alert {text!r} must look like 'CONDITION: ACTION', e.g. 'loss > 10: warn'")
    condition_text, _, action = text.rpartition(":")
    action = action.strip()
    if action not in ACTIONS:
        raise ValueError(f"alert {text!r}: action must be warn or halt (got {action!r})")
    toks = _tokens(condition_text)
    kinds = [k if k != "punct" else v for k, v in toks]
    values = [v for _, v in toks]
    if values == ["nan"]:
        return Alert(text, "nan", action, metric="*", message=message)
    if kinds[-4:] == ["name", "(", "number", ")"] and values[-4] == "stall":
        metric = "loss"
        if len(toks) == 6 and kinds[:2] == ["name", "."]:
            metric = values[0]
        elif len(toks) != 4:
            raise ValueError(f"alert {text!r}: write a stall rule as 'stall(50)' or 'val_loss.stall(5)'")
        window = values[-2]
        if not window.isdigit() or int(window) < 1:
            raise ValueError(f"alert {text!r}: stall needs a whole number of steps >= 1 (got {window})")
        return Alert(text, "stall", action, metric=metric, window=int(window), message=message)
    if kinds == ["name", "op", "number"]:
        return Alert(text, "threshold", action, metric=values[0], op=values[1], value=float(values[2]),
                     message=message)
    raise ValueError(f"alert {text!r}: condition must be 'METRIC > NUMBER' (or >=, <, <=), 'stall(N)' or 'nan'")


def _is_number(value: Any) -> bool:
    # numbers.Real covers Python and NumPy scalars; a bool is not a metric.
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class AlertMonitor:
    """Evaluates a list of rules against each logged row."""

    def __init__(self, rules: Iterable[str | Alert]) -> None:
        self.alerts = [r if isinstance(r, Alert) else parse_alert(r) for r in rules]
        self._active = [False] * len(self.alerts)  # condition true at the previous check (edge trigger)
        self._best: list[tuple[float, int] | None] = [None] * len(self.alerts)  # stall: (best, its step)

    def check(self, step: int, row: Mapping[str, Any]) -> list[Fired]:
        """The alerts that fire on this row (logged at optimizer step `step`)."""
        fired = []
        for i, alert in enumerate(self.alerts):
            message = self._evaluate(i, alert, step, row)
            if message is not None:
                said = f" ({alert.message})" if alert.message else ""
                fired.append(Fired(alert, step, alert.action, f"alert '{alert.text}' at step {step}: {message}{said}"))
        return fired

    def _evaluate(self, i: int, alert: Alert, step: int, row: Mapping[str, Any]) -> str | None:
        if alert.kind == "nan":
            bad = [k for k, v in row.items() if _is_number(v) and not math.isfinite(v)]
            return self._edge(i, bool(bad), f"{', '.join(bad)} not finite")
        value = row.get(alert.metric)
        if not _is_number(value):
            return None  # this row does not log the metric (e.g. a train row for val_loss)
        if alert.kind == "threshold":
            hit = _OPS[alert.op](value, alert.value)
            return self._edge(i, hit, f"{alert.metric} = {value:.6g} {alert.op} {alert.value:g}")
        best = self._best[i]
        if best is None or value < best[0]:
            self._best[i] = (value, step)
            self._active[i] = False
            return None
        if step - best[1] >= alert.window and not self._active[i]:
            self._active[i] = True
            return f"{alert.metric} has not improved on {best[0]:.6g} (step {best[1]}) for {step - best[1]} steps"
        return None

    def _edge(self, i: int, hit: bool, message: str) -> str | None:
        was_active, self._active[i] = self._active[i], hit
        return message if hit and not was_active else None

    def state_dict(self) -> dict:
        """JSON-serialisable state, so a resumed run fires exactly as an uninterrupted one would."""
        return {"active": list(self._active), "best": [list(b) if b else None for b in self._best]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        active = [bool(a) for a in state["active"]]
        best = [(float(b[0]), int(b[1])) if b else None for b in state["best"]]
        if len(active) != len(self._active) or len(best) != len(self._best):
            raise ValueError(f"alert state is for {len(active)} alerts, this run has {len(self._active)}")
        self._active, self._best = active, best
