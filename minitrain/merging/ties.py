"""TIES merging (Yadav et al. 2023, "TIES-Merging: Resolving Interference When Merging Models"): trim, elect sign,
disjoint merge.

For one tensor of the base θ_base and of n fine-tunes θ_i (all the same shape), with τ_i = θ_i − θ_base:

    1. trim         τ̂_i = τ_i where |τ_i| is among the top k = round(density · size) of |τ_i|, else 0
    2. elect sign   γ = sgn(Σ_i w_i τ̂_i)           (per entry: the sign whose side carries more total magnitude)
    3. disjoint     A = {i : sgn(τ̂_i) = γ}          (per entry: the models that agree with the elected sign)
       mean         τ_m = Σ_{i∈A} w_i τ̂_i / Σ_{i∈A} w_i   (0 where A is empty)
    θ = θ_base + λ τ_m

The paper trims each whole task vector and uses w_i = 1; like mergekit, this trims per tensor (every tensor keeps
the same share, so no layer is emptied because another layer changed more) and lets each model carry a weight w_i
in the election and the mean (w_i = 1: the paper's equal-weight vote and plain mean of the agreeing values).
Trimming drops the small changes that are mostly noise; the election stops two models that pushed a weight in
opposite directions from cancelling into a value neither wanted.

`task_vectors` (linear.py, imported here) gives every model's τ_i = θ_i − θ_base in float64, as `ties` takes them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from minitrain.merging.linear import task_vectors


def trim(delta: np.ndarray, density: float) -> np.ndarray:
    """τ (any shape) with all but its k = round(density · τ.size) largest |τ| set to 0, over the whole tensor;
    same shape and dtype. Exactly k entries are kept: among equal magnitudes the earlier ones in τ.ravel() win
    (the first k of a stable sort of −|τ|), so the result depends on nothing but the values."""
    k = round(density * delta.size)
    if k >= delta.size:
        return delta.copy()
    flat = delta.ravel()
    keep = np.argsort(-np.abs(flat), kind="stable")[:k]
    out = np.zeros_like(flat)
    out[keep] = flat[keep]
    return out.reshape(delta.shape)


def elect_and_mean(deltas: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """Steps 2 and 3 (module docstring) on n arrays of one shape and n weights, in float64: per entry, the sign
    of Σ_i w_i τ_i (total mass, not a count of signs) is elected, and the mean of the w_i-weighted τ_i over the
    models whose τ_i is non-zero and of that sign is returned; 0 where no model changed the entry, or where the
    weighted changes sum to exactly 0 (no sign elected)."""
    stacked = np.stack(deltas)  # (n, *shape)
    w = np.asarray(weights, dtype=np.float64).reshape(-1, *([1] * (stacked.ndim - 1)))
    sign = np.sign((w * stacked).sum(axis=0))
    agree = (np.sign(stacked) == sign) & (stacked != 0)
    weight_sum = (w * agree).sum(axis=0)
    total = (w * stacked * agree).sum(axis=0)
    return np.divide(total, weight_sum, out=np.zeros_like(total), where=weight_sum > 0)


def ties(base: np.ndarray, tensors: Sequence[np.ndarray], weights: Sequence[float], densities: Sequence[float],
         lam: float = 1.0) -> np.ndarray:
    """θ_base + λ · elect_and_mean of the trimmed task vectors trim(θ_i − θ_base, densities[i]) (module
    docstring; τ_i in float64), in the base's dtype."""
    trimmed = [trim(d, p) for d, p in zip(task_vectors(base, tensors), densities, strict=True)]
    return (base.astype(np.float64) + lam * elect_and_mean(trimmed, weights)).astype(base.dtype)
