"""Ranking metrics (minitrain/evaluation/ranking.py) against scikit-learn's ndcg_score and cases worked by hand:
ties, k beyond the list, a query with no relevant item."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from minitrain.evaluation.ranking import mean_reciprocal_rank, ndcg_at_k, recall_at_k


@pytest.mark.parametrize("k", [None, 1, 3, 5, 12])
def test_ndcg_matches_scikit_learn_with_graded_relevance_and_ties(k):
    rng = np.random.default_rng(0)
    relevance = rng.integers(0, 4, size=(20, 7)).astype(float)
    scores = rng.integers(0, 4, size=(20, 7)).astype(float)  # few distinct scores: many ties
    relevance[3] = 0  # a query with nothing relevant
    assert ndcg_at_k(relevance, scores, k) == pytest.approx(ndcg_score(relevance, scores, k=k), rel=1e-12)


def test_hand_computed_ranking():
    # One query, 4 candidates ranked b > d > a > c; relevant: a (rel 1) and d (rel 2).
    relevance = np.array([[1.0, 0.0, 0.0, 2.0]])
    scores = np.array([[0.5, 0.9, 0.1, 0.7]])
    assert mean_reciprocal_rank(relevance, scores) == pytest.approx(1 / 2)  # d at position 2
    assert recall_at_k(relevance, scores, 1) == 0.0
    assert recall_at_k(relevance, scores, 2) == pytest.approx(1 / 2)
    assert recall_at_k(relevance, scores, 10) == 1.0  # k beyond the list: all of it
    dcg, ideal = 2 / np.log2(3) + 1 / np.log2(4), 2 / 1 + 1 / np.log2(3)
    assert ndcg_at_k(relevance, scores, 3) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(relevance, scores, 10) == pytest.approx(ndcg_at_k(relevance, scores, None))


def test_ties_are_averaged_over_orders():
    # Three candidates tied at the top, one of them relevant: over the 3 orders it sits at 1, 2 or 3.
    relevance = np.array([[0.0, 1.0, 0.0, 0.0]])
    scores = np.array([[0.5, 0.5, 0.5, 0.1]])
    assert mean_reciprocal_rank(relevance, scores) == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert recall_at_k(relevance, scores, 1) == pytest.approx(1 / 3)
    assert recall_at_k(relevance, scores, 2) == pytest.approx(2 / 3)
    # Two of three tied items relevant: the first relevant is at 1 (prob 2/3) or 2 (prob 1/3).
    relevance = np.array([[1.0, 1.0, 0.0]])
    assert mean_reciprocal_rank(relevance, np.zeros((1, 3))) == pytest.approx(2 / 3 + 1 / 3 / 2)


def test_a_query_with_no_relevant_item_scores_zero_in_the_mean():
    relevance = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    scores = np.array([[0.9, 0.5, 0.1], [0.9, 0.5, 0.1]])
    assert mean_reciprocal_rank(relevance, scores) == pytest.approx(0.5)
    assert recall_at_k(relevance, scores, 1) == pytest.approx(0.5)
    assert ndcg_at_k(relevance, scores, 2) == pytest.approx(0.5)


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="one \\(Q, C\\) shape"):
        recall_at_k(np.ones((2, 3)), np.ones((2, 4)), 1)
    with pytest.raises(ValueError, match="k must be"):
        ndcg_at_k(np.ones((1, 3)), np.ones((1, 3)), 0)
    with pytest.raises(ValueError, match=">= 0"):
        mean_reciprocal_rank(-np.ones((1, 3)), np.ones((1, 3)))
