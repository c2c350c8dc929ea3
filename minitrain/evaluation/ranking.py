"""Ranking metrics for Q queries, each scoring the same C candidates: `relevance` (Q, C) ≥ 0 (graded or 0/1; an
item is relevant when > 0) and `scores` (Q, C), higher ranked first. Each is a mean over queries; a query with no
relevant item scores 0 in all three (scikit-learn's ndcg_score does the same).

    recall@k   (relevant items in the top k) / (relevant items)
    NDCG@k     DCG@k / IDCG@k,  DCG@k = Σ_{position i < k} rel_i / log2(i + 2)  (linear gains, as ndcg_score),
               IDCG@k the DCG@k of the best order
    MRR        1 / (position of the first relevant item, from 1)

Ties are averaged over every order of the tied items, as scikit-learn's ndcg_score (McSherry & Najork 2008): in
recall and NDCG, items with equal scores share the mean discount of the positions they occupy together; MRR is
the expected reciprocal rank when a tied block holding r of its g items relevant is shuffled, the first relevant
one landing j places into the block with probability C(g−1−j, r−1) / C(g, r). A k beyond C means all C.
"""

from __future__ import annotations

from math import comb

import numpy as np


def _queries(relevance: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    relevance, scores = np.atleast_2d(np.asarray(relevance, np.float64)), np.atleast_2d(np.asarray(scores))
    if relevance.shape != scores.shape or relevance.ndim != 2:
        raise ValueError(f"ranking: relevance {relevance.shape} and scores {scores.shape} must be one (Q, C) shape")
    if (relevance < 0).any():
        raise ValueError("ranking: relevance must be >= 0")
    return relevance, scores


def _tied_blocks(scores: np.ndarray, gains: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One query's ranking as blocks of equal scores: (each block's start position, its items' gains in rank
    order); blocks run from one start to the next."""
    order = np.argsort(-scores, kind="stable")
    ranked = scores[order]
    return np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]]), gains[order]


def _discounted(scores: np.ndarray, gains: np.ndarray, discounts: np.ndarray) -> float:
    """Σ gain·discount over the ranking, each tied block's items at their block's mean discount."""
    starts, ranked = _tied_blocks(scores, gains)
    sizes = np.diff(np.r_[starts, len(scores)])
    return float(np.sum(np.add.reduceat(ranked, starts) * np.add.reduceat(discounts, starts) / sizes))


def _cut(discounts: np.ndarray, k: int | None) -> np.ndarray:
    if k is not None and k < 1:
        raise ValueError(f"ranking: k must be >= 1, got {k}")
    return np.where(np.arange(len(discounts)) < (len(discounts) if k is None else k), discounts, 0.0)


def recall_at_k(relevance: np.ndarray, scores: np.ndarray, k: int) -> float:
    """The mean share of each query's relevant items ranked in its top k."""
    relevance, scores = _queries(relevance, scores)
    top = _cut(np.ones(relevance.shape[1]), k)
    found = [_discounted(s, (r > 0).astype(np.float64), top) / max(np.count_nonzero(r), 1)
             for r, s in zip(relevance, scores, strict=True)]
    return float(np.mean(found))


def ndcg_at_k(relevance: np.ndarray, scores: np.ndarray, k: int | None = None) -> float:
    """sklearn.metrics.ndcg_score(relevance, scores, k=k): the mean NDCG@k (k None: the whole list)."""
    relevance, scores = _queries(relevance, scores)
    discounts = _cut(1.0 / np.log2(np.arange(relevance.shape[1]) + 2.0), k)
    values = []
    for r, s in zip(relevance, scores, strict=True):
        ideal = float(np.sum(np.sort(r)[::-1] * discounts))
        values.append(_discounted(s, r, discounts) / ideal if ideal > 0 else 0.0)
    return float(np.mean(values))


def mean_reciprocal_rank(relevance: np.ndarray, scores: np.ndarray) -> float:
    """The mean over queries of 1 / (the first relevant item's position), ties averaged (module docstring)."""
    relevance, scores = _queries(relevance, scores)
    values = []
    for r, s in zip(relevance, scores, strict=True):
        starts, relevant = _tied_blocks(s, (r > 0).astype(np.int64))
        value = 0.0
        for start, stop in zip(starts, np.r_[starts[1:], len(s)], strict=True):
            g, hits = int(stop - start), int(relevant[start:stop].sum())
            if hits:
                value = sum(comb(g - 1 - j, hits - 1) / (start + 1 + j) for j in range(g - hits + 1)) / comb(g, hits)
                break
        values.append(value)
    return float(np.mean(values))
