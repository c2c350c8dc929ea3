"""Linear merging and task arithmetic: the two merges every other method refines.

Shapes: each tensor is one parameter of every model, all of the same shape; the weights w_i are floats.

    linear            θ = Σ_i w_i θ_i / Σ_i w_i                       (a weighted average; "model soup")
    task arithmetic   θ = θ_base + λ Σ_i w_i τ_i,  τ_i = θ_i − θ_base  (Ilharco et al. 2023, "Editing models
                                                                        with task arithmetic")

τ_i, a model's *task vector*, is what fine-tuning changed. With w_i = 1/n and λ = 1, task arithmetic is the
linear average of the fine-tunes; with w_i = 1 and λ = 1 it adds every change in full, which is what keeps two
skills learned in different weights, and what makes two changes of the same weight interfere (TIES, DARE).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def linear(tensors: Sequence[np.ndarray], weights: Sequence[float], normalize: bool = True) -> np.ndarray:
    """Σ_i w_i θ_i, divided by Σ_i w_i when `normalize` (mergekit's default for `linear`). Summed in float64."""
    total = sum(w * t.astype(np.float64) for w, t in zip(weights, tensors, strict=True))
    if normalize:
        total = total / sum(weights)
    return total.astype(tensors[0].dtype)


def task_vectors(base: np.ndarray, tensors: Sequence[np.ndarray]) -> list[np.ndarray]:
    """τ_i = θ_i − θ_base for each model, in float64 (the differences are small; float64 keeps their digits)."""
    base64 = base.astype(np.float64)
    return [t.astype(np.float64) - base64 for t in tensors]


def task_arithmetic(base: np.ndarray, tensors: Sequence[np.ndarray], weights: Sequence[float],
                    lam: float = 1.0, normalize: bool = False) -> np.ndarray:
    """θ_base + λ Σ_i w_i τ_i (divided by Σ_i w_i when `normalize`)."""
    return combine(base, task_vectors(base, tensors), weights, lam, normalize)


def combine(base: np.ndarray, deltas: Sequence[np.ndarray], weights: Sequence[float], lam: float,
            normalize: bool) -> np.ndarray:
    """θ_base + λ Σ_i w_i δ_i (/ Σ_i w_i): task arithmetic on any changed task vectors δ_i (DARE's, for one)."""
    total = sum(w * d for w, d in zip(weights, deltas, strict=True))
    if normalize:
        total = total / sum(weights)
    return (base.astype(np.float64) + lam * total).astype(base.dtype)
