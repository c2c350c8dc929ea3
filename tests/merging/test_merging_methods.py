"""Each merge method against a direct NumPy reading of its paper's definition, entry by entry where the paper
defines it that way: linear / task arithmetic (Ilharco et al. 2023), TIES (Yadav et al. 2023), DARE (Yu et al.
2023), SLERP (Shoemake 1985, with mergekit's near-parallel fallback)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from minitrain.merging.dare import dare_deltas, dare_linear, dare_ties, drop_and_rescale, mask_rng
from minitrain.merging.linear import linear, task_arithmetic
from minitrain.merging.slerp import slerp
from minitrain.merging.ties import elect_and_mean, ties, trim

F32 = {"rtol": 1e-6, "atol": 1e-7}  # float32 rounding of values of order 1


def models(n: int, shape=(6, 5), seed: int = 0, scale: float = 0.3):
    """A base and n fine-tunes of it (base + a random task vector each), float32."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=shape).astype(np.float32)
    return base, [(base + scale * rng.normal(size=shape)).astype(np.float32) for _ in range(n)]


def test_linear_is_the_weighted_average_and_task_arithmetic_adds_scaled_task_vectors():
    base, (a, b, c) = models(3)
    w = [0.5, 1.5, 2.0]
    expected = (0.5 * a.astype(np.float64) + 1.5 * b + 2.0 * c) / 4.0
    np.testing.assert_allclose(linear([a, b, c], w), expected, **F32)
    np.testing.assert_allclose(linear([a, b, c], w, normalize=False), 4.0 * expected, **F32)
    lam = 0.7
    expected = base + lam * (0.5 * (a - base) + 1.5 * (b - base) + 2.0 * (c - base))
    np.testing.assert_allclose(task_arithmetic(base, [a, b, c], w, lam), expected, **F32)
    # w_i = 1/n, λ = 1: the plain average of the fine-tunes
    np.testing.assert_allclose(task_arithmetic(base, [a, b, c], [1 / 3] * 3), (a + b + c) / 3, **F32)
    assert linear([a, b], [1, 1]).dtype == np.float32


def reference_trim(tau: np.ndarray, density: float) -> np.ndarray:
    """Keep |τ| ≥ the k-th largest magnitude (values are distinct, so that is exactly k entries)."""
    k = round(density * tau.size)
    if k == 0:
        return np.zeros_like(tau)
    threshold = np.sort(np.abs(tau).ravel())[::-1][k - 1]
    return np.where(np.abs(tau) >= threshold, tau, 0.0)


def reference_ties(base, tensors, weights, densities, lam):
    """Yadav et al. Algorithm 1, one entry p at a time, with each model's weight in the vote and the mean."""
    taus = [reference_trim(t.astype(np.float64) - base, d) for t, d in zip(tensors, densities, strict=True)]
    merged = np.zeros(base.shape)
    for p in np.ndindex(base.shape):
        values = [tau[p] for tau in taus]
        gamma = np.sign(sum(w * v for w, v in zip(weights, values, strict=True)))
        agree = [(w, v) for w, v in zip(weights, values, strict=True) if v != 0 and np.sign(v) == gamma]
        if agree:
            merged[p] = sum(w * v for w, v in agree) / sum(w for w, _ in agree)
    return base + lam * merged


@pytest.mark.parametrize("density", [1.0, 0.5, 0.2])
def test_ties_trims_elects_the_sign_and_takes_the_disjoint_mean(density):
    base, tensors = models(3, seed=1)
    weights = [1.0, 0.5, 2.0]
    got = ties(base, tensors, weights, [density] * 3, lam=1.3)
    np.testing.assert_allclose(got, reference_ties(base, tensors, weights, [density] * 3, 1.3), **F32)
    assert got.dtype == np.float32


def test_trim_keeps_exactly_k_entries_and_the_vote_follows_the_larger_side():
    tau = np.random.default_rng(2).normal(size=(7, 9))
    for density in (0.1, 0.33, 0.9):
        kept = trim(tau, density)
        assert np.count_nonzero(kept) == round(density * tau.size)
        assert np.abs(kept[kept != 0]).min() > np.abs(tau[kept == 0]).max()
    # one entry: +0.1 and +0.2 against −0.25 → the positive side (0.3) wins; the mean of the agreeing two
    merged = elect_and_mean([np.array([0.1]), np.array([0.2]), np.array([-0.25])], [1, 1, 1])
    assert merged[0] == pytest.approx(0.15)
    # no model changed it, or the votes cancel exactly: 0
    assert elect_and_mean([np.array([0.0]), np.array([0.0])], [1, 1])[0] == 0.0
    assert elect_and_mean([np.array([0.5]), np.array([-0.5])], [1, 1])[0] == 0.0


def test_dare_drops_with_probability_p_and_rescales_by_one_over_one_minus_p():
    tau = np.random.default_rng(3).normal(size=(200, 100))
    p = 0.7
    got = drop_and_rescale(tau, 1 - p, mask_rng(5, 0, "w"))
    # the paper's definition with the same Bernoulli draws: m ~ Bernoulli(p), τ̃ = (1 − m) ⊙ τ / (1 − p)
    m = (mask_rng(5, 0, "w").random(tau.shape) >= 1 - p).astype(np.float64)
    np.testing.assert_allclose(got, (1 - m) * tau / (1 - p), rtol=1e-12)
    dropped = (got == 0).mean()
    assert abs(dropped - p) < 0.01  # 20,000 draws: 4.5 standard deviations
    assert abs(got.sum() - tau.sum()) < 0.05 * np.abs(tau).sum()  # E[τ̃] = τ


