"""TIES merging (Yadav et al. 2023, "TIES-Merging: Resolving Interference When Merging Models"): trim, elect sign,
disjoint merge.

For one tensor of the base θ_base and of n fine-tunes θ_i (all the same shape), with τ_i = θ_i − θ_base:

    1. trim         τ̂_i = τ_i where |τ_i| is among the top k = density · size of |τ_i|, else 0
    2. elect sign   γ = sgn(Σ_i w_i τ̂_i)           (per entry: the sign whose side carries more total magnitude)
    3. disjoint     A = {i : sgn(τ̂_i) = γ}          (per entry: the models that agree with the elected sign)
       mean         τ_m = Σ_{i∈A} w_i τ̂_i / Σ_{i∈A} w_i   (0 where A is empty)
    θ = θ_base + λ τ_m

The paper trims each whole task vector and uses w_i = 1; like mergekit, this trims per tensor (every tensor keeps
the same share, so no layer is emptied because another layer changed more) and lets each model carry a weight w_i
in the election and the mean (w_i = 1: the paper's equal-weight vote and plain mean of the agreeing values).
Trimming drops the small changes that are mostly noise; the election stops two models that pushed a weight in
opposite directions from cancelling into a value neither wanted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from minitrain.merging.linear import task_vectors


def trim(delta: np.ndarray, density: float) -> np.ndarray:
    """τ with all but its k = round(density · size) largest-magnitude entries set to 0 (ties broken by position:
    a stable sort, so the result never depends on anything but the values)."""
    k = round(density * delta.size)
    if k >= delta.size:
        return delta.copy()
    flat = delta.ravel()
    keep = np.argsort(-np.abs(flat), kind="stable")[:k]
    out = np.zeros_like(flat)
    out[keep] = flat[keep]
    return out.reshape(delta.shape)


def elect_and_mean(deltas: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """Steps 2 and 3 (module docstring): the disjoint weighted mean of the entries that agree with the elected
    sign; 0 where no model changed an entry, or where the weighted changes sum to exactly 0 (no sign elected)."""
    stacked = np.stack(deltas)  # (n, *shape)
    w = np.asarray(weights, dtype=np.float64).reshape(-1, *([1] * (stacked.ndim - 1)))
    sign = np.sign((w * stacked).sum(axis=0))
    agree = (np.sign(stacked) == sign) & (stacked != 0)
    weight_sum = (w * agree).sum(axis=0)
    total = (w * stacked * agree).sum(axis=0)
    return np.divide(total, weight_sum, out=np.zeros_like(total), where=weight_sum > 0)


def ties(base: np.ndarray, tensors: Sequence[np.ndarray], weights: Sequence[float], densities: Sequence[float],
         lam: float = 1.0) -> np.ndarray:
    """θ_base + λ · disjoint mean of the sign-agreeing trimmed task vectors (module docstring)."""
    trimmed = [trim(d, p) for d, p in zip(task_vectors(base, tensors), densities, strict=True)]
    return (base.astype(np.float64) + lam * elect_and_mean(trimmed, weights)).astype(base.dtype)
