"""Run outputs for people: metrics.csv beside train_log.jsonl, and report.md.

    rows = read_log(run_dir / "train_log.jsonl")
    metrics_table(rows)     # metrics.csv's columns and rows: minitrain/monitor/metrics_files.py writes them
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

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.io import atomic_write_text, parse_json, read_text
from minitrain.monitor.curves import overfitting_onset
from minitrain.monitor.quality import COMPONENTS, GRADE_MEANING, Quality


def read_log(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a train_log.jsonl; a line that is not a valid row (`log_row_problem`) is a UserError naming
    file and line.

    Rows are appended whole, newline last (`io.append_line`), so a last line without its newline that does not
    parse is an append a kill cut short: it is skipped, as a resume drops it too.
    """
    path = Path(path)
    text = read_text(path, "training log", MAX_LOG_BYTES)
    lines = text.splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = parse_json(line, f"{path}:{number}", "log line")
        except UserError:
            if number == len(lines) and not text.endswith("\n"):
                break  # torn by a kill mid-append
            raise
        problem = log_row_problem(row)
        if problem:
            raise UserError(f"{path}:{number}: {problem}", BAD_INPUT)
        rows.append(row)
    return rows


MAX_LOG_BYTES = 1 << 30
# What the loop logs: every value a number, these never negative; a val row carries both val_loss and val_ppl.
_NON_NEGATIVE = ("loss", "val_loss", "val_ppl", "lr", "grad_norm")


def log_row_problem(row: Any) -> str | None:
    """Why `row` (a parsed log line) is not a log row the loop could have written, or None when it is one."""
    if not isinstance(row, dict) or not _is_int(row.get("step")):
        return "a log row must be a JSON object with an integer 'step'"
    bad = [key for key, value in row.items() if not (_is_int(value) or isinstance(value, float))]
    if bad:
        return f"a log row holds numbers only; {bad[0]!r} is {row[bad[0]]!r}"
    negative = [key for key in ("step", *_NON_NEGATIVE) if key in row and row[key] < 0]
    if negative:
        return f"{negative[0]!r} cannot be negative, found {row[negative[0]]!r}"
    if "val_ppl" in row and "val_loss" not in row:  # a table task's val rows have a loss and no perplexity
        return "a validation row with 'val_ppl' has 'val_loss' too"
    return None


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


def _show(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower() if isinstance(value, bool) else "—"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, dict | list):
        return "`" + json.dumps(value, sort_keys=True) + "`"
    return str(value).replace("|", "\\|")


_COMPONENT_MEANING = {  # the spec's §16.1 reading of each, then how minitrain measures it
    "convergence": "loss reduction smoothness: share of logged steps without a loss setback (0 if it did not fall)",
    "stability": "gradient stability: share of logged grad norms without a spike (> 4 × the median before)",
    "efficiency": "samples/second: whole-run throughput as a share of the training steps' throughput",
    "generalization": "train/val gap: train PPL / val PPL at the end",
    "reproducibility": "cross-run variance: one run has no other to compare with",
}


def report_markdown(*, title: str, results: Mapping[str, Any], quality: Quality | None,
                    plot: str | None = "loss_curve.png", gaps: Sequence[Mapping[str, float]] = (),
                    sections: Sequence[str] = (), hyperparameters: Mapping[str, Any] | None = None) -> str:
    """The text of report.md. `gaps` is `curves.train_val_gap` of the run's log (the "Train vs val" section);
    `sections` are markdown lines added at the end (callbacks' sections); `hyperparameters` the resolved
    settings the run trained with, by dotted key. `plot` None: a run that drew no plots (output.plots false)
    shows neither the loss curve nor the dashboard."""
    lines = [f"# Training report: {title}", "", *([f"![loss curve]({plot})", ""] if plot else []), "## Results", ""]
    lines += ["| metric | value |", "|---|---|"]
    lines += [f"| {key} | {_show(value)} |" for key, value in results.items()]
    if hyperparameters:
        lines += ["", "## Hyperparameters", "", "| setting | value |", "|---|---|"]
        lines += [f"| {key} | {_show(value)} |" for key, value in hyperparameters.items()]
    if gaps:
        lines += ["", *_train_vs_val(gaps, dashboard=plot is not None)]
    if quality is not None:
        lines += ["", f"## Training quality: {quality.score:.1f} / 100 — grade {quality.grade}", ""]
        lines += [f"Grade {quality.grade}: {GRADE_MEANING[quality.grade]} (the spec's §16.2) — as training "
                  "went; how good the model is, the task's metrics above say.", ""]
        lines += ["| component | score | measures |", "|---|---|---|"]
        for name in COMPONENTS:
            score = quality.breakdown.get(name)
            shown = "not measured" if score is None else f"{score:.1f}"
            lines.append(f"| {name} | {shown} | {_COMPONENT_MEANING[name]} |")
        lines += ["", "The score is the mean of the measured components. Formulas: docs/yaml-mode.md, section "
                      "\"Training quality score\"."]
    return "\n".join([*lines, *sections]) + "\n"


def _train_vs_val(gaps: Sequence[Mapping[str, float]], dashboard: bool) -> list[str]:
    """The "Train vs val" section: the gap at the last validation, the best one, and whether val turned up."""
    last, best = gaps[-1], min(gaps, key=lambda g: g["val_ppl"])
    onset = overfitting_onset(gaps)
    verdict = (f"val PPL ended {100 * (last['val_ppl'] / best['val_ppl'] - 1):.1f} % above its lowest, reached at "
               f"step {onset}: the run went on past its best (overfitting)" if onset is not None
               else "val PPL ended within 5 % of its lowest: no overfitting seen")
    return [
        "## Train vs val", "", *(["![dashboard](dashboard.png)", ""] if dashboard else []),
        "| at | step | train PPL (smoothed) | val PPL | val / train |", "|---|---|---|---|---|",
        *(f"| {name} | {g['step']} | {g['train_ppl']:.4g} | {g['val_ppl']:.4g} | {g['gap']:.3g} |"
          for name, g in (("last validation", last), ("lowest val PPL", best))),
        "", verdict + ".",
    ]


def write_report(path: str | os.PathLike, **report: Any) -> None:
    """report.md at `path`, atomically: `report_markdown(**report)`."""
    atomic_write_text(path, report_markdown(**report))
