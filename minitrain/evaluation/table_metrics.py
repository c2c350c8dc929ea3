"""Metrics of a classifier and a regressor, computed in float64 over a whole split (the tests check each against
scikit-learn's implementation).

Classification, for N rows with true classes y, predicted classes ŷ = argmax of the scores, K classes:

    confusion matrix   C[i, j] = rows of true class i predicted as j (rows: truth, columns: prediction)
    accuracy           Σ_i C[i, i] / N
    precision_k        C[k, k] / Σ_i C[i, k]     (of the rows predicted k, the share that are k; 0 if none)
    recall_k           C[k, k] / Σ_j C[k, j]     (of the rows of class k, the share found; 0 if none)
    f1_k               2·p·r / (p + r)           (0 when p + r = 0)
    macro average      the plain mean over the K classes (every class counts alike, however rare)
    auc_roc            one-vs-rest: for each class k, the probability that a random row of class k gets a higher
                       p(k) than a random row of another class (ties count half), i.e. the area under its ROC
                       curve; then the macro average. Two classes: the AUC of class 1 (the same number). A class
                       with no row, or every row, in the split has no AUC and is left out of the average.

Regression, predictions p and targets t (N rows, M outputs; averaged over outputs):

    mse  mean (p − t)²      mae  mean |p − t|      r2  1 − Σ(p − t)² / Σ(t − mean t)²
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def log_softmax_rows(logits: np.ndarray) -> np.ndarray:
    """log p over the last axis (..., K), in float64: z − max − log Σ exp(z − max) (no exp overflows)."""
    z = np.asarray(logits, dtype=np.float64)
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> np.ndarray:
    """(K, K) int64 counts, rows the true class, columns the predicted one."""
    counts = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(counts, (np.asarray(y_true), np.asarray(y_pred)), 1)
    return counts


def _safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    return np.divide(numerator, denominator, out=np.zeros(len(numerator)), where=denominator > 0)


def precision_recall_f1(confusion: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-class precision, recall and F1 (0 where undefined, as scikit-learn's zero_division=0)."""
    hits = np.diag(confusion).astype(np.float64)
    precision = _safe_divide(hits, confusion.sum(axis=0).astype(np.float64))
    recall = _safe_divide(hits, confusion.sum(axis=1).astype(np.float64))
    f1 = _safe_divide(2 * precision * recall, precision + recall)
    return precision, recall, f1


def binary_auc(positive: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve: (rank sum of the positives − n₊(n₊ + 1)/2) / (n₊·n₋), ties given their mean
    rank (the Mann–Whitney U statistic). NaN when one side is empty."""
    positive = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    # Rank r (1-based) of each score, ties given the mean of the ranks they span: a run of c equal values that
    # starts after s smaller ones spans ranks s + 1 .. s + c, whose mean is s + (c + 1)/2.
    _, inverse, counts = np.unique(np.asarray(score), return_inverse=True, return_counts=True)
    smaller = np.cumsum(counts) - counts
    ranks = (smaller + (counts + 1) / 2.0)[inverse]
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def roc_auc_ovr(y_true: np.ndarray, probabilities: np.ndarray) -> float:
    """One-vs-rest macro AUC (see the module docstring); NaN when no class has one."""
    num_classes = probabilities.shape[1]
    if num_classes == 2:
        return binary_auc(y_true == 1, probabilities[:, 1])
    aucs = [binary_auc(y_true == k, probabilities[:, k]) for k in range(num_classes)]
    defined = [a for a in aucs if not math.isnan(a)]
    return float(np.mean(defined)) if defined else math.nan


def classification_metrics(y_true: np.ndarray, logits: np.ndarray, wanted: Sequence[str]) -> dict[str, Any]:
    """{"loss": mean cross-entropy, then each wanted metric}: accuracy, precision, recall, f1 (macro), auc_roc,
    and "confusion_matrix" (a list of rows) with "per_class" {precision, recall, f1, support} when asked."""
    y_true = np.asarray(y_true)
    log_p = log_softmax_rows(logits)
    num_classes = log_p.shape[1]
    predicted = np.argmax(log_p, axis=1)
    confusion = confusion_matrix(y_true, predicted, num_classes)
    precision, recall, f1 = precision_recall_f1(confusion)
    values: dict[str, Any] = {"loss": float(-log_p[np.arange(len(y_true)), y_true].mean())}
    scalars = {"accuracy": lambda: float(np.trace(confusion) / len(y_true)),
               "precision": lambda: float(precision.mean()), "recall": lambda: float(recall.mean()),
               "f1": lambda: float(f1.mean()), "auc_roc": lambda: roc_auc_ovr(y_true, np.exp(log_p))}
    for name in wanted:
        if name in scalars:
            values[name] = scalars[name]()
    if "confusion_matrix" in wanted:
        values["confusion_matrix"] = confusion.tolist()
        values["per_class"] = {"precision": precision.tolist(), "recall": recall.tolist(), "f1": f1.tolist(),
                               "support": confusion.sum(axis=1).tolist()}
    return values


def regression_metrics(target: np.ndarray, prediction: np.ndarray, wanted: Sequence[str]) -> dict[str, float]:
    """{"mse", "mae", "r2"} as wanted (each averaged over the outputs, as scikit-learn's default)."""
    t, p = np.asarray(target, dtype=np.float64), np.asarray(prediction, dtype=np.float64)
    t, p = t.reshape(len(t), -1), p.reshape(len(p), -1)
    error = p - t
    values = {}
    if "mse" in wanted:
        values["mse"] = float(np.mean(error**2))
    if "mae" in wanted:
        values["mae"] = float(np.mean(np.abs(error)))
    if "r2" in wanted:
        residual = (error**2).sum(axis=0)
        total = ((t - t.mean(axis=0)) ** 2).sum(axis=0)
        r2 = np.where(total > 0, 1 - residual / np.where(total > 0, total, 1), np.where(residual > 0, 0.0, 1.0))
        values["r2"] = float(r2.mean())
    return values
