"""What a table task logs at each validation and leaves behind at the end (results.json, confusion_matrix.png,
loss_curve.png).

Each validation logs `val_loss` and the scalar metrics training.val_metrics lists (`val_accuracy`, `val_f1`...;
precision, recall and f1 as macro averages). After training every metric of the task is computed on train, val
and, when there is one, test: results.json holds them with the classes, each split's confusion matrix and the
per-class precision, recall, f1 and support; confusion_matrix.png draws the test split's (else val's).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from minitrain.common.figures import save_figure, subplots
from minitrain.config.schema import TASK_METRICS, Config
from minitrain.data.batcher import EvalBatcher
from minitrain.monitor.report import read_log
from minitrain.training import artifacts

EVAL_ROWS = 1024  # rows per evaluation batch: no tape is kept, so a large batch only saves Python overhead
NOT_SCALAR = ("confusion_matrix", "per_class")


def table_validator(cfg: Config, task: Any, val_batches: Any) -> Callable[[Any], dict[str, float]]:
    """`validate(model)` for the loop: {"val_loss", "val_<metric>"...} over the val split."""
    wanted = [m for m in cfg.training.val_metrics if m in TASK_METRICS[task.name] and m not in ("loss",
                                                                                                  *NOT_SCALAR)]

    def validate(model: Any) -> dict[str, float]:
        measured = task.measure(model, val_batches, wanted)
        return {f"val_{key}": value for key, value in measured.items() if key not in NOT_SCALAR}

    return validate


def score_splits(parts: Any) -> dict[str, dict[str, Any]]:
    """Every metric of the task on every split the table has: {split: {metric: value}}."""
    metrics = TASK_METRICS[parts.task.name]
    return {split: parts.task.measure(parts.model, EvalBatcher(batch, EVAL_ROWS), metrics)
            for split, batch in parts.table.splits.items()}


def table_results(cfg: Config, parts: Any, outcome: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """results.json's content (wall_seconds and model_path are the caller's to fill in); draws
    confusion_matrix.png (unless output.plots is false)."""
    scores = score_splits(parts)
    pipeline = parts.table.pipeline
    results: dict[str, Any] = {"task": pipeline.task, "status": outcome["status"], "steps": outcome["steps_done"]}
    for split, values in scores.items():
        results.update({f"{split}_{key}": value for key, value in values.items() if key not in NOT_SCALAR})
    results.update(best_val_step=outcome["best_val_step"], best_val_loss=outcome["best_val_loss"],
                   ms_per_step=outcome["ms_per_step"], wall_seconds=None, peak_rss_mb=artifacts.peak_rss_mb(),
                   model_path="")
    if pipeline.classes is not None:
        results["classes"] = pipeline.classes
        for split, values in scores.items():
            results[f"{split}_confusion_matrix"] = values["confusion_matrix"]
            results[f"{split}_per_class"] = values["per_class"]
        shown = "test" if "test" in scores else "val"
        if cfg.output.plots:
            plot_confusion_matrix(out_dir / "confusion_matrix.png", scores[shown]["confusion_matrix"],
                                  pipeline.classes, f"{cfg.name or out_dir.name}: {shown} split")
    return results


def plot_confusion_matrix(png_path: str | os.PathLike, matrix: Sequence[Sequence[int]], classes: Sequence[Any],
                          title: str) -> None:
    """Counts per (true class, predicted class), rows the truth, with each cell's count written in it."""
    import numpy as np

    counts = np.asarray(matrix)
    size = max(4.0, 0.5 * len(classes) + 2)
    fig, ax = subplots(figsize=(size, size), dpi=100)
    ax.imshow(counts, cmap="Blues")
    ticks = range(len(classes))
    ax.set_xticks(ticks, [str(c) for c in classes])
    ax.set_yticks(ticks, [str(c) for c in classes])
    for (i, j), value in np.ndenumerate(counts):
        ax.text(j, i, str(value), ha="center", va="center", fontsize=8,
                color="white" if value > counts.max() / 2 else "black")
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    ax.set_title(f"{title} (accuracy {np.trace(counts) / max(counts.sum(), 1):.3f})")
    fig.tight_layout()
    save_figure(fig, png_path)


def plot_table_curve(png_path: str | os.PathLike, log_path: str | os.PathLike, model_name: str) -> None:
    """Train and val loss against the step, and the val metrics logged (accuracy, f1, r2...) on a second axis."""
    rows = read_log(log_path)
    train = [r for r in rows if "loss" in r]
    val = [r for r in rows if "val_loss" in r]
    fig, ax = subplots(figsize=(8, 4.8), dpi=100)
    ax.plot([r["step"] for r in train], [r["loss"] for r in train], color="tab:blue", linewidth=1, alpha=0.8,
            label="train loss (one batch)")
    ax.plot([r["step"] for r in val], [r["val_loss"] for r in val], color="tab:orange", linewidth=2, marker="o",
            markersize=3, label="val loss")
    ax.set_yscale("log")
    ax.set_xlabel("step (optimizer updates)")
    ax.set_ylabel("loss (log scale)")
    others = [key for key in (val[0] if val else {}) if key not in ("step", "val_loss")]
    lines, labels = ax.get_legend_handles_labels()
    if others:
        right = ax.twinx()
        for key in others:
            right.plot([r["step"] for r in val], [r[key] for r in val], linewidth=1.5, linestyle="--", label=key)
        right.set_ylabel("val metric")
        more, more_labels = right.get_legend_handles_labels()
        lines, labels = lines + more, labels + more_labels
    ax.set_title(f"{model_name} training: loss vs. step")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(lines, labels, loc="center right")
    fig.tight_layout()
    save_figure(fig, png_path)
