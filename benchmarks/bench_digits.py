"""The digits experiment beside scikit-learn: the same split, the same preprocessing, one process.

    .venv/bin/python benchmarks/bench_digits.py [--config experiments/digits-mlp/config.yaml] [--rounds 3]
                                                [--out experiments/digits-mlp/baselines.json]

scikit-learn (a dev dependency, never imported by minitrain/) gets exactly the arrays minitrain trains on: the
rows of the config's split, min-max scaled by the fit on train (`minitrain.data.tables.build_table_data`), so
the accuracies compare models, not data handling. Models:

    minitrain   the config's sequential MLP, trained by `run_training` (the whole run: log, plots, model file)
    LogisticRegression   scikit-learn's defaults (lbfgs, L2, C=1), max_iter 1000
    MLPClassifier        the same hidden layer (128 ReLU units), adam, batch 32 (scikit-learn's defaults
                         otherwise: early stopping off, at most 200 epochs)

Wall times: the machine is shared, so the three fits run alternately, `--rounds` times, in this one process, and
the median of each is reported (with the minimum and maximum). Then 5-fold cross-validation: the folds minitrain
cuts (stratified, shuffled by the split seed) over train + val, each model trained on four and scored on the
fifth, preprocessing fitted on each fold's training rows; mean ± std (ddof 0) over the folds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minitrain.config import load_config  # noqa: E402
from minitrain.config.table_check import fold_of, split_seed  # noqa: E402
from minitrain.data.tables import build_table_data  # noqa: E402
from minitrain.training.run import run_training  # noqa: E402

FOLDS = 5


def sklearn_models(seed: int) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    return {
        "LogisticRegression": LogisticRegression(max_iter=1000),
        "MLPClassifier": MLPClassifier(hidden_layer_sizes=(128,), batch_size=32, random_state=seed),
    }


def fit_and_score(model, train, tests: dict) -> tuple[float, dict]:
    """(seconds to fit, {split: accuracy})."""
    from sklearn.exceptions import ConvergenceWarning

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # MLPClassifier stops at max_iter: that is the budget
        model.fit(train.input, train.target)
    seconds = time.perf_counter() - start
    return seconds, {split: float(model.score(b.input, b.target)) for split, b in tests.items()}


def minitrain_run(cfg, folder: Path, fold=None) -> tuple[float, dict]:
    start = time.perf_counter()
    results = run_training(cfg, folder / "run", models_dir=folder / "models", progress=False, fold=fold)
    return time.perf_counter() - start, results


def spread(times: list[float]) -> dict:
    return {"median": round(statistics.median(times), 3), "min": round(min(times), 3), "max": round(max(times), 3)}


def holdout(cfg, rounds: int) -> dict:
    table = build_table_data(cfg.data, cfg.task, split_seed(cfg))
    splits = table.splits
    tests = {"val": splits["val"], "test": splits["test"]}
    times = {"minitrain": [], "LogisticRegression": [], "MLPClassifier": []}
    loop_times, scores = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):  # alternate, so a busy moment of the shared machine hits every model alike
            folder = Path(tmp) / f"round-{r}"
            seconds, results = minitrain_run(cfg, folder)
            times["minitrain"].append(seconds)
            # The loop alone (steps and validations), as fit() is scikit-learn's training alone.
            loop_times.append(json.loads((folder / "run" / "manifest.json").read_text())["train_wall_seconds"])
            scores["minitrain"] = {"val": results["val_accuracy"], "test": results["test_accuracy"]}
            for name, model in sklearn_models(cfg.training.rng_seed).items():
                seconds, accuracy = fit_and_score(model, splits["train"], tests)
                times[name].append(seconds)
                scores[name] = accuracy
    report = {name: {**scores[name], "wall_seconds": spread(times[name])} for name in times}
    report["minitrain"]["train_loop_seconds"] = spread(loop_times)
    return report


def cross_validation(cfg) -> dict:
    cv_cfg = cfg.model_copy(deep=True)
    from minitrain.config.table_sections import CrossValidationConfig

    cv_cfg.training.cross_validation = CrossValidationConfig(folds=FOLDS, stratified=True, shuffle=True)
    accuracies = {"minitrain": [], "LogisticRegression": [], "MLPClassifier": []}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(FOLDS):
            fold = fold_of(cv_cfg, index)
            _, results = minitrain_run(cfg, Path(tmp) / f"fold-{index}", fold)
            accuracies["minitrain"].append(results["val_accuracy"])
            table = build_table_data(cfg.data, cfg.task, split_seed(cfg), fold=fold)
            for name, model in sklearn_models(cfg.training.rng_seed).items():
                _, accuracy = fit_and_score(model, table.splits["train"], {"val": table.splits["val"]})
                accuracies[name].append(accuracy["val"])
    return {name: {"folds": [round(a, 4) for a in values], "mean": float(np.mean(values)),
                   "std": float(np.std(values))} for name, values in accuracies.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "experiments" / "digits-mlp" / "config.yaml"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the numbers here as JSON")
    args = parser.parse_args()
    import sklearn

    cfg = load_config(args.config)
    config = Path(args.config).resolve()
    shown = config.relative_to(ROOT) if config.is_relative_to(ROOT) else config
    report = {"config": str(shown), "scikit-learn": sklearn.__version__, "rounds": args.rounds,
              "holdout": holdout(cfg, args.rounds), f"cv_{FOLDS}_fold_accuracy": cross_validation(cfg)}
    print(f"{'model':<20} {'val acc':>8} {'test acc':>8}   wall s, median of {args.rounds} [min, max]")
    for name, row in report["holdout"].items():
        wall = row["wall_seconds"]
        what = "whole run" if name == "minitrain" else "fit"
        print(f"{name:<20} {row['val']:>8.4f} {row['test']:>8.4f}   {wall['median']:.3f} [{wall['min']:.3f}, "
              f"{wall['max']:.3f}] ({what})")
    loop = report["holdout"]["minitrain"]["train_loop_seconds"]
    print(f"{'minitrain, loop only':<38}   {loop['median']:.3f} [{loop['min']:.3f}, {loop['max']:.3f}]")
    print(f"\n{FOLDS}-fold cross-validation accuracy (train + val pooled):")
    for name, row in report[f"cv_{FOLDS}_fold_accuracy"].items():
        print(f"{name:<20} {row['mean']:.4f} ± {row['std']:.4f}   folds {row['folds']}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
