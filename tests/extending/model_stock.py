"""Model Stock (Jang et al. 2024, "Model Stock: All we need is just a few fine-tuned models"), as mergekit merges it.

With N ≥ 2 fine-tunes θ_1..θ_N of one base θ_0 and their task vectors τ_i = θ_i − θ_0, each tensor is

    cos θ = the mean cosine of the pairs (τ_i, τ_j), i < j, each flattened (0 where a τ is zero)
    t     = N · cos θ / (1 + (N − 1) · cos θ)
    θ     = t · mean(θ_1..θ_N) + (1 − t) · θ_0

Fine-tunes that agree (cos θ → 1) are averaged (t → 1); ones at right angles fall back to the base (t → 0). It
reads no parameters. Save as minitrain/merging/model_stock.py and add to MERGE_METHODS in
minitrain/merging/methods.py the line
    MergeMethod("model_stock", model_stock, frozenset(), models=(2, None)),
with `from minitrain.merging.model_stock import model_stock` above it.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np


def model_stock_merge(base: np.ndarray, tensors: Sequence[np.ndarray]) -> np.ndarray:
    """θ of the module docstring: base (any shape), tensors N ≥ 2 of its shape -> float32 of its shape."""
    taus = [(np.asarray(t, np.float64) - base).ravel() for t in tensors]
    norms = [np.linalg.norm(tau) for tau in taus]
    cosines = [a @ b / (na * nb) if na and nb else 0.0
               for (a, na), (b, nb) in combinations(zip(taus, norms, strict=True), 2)]
    cos, n = float(np.mean(cosines)), len(tensors)
    t = n * cos / (1 + (n - 1) * cos)
    merged = t * np.mean([np.asarray(x, np.float64) for x in tensors], axis=0) + (1 - t) * base
    return merged.astype(np.float32)


def model_stock(spec: Any, name: str, base: np.ndarray, tensors: Sequence[np.ndarray], entries: Any) -> np.ndarray:
    """The merge method's one-tensor call (minitrain/merging/methods.py): Model Stock reads no parameters."""
    return model_stock_merge(base, tensors)
