"""The fused AdamW kernel agrees with its NumPy reference, and both agree with the formula in float64."""

import numpy as np
import pytest

from minitrain.autograd.kernels.adamw_update import adamw_update_numba, adamw_update_reference

# Both work in float32 with the same operation order; allow float32 rounding differences only.
RTOL, ATOL = 1e-6, 1e-7


def _state(n, seed):
    rng = np.random.default_rng(seed)
    param = rng.standard_normal(n).astype(np.float32)
    exp_avg = (0.1 * rng.standard_normal(n)).astype(np.float32)
    exp_avg_sq = (0.01 * rng.random(n)).astype(np.float32)
    return param, exp_avg, exp_avg_sq


@pytest.mark.parametrize("decoupled", [True, False])
def test_kernel_matches_reference_over_several_steps(decoupled):
    n = 1037  # not a multiple of any vector width
    rng = np.random.default_rng(1)
    a = _state(n, seed=0)
    b = tuple(x.copy() for x in a)
    hyper = dict(lr=3e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, decoupled=decoupled)
    for step in range(1, 6):
        grad = rng.standard_normal(n).astype(np.float32)
        grad_before = grad.copy()
        adamw_update_numba(a[0], grad, a[1], a[2], step=step, **hyper)
        adamw_update_reference(b[0], grad, b[1], b[2], step=step, **hyper)
        np.testing.assert_array_equal(grad, grad_before)  # the gradient is read, never written
        for x, y in zip(a, b, strict=True):
            assert x.dtype == np.float32
            np.testing.assert_allclose(x, y, rtol=RTOL, atol=ATOL)
    assert not np.array_equal(a[0], _state(n, seed=0)[0])  # the parameters really moved


@pytest.mark.parametrize("update", [adamw_update_reference, adamw_update_numba])
def test_both_match_the_formula_in_float64(update):
    p64, m64, v64 = (x.astype(np.float64) for x in _state(7, seed=2))
    p, m, v = _state(7, seed=2)
    g = np.linspace(-1.0, 1.0, 7).astype(np.float32)
    lr, b1, b2, eps, wd, t = 1e-2, 0.9, 0.999, 1e-8, 0.1, 3
    update(p, g, m, v, lr, b1, b2, eps, wd, t)
    g64 = g.astype(np.float64)
    p64 = p64 * (1 - lr * wd)
    m64 = b1 * m64 + (1 - b1) * g64
    v64 = b2 * v64 + (1 - b2) * g64**2
    p64 = p64 - lr * (m64 / (1 - b1**t)) / (np.sqrt(v64 / (1 - b2**t)) + eps)
    np.testing.assert_allclose(m, m64, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(v, v64, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(p, p64, rtol=1e-5, atol=1e-7)
