"""A sweep's results: sweep.json and sweep.csv (one row per trial), the best trial, and two plots.

    sweep.json   {"name", "base", "metric", "mode", "backend", "workers", "wall_seconds", "best": <trial id>,
                  "space": {...}, "trials": [row, ...]}
    sweep.csv    trial, one column per swept key, seed, status, steps, the metrics, wall_seconds
    sweep_curves.png   val PPL against the step, one line per trial (colour: the first swept key; line style:
                       the seed)
    sweep_params.png   the metric against each swept key, a point per trial and the mean over seeds

A row's `wall_seconds` is the only value that changes when the same trials run again; `comparable(rows)` drops
it, so two runs of a sweep (on the local pool or on Ray) can be compared for equality.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from minitrain.common.figures import colormap, save_figure, subplots
from minitrain.common.io import atomic_write_json, atomic_write_text
from minitrain.monitor.report import read_log
from minitrain.sweep.trials import TIMING_KEYS


def comparable(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows without their timings: what must be equal when the same trials are run again."""
    return [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in rows]


def best_trial(rows: Sequence[Mapping[str, Any]], metric: str, mode: str) -> dict[str, Any] | None:
    """The finished row with the lowest (mode min) or highest `metric`; the first of equal ones; None if none."""
    scored = [r for r in rows if r["status"] in ("completed", "early_stopped") and isinstance(r.get(metric),
                                                                                                int | float)
              and math.isfinite(r[metric])]
    if not scored:
        return None
    sign = 1 if mode == "min" else -1
    return min(scored, key=lambda r: sign * r[metric])


def sweep_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    params = list(dict.fromkeys(key for row in rows for key in row["params"]))
    rest = list(dict.fromkeys(key for row in rows for key in row if key not in ("trial", "params")))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["trial", *params, *rest])
    for row in rows:
        cells = [row["trial"], *(row["params"].get(p) for p in params), *(row.get(k) for k in rest)]
        writer.writerow(["" if c is None else repr(c) if isinstance(c, float) else c for c in cells])
    return out.getvalue()


def write_table(sweep_dir: Path, summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> None:
    atomic_write_json(sweep_dir / "sweep.json", {**summary, "trials": list(rows)})
    atomic_write_text(sweep_dir / "sweep.csv", sweep_csv(rows))


def _label(row: Mapping[str, Any]) -> str:
    values = [f"{k.rsplit('.', 1)[-1]}={v:g}" if isinstance(v, float) else f"{k.rsplit('.', 1)[-1]}={v}"
              for k, v in row["params"].items()]
    return " ".join([*values, *([f"seed={row['seed']}"] if row["seed"] is not None else [])]) or row["trial"]


def plot_sweep(sweep_dir: Path, rows: Sequence[Mapping[str, Any]], metric: str, title: str) -> None:
    """sweep_curves.png and sweep_params.png (see the module docstring)."""
    keys = list(dict.fromkeys(k for row in rows for k in row["params"]))
    seeds = list(dict.fromkeys(row["seed"] for row in rows))
    colour_values = list(dict.fromkeys(row["params"].get(keys[0]) for row in rows)) if keys else [None]
    cmap = colormap("viridis")
    styles = ["-", "--", ":", "-."]

    fig, ax = subplots(figsize=(8, 4.8), dpi=100)
    for row in rows:
        log = sweep_dir / row["run_dir"] / "train_log.jsonl"
        val = [r for r in read_log(log) if "val_ppl" in r] if log.is_file() else []
        if not val:
            continue
        shade = colour_values.index(row["params"].get(keys[0])) / max(len(colour_values) - 1, 1) if keys else 0.3
        ax.plot([r["step"] for r in val], [r["val_ppl"] for r in val], color=cmap(0.9 * shade),
                linestyle=styles[seeds.index(row["seed"]) % len(styles)], linewidth=1.2, label=_label(row))
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("val perplexity (log scale)")
    ax.set_title(f"{title}: val PPL of every trial")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save_figure(fig, sweep_dir / "sweep_curves.png")

    shown = keys or ["seed"]
    fig, axes = subplots(1, len(shown), figsize=(4.5 * len(shown), 4), dpi=100, squeeze=False)
    for ax, key in zip(axes[0], shown, strict=True):
        points = [(row["params"].get(key) if key != "seed" else row["seed"], row.get(metric)) for row in rows]
        points = [(x, y) for x, y in points if isinstance(x, int | float) and isinstance(y, int | float)]
        if not points:
            continue
        ax.scatter([x for x, _ in points], [y for _, y in points], color="tab:blue", alpha=0.6, label="trials")
        means = {x: [y for px, y in points if px == x] for x, _ in points}
        xs = sorted(means)
        ax.plot(xs, [sum(means[x]) / len(means[x]) for x in xs], color="tab:orange", marker="o", label="mean")
        if min(xs) > 0 and max(xs) / min(xs) >= 10:
            ax.set_xscale("log")
        ax.set_xlabel(key)
        ax.set_ylabel(metric)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{title}: {metric} by value")
    fig.tight_layout()
    save_figure(fig, sweep_dir / "sweep_params.png")


def summary_text(rows: Sequence[Mapping[str, Any]], best: Mapping[str, Any] | None, metric: str) -> str:
    """The lines `minitrain sweep` prints: one per trial, then the best."""
    lines = []
    for row in rows:
        value = row.get(metric)
        shown = f"{value:.4f}" if isinstance(value, float) else "—"
        lines.append(f"  {row['trial']:<40} {row['status']:<14} {metric} {shown}")
    if best is not None:
        lines.append(f"best: {best['trial']} ({metric} {best[metric]:.4f}), run folder {best['run_dir']}")
    return "\n".join(lines)
