"""SparseGPT (minitrain/pruning/sparsegpt.py) against a plain NumPy reading of Frantar & Alistarh 2023's
Algorithm 1 written here, column by column with no blocking, and against magnitude pruning on the layer's output
error: the point of the method."""

from __future__ import annotations

import numpy as np
import pytest

from minitrain.pruning.masks import keep_mask
from minitrain.pruning.scores import magnitude_scores
from minitrain.pruning.sparsegpt import sparsegpt_prune


def algorithm_1(w_out_in: np.ndarray, x: np.ndarray, sparsity: float, mask_every: int, n_of_4: bool = False):
    """The paper's Algorithm 1 in its (out, in) layout, one column at a time: H = 2XXᵀ + λ·mean(diag)·I,
    U = Cholesky(H⁻¹)ᵀ; every `mask_every` columns the mask of the next `mask_every` (the lowest w²/U_cc² of
    those columns, all rows; 2:4: the 2 lowest of every 4 in each row); then each column's error
    (w − ŵ)/U_cc moves every later column at once: W[:, j:] −= err · U[j, j:]."""
    w = w_out_in.astype(np.float64).copy()
    rows, cols = w.shape
    h = 2 * x.T.astype(np.float64) @ x
    h += 0.01 * np.mean(np.diag(h)) * np.eye(cols)
    u = np.linalg.cholesky(np.linalg.inv(h)).T
    pruned = np.zeros_like(w, dtype=bool)
    done = 0  # weights pruned so far: each mask takes the share that keeps the layer's count exact
    for j in range(cols):
        if n_of_4 and j % 4 == 0:
            score = w[:, j:j + 4] ** 2 / np.diag(u)[j:j + 4] ** 2
            for r in range(rows):
                pruned[r, j + np.argsort(score[r], kind="stable")[:2]] = True
        elif not n_of_4 and j % mask_every == 0:
            end = min(j + mask_every, cols)
            k = round(sparsity * rows * end) - done
            score = (w[:, j:end] ** 2 / np.diag(u)[j:end] ** 2).ravel()
            block = np.zeros(score.size, dtype=bool)
            block[np.argsort(score, kind="stable")[:k]] = True
            pruned[:, j:end] = block.reshape(rows, end - j)
            done += k
        err = np.where(pruned[:, j], w[:, j], 0.0) / u[j, j]
        w[:, j:] -= np.outer(err, u[j, j:])
    w[pruned] = 0
    return w, ~pruned


def correlated_inputs(n_in: int, n: int = 400, seed: int = 0) -> np.ndarray:
    """(n, n_in) inputs with strongly correlated features (a random mixing of a few sources, plus noise)."""
    rng = np.random.default_rng(seed)
    sources = rng.standard_normal((n, max(2, n_in // 3)))
    return (sources @ rng.standard_normal((sources.shape[1], n_in)) + 0.1 * rng.standard_normal((n, n_in)))


@pytest.mark.parametrize("sparsity", [0.3, 0.5, 0.7])
def test_blocked_sparsegpt_is_algorithm_1_column_by_column(sparsity):
    rng = np.random.default_rng(1)
    n_in, n_out = 20, 7  # blocks of 8: two full ones and a short one; 7 · 8 · s is not whole
    w = rng.standard_normal((n_in, n_out))
    x = correlated_inputs(n_in)
    pruned, mask = sparsegpt_prune(w, x.T @ x, sparsity, block=8)
    reference, kept = algorithm_1(w.T, x, sparsity, mask_every=8)
    assert np.array_equal(mask, kept.T)
    np.testing.assert_allclose(pruned, reference.T, rtol=1e-9, atol=1e-12)
    assert int((pruned == 0).sum()) == round(sparsity * w.size)
    assert not np.allclose(pruned[mask], w[mask])  # the kept weights were moved


def test_sparsegpt_two_four_is_algorithm_1s_n_m_rule():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((16, 5))
    x = correlated_inputs(16, seed=3)
    pruned, mask = sparsegpt_prune(w, x.T @ x, 0.5, "2:4", block=8)
    reference, kept = algorithm_1(w.T, x, 0.5, mask_every=8, n_of_4=True)
    assert np.array_equal(mask, kept.T) and (mask.reshape(4, 4, 5).sum(axis=1) == 2).all()
    np.testing.assert_allclose(pruned, reference.T, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("sparsity", [0.3, 0.5, 0.7])
def test_sparsegpt_changes_the_layer_output_less_than_magnitude_pruning(sparsity):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((24, 10)).astype(np.float32)
    x = correlated_inputs(24, seed=5)
    sparse, _ = sparsegpt_prune(w, x.T @ x, sparsity)
    magnitude = np.where(keep_mask(magnitude_scores(w), sparsity), w, 0)
    error = lambda pruned: np.linalg.norm(x @ w - x @ pruned)  # noqa: E731  ‖WX − ŴX‖ over the inputs
    assert sparse.dtype == np.float32 and int((sparse == 0).sum()) == int((magnitude == 0).sum())
    assert error(sparse) < error(magnitude)
