"""Add-k (Lidstone) smoothing: the simple reference model the Kneser–Ney baseline should clearly beat.

For a context h of the model's order (or, for a prefix too short for that, the whole prefix from BOS), with raw
counts c and the V' = V-2 predictable symbols,

    p(w | h) = (c(h w) + k) / (Σ_v c(h v) + k·V')

which is the same shape as every model here: own mass c(h w) / (c(h) + k·V') plus a back-off weight
k·V' / (c(h) + k·V') times the uniform distribution. An unseen context gets exactly the uniform distribution.
Unlike Kneser–Ney it never consults shorter contexts, so a long order quickly drowns in unseen contexts.
"""

from __future__ import annotations

import numpy as np

from minitrain.ngram.counts import NgramCounts
from minitrain.ngram.model import LevelTable, NgramLM, apply_level, level_table


class AddKLM(NgramLM):
    """Add-k model of `order` ≥ 1 with pseudo-count `k` > 0."""

    def __init__(self, counts: NgramCounts, order: int, k: float) -> None:
        super().__init__(counts, order)
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        self.k = k
        pseudo = k * np.count_nonzero(self.uniform)
        for j in range(1, order + 1):
            self.levels.append(level_table(counts.keys[j], counts.raw[j], 0.0, pseudo, self.vocab_size))

    def combine(self, p: np.ndarray, table: LevelTable, rows: np.ndarray, ctx: np.ndarray,
                complete: np.ndarray) -> np.ndarray:
        # The longest complete context decides alone: seen -> add-k estimate, unseen -> uniform.
        own = apply_level(np.tile(self.uniform, (p.shape[0], 1)), table, rows, ctx)
        return np.where(complete[:, None], own, p)

    def describe(self) -> dict:
        """The fitted hyper-parameters as JSON-friendly values."""
        return {"order": self.order, "k": self.k}
