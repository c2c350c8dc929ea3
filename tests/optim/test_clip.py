"""Global-norm clipping with PyTorch's rule, value clipping, and the flat-buffer path."""

import math

import numpy as np
import pytest

from minitrain.autograd.parameters import ParameterBuffer
from minitrain.optim.clip import clip_grad_norm_, clip_grad_value_, global_grad_norm


class Param:
    def __init__(self, data, grad):
        self.data, self.grad = data, grad


def _grads():
    # Norm of all of them: sqrt(3² + 4² + 12²) = 13.
    return {"w": np.array([[3.0, 0.0], [0.0, 4.0]], np.float32), "b": np.array([12.0, 0.0], np.float32)}


def _params():
    return [(name, Param(np.zeros_like(g), g.copy())) for name, g in _grads().items()]


def test_global_norm_by_hand_and_in_float64():
    assert global_grad_norm(_grads().values()) == 13.0
    # 10⁶ copies of 1e-3 + one 1.0: float32 accumulation would drift, float64 gets sqrt(1 + 1) to 1e-12.
    g = np.full(10**6, 1e-3, np.float32)
    exact = math.sqrt(10**6 * float(np.float32(1e-3)) ** 2 + 1.0)
    assert global_grad_norm([g, np.ones(1, np.float32)]) == pytest.approx(exact, rel=1e-12)


def test_clip_scales_by_max_norm_over_norm_plus_eps():
    params = _params()
    norm = clip_grad_norm_(params, max_norm=1.0)
    assert norm == 13.0  # the norm before clipping
    coef = 1.0 / (13.0 + 1e-6)
    for name, p in params:
        np.testing.assert_allclose(p.grad, _grads()[name] * coef, rtol=1e-6)
    assert global_grad_norm(p.grad for _, p in params) == pytest.approx(1.0, rel=1e-6)


def test_no_clip_when_norm_is_small_enough():
    # The 1e-6 in the denominator shows on tiny gradients: norm 1e-6 with max_norm 1e-6 gives coef ≈ ½.
    tiny = [Param(np.zeros(2, np.float32), np.array([6e-7, 8e-7], np.float32))]
    norm = clip_grad_norm_(tiny, max_norm=1e-6)
    assert norm == pytest.approx(1e-6, rel=1e-6)
    np.testing.assert_allclose(tiny[0].grad, np.array([6e-7, 8e-7]) * (1e-6 / (norm + 1e-6)), rtol=1e-6)
    np.testing.assert_allclose(tiny[0].grad, [3e-7, 4e-7], rtol=1e-5)
    params = _params()
    assert clip_grad_norm_([p for _, p in params], max_norm=20.0) == 13.0  # bare tensors work too
    for name, p in params:
        np.testing.assert_array_equal(p.grad, _grads()[name])


def test_parameters_without_grad_are_skipped_and_nan_is_left_alone():
    params = [*_params(), ("unused", Param(np.zeros(3, np.float32), None))]
    assert clip_grad_norm_(params, max_norm=1.0) == 13.0
    bad = [("w", Param(np.zeros(2, np.float32), np.array([np.nan, 1.0], np.float32)))]
    assert math.isnan(clip_grad_norm_(bad, max_norm=1.0))
    assert bad[0][1].grad[1] == 1.0


def test_flat_buffer_path_equals_per_parameter_path():
    rng = np.random.default_rng(0)
    arrays = [("w", rng.standard_normal((5, 4))), ("b", rng.standard_normal(4)), ("e", rng.standard_normal((3, 4)))]
    buffer = ParameterBuffer(arrays)
    flat = [(name, Param(*buffer.views(name))) for name, _ in arrays]
    own = [(name, Param(a.astype(np.float32), np.zeros(a.shape, np.float32))) for name, a in arrays]
    for (_, p), (_, q) in zip(own, flat, strict=True):
        p.grad[...] = q.grad[...] = 10 * rng.standard_normal(p.grad.shape)
    assert clip_grad_norm_(buffer, 0.5) == pytest.approx(clip_grad_norm_(own, 0.5), rel=1e-12)
    for (name, p), (_, q) in zip(own, flat, strict=True):
        np.testing.assert_allclose(q.grad, p.grad, rtol=1e-6, err_msg=name)
    clip_grad_value_(buffer, 0.01)
    assert np.abs(buffer.grad).max() == pytest.approx(0.01)


def test_clip_by_value():
    params = _params()
    clip_grad_value_(params, 3.5)
    np.testing.assert_array_equal(params[0][1].grad, [[3.0, 0.0], [0.0, 3.5]])
    np.testing.assert_array_equal(params[1][1].grad, [3.5, 0.0])
    with pytest.raises(ValueError, match="clip_value must be > 0"):
        clip_grad_value_(params, 0.0)
    with pytest.raises(ValueError, match="max_norm must be > 0"):
        clip_grad_norm_(params, -1.0)