def test_dare_is_reproducible_from_its_seed_and_the_seed_matters():
    base, tensors = models(2, shape=(16, 16), seed=4)
    one = dare_linear(base, tensors, [1, 1], [0.3, 0.3], seed=11, name="h.0.mlp.c_fc.weight")
    assert np.array_equal(one, dare_linear(base, tensors, [1, 1], [0.3, 0.3], seed=11, name="h.0.mlp.c_fc.weight"))
    assert not np.array_equal(one, dare_linear(base, tensors, [1, 1], [0.3, 0.3], seed=12,
                                               name="h.0.mlp.c_fc.weight"))
    assert not np.array_equal(one, dare_linear(base, tensors, [1, 1], [0.3, 0.3], seed=11, name="other"))


def test_each_model_has_its_own_mask_seeded_as_docs_merging_md_says():
    """docs/merging.md: "the mask of model i for tensor NAME is drawn from a generator seeded by (seed, i,
    crc32(NAME))" — written out here with NumPy and zlib, not with dare.py's mask_rng."""
    base, tensors = models(3, shape=(20, 20), seed=8)
    seed, name, density = 9, "model.layers.0.mlp.up_proj.weight", 0.5
    got = dare_deltas(base, tensors, [density] * 3, seed, name)
    kept = [g != 0 for g in got]  # every task vector entry is non-zero: a zero is a drop
    for i, (t, keep) in enumerate(zip(tensors, kept, strict=True)):
        draws = np.random.default_rng([seed, i, zlib.crc32(name.encode("utf-8"))]).random(base.shape)
        assert np.array_equal(keep, draws < density)
        np.testing.assert_allclose(got[i][keep], ((t.astype(np.float64) - base) / density)[keep], rtol=1e-12)
    assert not np.array_equal(kept[0], kept[1]) and not np.array_equal(kept[1], kept[2])
    assert 0.3 < (kept[0] == kept[1]).mean() < 0.7  # independent draws agree on about half the entries


def test_dare_linear_and_dare_ties_merge_the_dropped_task_vectors():
    base, tensors = models(3, seed=5)
    weights, densities, seed, name = [1.0, 0.8, 1.2], [0.5, 0.6, 0.4], 3, "t"
    rescaled = []
    for i, (t, d) in enumerate(zip(tensors, densities, strict=True)):
        keep = mask_rng(seed, i, name).random(base.shape) < d
        rescaled.append(np.where(keep, (t.astype(np.float64) - base) / d, 0.0))
    expected = base + 0.9 * sum(w * r for w, r in zip(weights, rescaled, strict=True))
    np.testing.assert_allclose(dare_linear(base, tensors, weights, densities, seed, name, lam=0.9), expected, **F32)
    # dare_ties: TIES's vote and disjoint mean on the same rescaled vectors (no magnitude trim: density 1)
    expected = reference_ties(base, [(base + r).astype(np.float64) for r in rescaled], weights, [1.0] * 3, 0.9)
    np.testing.assert_allclose(dare_ties(base, tensors, weights, densities, seed, name, lam=0.9), expected,
                               rtol=1e-5, atol=1e-6)


def test_slerp_follows_the_great_circle_and_falls_back_to_lerp_when_parallel():
    rng = np.random.default_rng(6)
    v0, v1 = rng.normal(size=(4, 8)).astype(np.float32), rng.normal(size=(4, 8)).astype(np.float32)
    a, b = v0.ravel().astype(np.float64), v1.ravel().astype(np.float64)
    omega = np.arccos(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    for t in (0.0, 0.25, 0.5, 1.0):
        expected = (np.sin((1 - t) * omega) * a + np.sin(t * omega) * b) / np.sin(omega)
        np.testing.assert_allclose(slerp(t, v0, v1).ravel(), expected, **F32)
    np.testing.assert_allclose(slerp(0.0, v0, v1), v0, **F32)
    np.testing.assert_allclose(slerp(1.0, v0, v1), v1, **F32)
    # unit endpoints stay on the unit sphere, at angle tΩ from v0 (a lerp would shrink the norm midway)
    u0, u1 = a / np.linalg.norm(a), b / np.linalg.norm(b)
    mid = slerp(0.3, u0, u1)
    assert np.linalg.norm(mid) == pytest.approx(1.0)
    assert np.arccos(mid @ u0) == pytest.approx(0.3 * omega)
    # near-parallel (cos Ω > 0.9995) and zero vectors: (1 − t)·v0 + t·v1
    close = v0 * 1.5 + 1e-4 * v1
    np.testing.assert_allclose(slerp(0.4, v0, close), 0.6 * v0 + 0.4 * close, **F32)
    zero = np.zeros_like(v0)
    np.testing.assert_allclose(slerp(0.4, zero, v1), 0.4 * v1, **F32)


def test_slerp_of_antiparallel_tensors_is_the_linear_path_not_an_arc():
    """cos Ω = −1 (or within 0.0005 of it): sin Ω ≈ 0, no single great circle joins v and −v, and mergekit takes
    (1 − t)·v0 + t·v1; the arc formula would divide rounding noise by sin π ≈ 1e-16."""
    rng = np.random.default_rng(10)
    v0 = rng.normal(size=(4, 8))
    for v1 in (-v0, -2.0 * v0, -v0 + 1e-3 * rng.normal(size=v0.shape)):
        for t in (0.3, 0.5, 0.8):
            got = slerp(t, v0, v1)
            assert np.isfinite(got).all()
            np.testing.assert_allclose(got, (1 - t) * v0 + t * v1, rtol=1e-12, atol=1e-12)
