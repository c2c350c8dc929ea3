"""k-fold cross-validation (`training.cross_validation: {folds, stratified, shuffle}`): k models, one per fold.

The rows of train and val are pooled and cut into k folds (minitrain/data/row_split.py; stratified by the
target, shuffled by the split seed); model i trains on the other k − 1 folds and is validated on fold i. A test
split, when there is one, stays out of every fold and is scored by each model. Each fold is a complete run
folder, RUN/fold-<i>/ (its own log, checkpoints, results.json and model file); RUN/results.json gathers each
fold's final metrics and, for every metric, the mean and the standard deviation over the folds (ddof 0, as
NumPy's and scikit-learn's `.std()`), and RUN/report.md shows them as mean ± std.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.config import Config
from minitrain.config.datacheck import DataSummary, check_data
from minitrain.config.table_check import fold_of, split_seed
from minitrain.monitor.report import write_report
from minitrain.training import artifacts


def _scalars(results: dict[str, Any]) -> dict[str, float]:
    """The per-split metrics of a fold's results.json (val_accuracy, test_f1, ...), numbers only."""
    return {key: value for key, value in results.items()
            if key.startswith(("train_", "val_", "test_")) and isinstance(value, int | float)
            and not isinstance(value, bool)}


def summarize(fold_results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """{"mean": {metric: mean over folds}, "std": {metric: std over folds (ddof 0)}}."""
    keys = list(_scalars(fold_results[0]))
    table = np.array([[_scalars(r)[key] for key in keys] for r in fold_results], dtype=np.float64)
    return {"mean": dict(zip(keys, table.mean(axis=0).tolist(), strict=True)),
            "std": dict(zip(keys, table.std(axis=0).tolist(), strict=True))}


def cross_validate(cfg: Config, out_dir: str | os.PathLike, *, progress: bool = True, strict: bool = False,
                   config_path: str | os.PathLike | None = None, overrides: tuple[str, ...] | list[str] = (),
                   summary: DataSummary | None = None, train_fold: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """Train one model per fold into `out_dir`/fold-<i>/ and write the summary; returns results.json's content.

    `train_fold` trains one fold (`run.run_training`, which calls this function when the config asks for folds)."""
    start = time.perf_counter()
    summary = summary if summary is not None else check_data(cfg)
    out_dir = Path(out_dir)
    cv = cfg.training.cross_validation
    folds = []
    for index in range(cv.folds):
        if progress:
            print(f"cross-validation: fold {index + 1} of {cv.folds}", flush=True)
        fold_dir = out_dir / f"fold-{index}"
        folds.append(train_fold(cfg, fold_dir, progress=progress, strict=strict, config_path=config_path,
                                overrides=overrides, models_dir=fold_dir, summary=summary,
                                fold=fold_of(cfg, index)))
    stats = summarize(folds)
    results = {
        "status": "completed",
        "cross_validation": {"folds": cv.folds, "stratified": cv.stratified, "shuffle": cv.shuffle,
                             "seed": split_seed(cfg)},
        **stats,
        "folds": [{"run": f"fold-{i}", **_scalars(r)} for i, r in enumerate(folds)],
        "wall_seconds": round(time.perf_counter() - start, 3),
    }
    artifacts.atomic_write_json(out_dir / "results.json", results)
    artifacts.atomic_write_json(out_dir / "manifest.json", {
        **artifacts.new_manifest(cfg),
        "data_manifest_hash": None, "status": "completed", "runs": [f"fold-{i}" for i in range(cv.folds)],
        "wall_seconds": results["wall_seconds"]})
    shown = {key: f"{mean:.4f} ± {stats['std'][key]:.4f}" for key, mean in stats["mean"].items()}
    write_report(out_dir / "report.md", title=f"{cfg.name or out_dir.name} ({cv.folds}-fold cross-validation)",
                 results={**shown, "wall_seconds": results["wall_seconds"]}, quality=None,
                 plot="fold-0/loss_curve.png" if cfg.output.plots else None)
    return results
