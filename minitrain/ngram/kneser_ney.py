"""Interpolated modified Kneser–Ney smoothing (Chen & Goodman, 1998), for character n-grams.

For an n-gram model of order N, level j (contexts h of j-1 symbols) uses *adjusted counts* a(h w):

    a(g) = c(g)           if j = N, or if g starts with BOS (it has no left neighbour)
    a(g) = N1+(• g)       otherwise: the number of distinct symbols seen just before g

The lower levels thus learn "how many contexts does w continue?", not "how often is w seen?" — the Kneser–Ney
insight (a symbol frequent in one fixed context gets no credit as a generic continuation).

Each level subtracts a discount D(a) from every seen gram, with three discounts D1, D2, D3+ for a = 1, 2, ≥3, and
hands the freed mass to the level below:

    p_j(w | h) = max(a(h w) - D(a(h w)), 0) / Σ_v a(h v)  +  γ(h) · p_{j-1}(w | h')
    γ(h)       = (D1·N1(h) + D2·N2(h) + D3+·N3+(h)) / Σ_v a(h v)

where Nk(h) counts the symbols w with a(h w) = k (≥ 3 for N3+). Below level 1 sits the uniform distribution over
the V-2 predictable symbols, so every symbol keeps a non-zero probability. Because 0 ≤ D_k ≤ k, the discounted
mass plus γ(h) is exactly 1 at every level, and the whole distribution sums to 1.

Discounts. Chen & Goodman's closed-form estimates from the level's count-of-counts n_k (how many grams have
a = k): Y = n1 / (n1 + 2·n2), D_k = k - (k+1)·Y·n_{k+1}/n_k. A single `discount_scale` multiplies all of them (and
the result is clipped to [0, k]); it is the knob tuned on dev, 1.0 being the textbook estimate.
"""

from __future__ import annotations

import numpy as np

from minitrain.ngram.counts import NgramCounts
from minitrain.ngram.model import NgramLM, level_table


def estimate_discounts(adjusted: np.ndarray) -> np.ndarray:
    """Chen & Goodman's (D1, D2, D3+) from the count-of-counts of one level's adjusted counts.

    When a count-of-count is zero (tiny corpora) the estimate is undefined; Y = n1 / (n1 + 2·n2) is used instead.
    """
    n = [int(np.count_nonzero(adjusted == k)) for k in range(5)]  # n[k] for k = 1..4 (n[0] unused)
    y = n[1] / (n[1] + 2 * n[2]) if n[1] + n[2] else 0.5
    return np.array([k - (k + 1) * y * n[k + 1] / n[k] if n[k] else y for k in (1, 2, 3)])


def adjusted_counts(counts: NgramCounts, j: int, order: int) -> np.ndarray:
    """a(g) for the grams of length j in a model of `order` (see the module docstring)."""
    if j == order:
        return counts.raw[j]
    return np.where(counts.starts_with_bos(j), counts.raw[j], counts.continuation[j])


class KneserNeyLM(NgramLM):
    """Interpolated modified Kneser–Ney model of `order` ≥ 1 with discounts scaled by `discount_scale` ≥ 0."""

    def __init__(self, counts: NgramCounts, order: int, discount_scale: float = 1.0) -> None:
        super().__init__(counts, order)
        if discount_scale < 0:
            raise ValueError(f"discount_scale must be >= 0, got {discount_scale}")
        self.discount_scale = discount_scale
        self.discounts: list[np.ndarray] = []  # (D1, D2, D3+) actually used at each level 1..order
        for j in range(1, order + 1):
            a = adjusted_counts(counts, j, order)
            d = np.clip(discount_scale * estimate_discounts(a), 0.0, [1.0, 2.0, 3.0])
            self.discounts.append(d)
            # D1, D2 or D3+ by each gram's a = 1, 2, ≥3
            self.levels.append(level_table(counts.keys[j], a, d[np.minimum(a, 3) - 1], 0.0, self.vocab_size))

    def describe(self) -> dict:
        """The fitted hyper-parameters as JSON-friendly values."""
        return {
            "order": self.order,
            "discount_scale": self.discount_scale,
            "discounts": [[round(float(x), 6) for x in d] for d in self.discounts],
        }
