"""Run outputs for people: metrics.csv beside train_log.jsonl, and report.md.

    rows = read_log(run_dir / "train_log.jsonl")
    write_metrics_csv(rows, run_dir / "metrics.csv")
    write_report(run_dir / "report.md", title=cfg.name, results=results, quality=quality_score(rows))

metrics.csv has one row per logged step (a train row and a val row at the same step are merged), `step` first,
then the other keys in the order they first appear; a value a row did not log is left empty. report.md links the
loss plot (`loss_curve.png`, written by the loop), tabulates results.json and shows the quality score (formulas
in minitrain/monitor/quality.py and docs/yaml-mode.md). Both files are deterministic functions of their inputs.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from minitrain.errors import UserError
from minitrain.io import atomic_write_text, read_text
from minitrain.monitor.quality import WEIGHTS, Quality


def read_log(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a train_log.jsonl; a line that is not a JSON object of numbers with an integer `step` is a
    UserError naming file and line.

    Rows are appended whole, newline last (`io.append_line`), so a last line without its newline that does not
    parse is an append a kill cut short: it is skipped, as a resume drops it too.
    """
    path = Path(path)
    text = read_text(path, "training log")
    lines = text.splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines) and not text.endswith("\n"):
                break  # torn by a kill mid-append
            raise UserError(f"{path}:{number}: not a JSON line ({exc.msg})") from None
        if not isinstance(row, dict) or not _is_int(row.get("step")):
            raise UserError(f"{path}:{number}: a log row must be a JSON object with an integer 'step'")
        bad = [key for key, value in row.items() if not (_is_int(value) or isinstance(value, float))]
        if bad:
            raise UserError(f"{path}:{number}: a log row holds numbers only; {bad[0]!r} is {row[bad[0]]!r}")
        rows.append(row)
    return rows


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true/false load as bools, not steps


def metrics_table(rows: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, merged rows): one row per step in first-seen order, columns `step` then first-seen keys."""
    merged: dict[int, dict[str, Any]] = {}
    columns = ["step"]
    for row in rows:
        merged.setdefault(row["step"], {"step": row["step"]}).update(row)
        columns += [k for k in row if k not in columns]
    return columns, list(merged.values())


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # shortest text that reads back to the same float
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def metrics_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    columns, table = metrics_table(rows)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in table:
        writer.writerow([_cell(row.get(c)) for c in columns])
    return out.getvalue()


def write_metrics_csv(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike) -> None:
    atomic_write_text(path, metrics_csv(rows))


def _show(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower() if isinstance(value, bool) else "—"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, dict | list):
        return "`" + json.dumps(value, sort_keys=True) + "`"
    return str(value).replace("|", "\\|")


_COMPONENT_MEANING = {
    "convergence": "how far the train loss fell (÷4 or more = 100)",
    "stability": "share of logged steps without a loss setback",
    "generalisation": "train PPL / val PPL at the end",
    "efficiency": "share of the run before the best val_loss",
}


def report_markdown(
    *, title: str, results: Mapping[str, Any], quality: Quality | None, plot: str = "loss_curve.png",
    sections: Sequence[str] = (),
) -> str:
    """The text of report.md; `sections` are markdown lines added at the end (callbacks' sections)."""
    lines = [f"# Training report: {title}", "", f"![loss curve]({plot})", "", "## Results", ""]
    lines += ["| metric | value |", "|---|---|"]
    lines += [f"| {key} | {_show(value)} |" for key, value in results.items()]
    if quality is not None:
        lines += ["", f"## Training quality: {quality.score:.1f} / 100 — grade {quality.grade}", ""]
        lines += ["| component | score | weight | measures |", "|---|---|---|---|"]
        for name, weight in WEIGHTS.items():
            score = quality.breakdown.get(name)
            shown = "not measured" if score is None else f"{score:.1f}"
            lines.append(f"| {name} | {shown} | {weight:.2f} | {_COMPONENT_MEANING[name]} |")
        lines += ["", "Formulas: docs/yaml-mode.md, section \"Training quality score\"."]
    return "\n".join([*lines, *sections]) + "\n"


def write_report(
    path: str | os.PathLike,
    *,
    title: str,
    results: Mapping[str, Any],
    quality: Quality | None,
    plot: str = "loss_curve.png",
    sections: Sequence[str] = (),
) -> None:
    atomic_write_text(path, report_markdown(title=title, results=results, quality=quality, plot=plot,
                                            sections=sections))
