"""The Llama family's ops (minitrain.autograd.functional: rms_norm, silu, rope, attention_mask, grouped_attention):
float64 gradcheck on every kernel backend, agreement with the same math composed from elementary Tensor ops or
written out in NumPy, and each numba kernel beside its NumPy reference (float32 and float64). Shapes stay small
so that the file also runs under NUMBA_DISABLE_JIT=1."""

import numpy as np
import pytest
from op_checks import agree, assert_same_forward_and_grads, normal, t64

from minitrain import Tensor, gradcheck
from minitrain import functional as F
from minitrain.autograd import kernels
from minitrain.autograd.kernels import grouped_attention, rmsnorm, silu


@pytest.fixture(params=kernels.BACKENDS)
def backend(request):
    with kernels.use_backend(request.param):
        yield request.param


# ----------------------------------------------------------------------------------------- rms_norm, silu
def test_rms_norm(backend):
    x, w = t64((2, 3, 8), 1, scale=2.0), t64((8,), 2)
    assert gradcheck(lambda a, b: F.rms_norm(a, b, 1e-5), [x, w])
    assert_same_forward_and_grads(lambda a, b: F.rms_norm(a, b, 1e-5),
                                  lambda a, b: a / ((a * a).mean(axis=-1, keepdims=True) + 1e-5).sqrt() * b, [x, w])


def test_silu(backend):
    x = t64((3, 17), 3, scale=4.0)
    x.data.flat[:3] = [0.5, -30.0, 30.0]  # far from 0: σ saturates without overflowing
    assert gradcheck(F.silu, [x])
    assert_same_forward_and_grads(F.silu, lambda a: a * F.sigmoid(a), [x])


# ----------------------------------------------------------------------------------------- rope
def angles(batch, time, dim, seed=0):
    theta = np.random.default_rng(seed).uniform(-3, 3, size=(batch, time, 1, dim // 2))
    theta = np.concatenate([theta, theta], axis=-1)  # both halves of a pair turn by the same angle
    return np.cos(theta), np.sin(theta)


def test_rope_rotates_each_pair_of_halves(backend):
    x = t64((2, 5, 3, 6), 4)
    cos, sin = angles(2, 5, 6)
    assert gradcheck(lambda a: F.rope(a, cos, sin), [x])
    y = F.rope(x, cos, sin).data
    x1, x2, c, s = x.data[..., :3], x.data[..., 3:], cos[..., :3], sin[..., :3]
    np.testing.assert_allclose(y, np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1), rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x.data, axis=-1), rtol=1e-12)  # a rotation
    cos_t, sin_t = angles(1, 5, 6, seed=2)  # broadcast over the batch: the gradient still has x's shape
    assert gradcheck(lambda a: F.rope(a, cos_t, sin_t), [x])


def test_rope_refuses_an_odd_head_dim():
    with pytest.raises(ValueError, match="even"):
        F.rope(t64((1, 2, 1, 3)), np.ones(3), np.zeros(3))


# ----------------------------------------------------------------------------------------- masks
def test_attention_mask_causal_padding_and_segments():
    assert F.attention_mask(3, 3).tolist() == [[[True, False, False], [True, True, False], [True, True, True]]]
    # with a cache: the 2 queries are the last 2 of 4 positions
    assert F.attention_mask(2, 4).tolist() == [[[True, True, True, False], [True, True, True, True]]]
    pad = np.array([[False, True, True]])  # left padding
    assert F.attention_mask(3, 3, pad)[0].tolist() == [[False, False, False], [False, True, False], [False, True, True]]
    seg = np.array([[1, 1, 2, 2, 0]])  # two documents and a padding position
    allowed = F.attention_mask(5, 5, seg > 0, seg)[0]
    assert allowed.astype(int).tolist() == [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 1, 1, 0],
                                            [0, 0, 0, 0, 0]]


# ----------------------------------------------------------------------------------------- attention
def naive_attention(q, k, v, allowed, scale=None):
    """Spelled out: repeat each key/value head for its G query heads, softmax over the allowed keys."""
    n_head, n_kv = q.shape[2], k.shape[2]
    k, v = np.repeat(k, n_head // n_kv, axis=2), np.repeat(v, n_head // n_kv, axis=2)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.einsum("bihd,bjhd->bhij", q, k) * scale
    s = np.where(allowed[:, None], s, -np.inf)
    peak = np.max(s, axis=-1, keepdims=True)
    e = np.where(allowed[:, None], np.exp(s - np.where(np.isfinite(peak), peak, 0)), 0)
    p = e / np.maximum(e.sum(axis=-1, keepdims=True), 1e-300)
    return np.einsum("bhij,bjhd->bihd", p, v).reshape(q.shape[0], q.shape[1], -1)


@pytest.mark.parametrize("n_head, n_kv_head", [(4, 4), (4, 2), (4, 1)])
def test_grouped_attention_gradcheck_and_naive(backend, n_head, n_kv_head):
    q, k, v = t64((2, 5, n_head, 3), 1), t64((2, 5, n_kv_head, 3), 2), t64((2, 5, n_kv_head, 3), 3)
    seg = np.array([[1, 1, 1, 2, 2], [0, 3, 3, 3, 3]])  # packed documents; row 1 is left-padded
    allowed = F.attention_mask(5, 5, seg > 0, seg)
    fn = lambda a, b, c: F.grouped_attention(a, b, c, allowed)  # noqa: E731
    assert gradcheck(fn, [q, k, v])
    np.testing.assert_allclose(fn(q, k, v).data, naive_attention(q.data, k.data, v.data, allowed), rtol=1e-12,
                               atol=1e-14)
    assert not fn(q, k, v).data[1, 0].any()  # the padding query has no key: its output is 0


def test_grouped_attention_with_cached_keys(backend):
    """Two new queries over four keys (two of them cached) equal the last two rows of the full attention."""
    q, k, v = t64((1, 4, 4, 3), 1), t64((1, 4, 2, 3), 2), t64((1, 4, 2, 3), 3)
    full = F.grouped_attention(q, k, v, F.attention_mask(4, 4)).data
    last = F.grouped_attention(Tensor(q.data[:, 2:]), k, v, F.attention_mask(2, 4)).data
    np.testing.assert_allclose(last, full[:, 2:], rtol=1e-12)
    assert gradcheck(lambda a, b, c: F.grouped_attention(a, b, c, F.attention_mask(2, 4), scale=0.3),
                     [t64((1, 2, 4, 3), 5), k, v])


def test_grouped_attention_with_equal_heads_is_the_gpt2_attention(backend):
    q, k, v = t64((2, 4, 5, 3), 1), t64((2, 4, 5, 3), 2), t64((2, 4, 5, 3), 3)
    pad = np.array([[True] * 5, [True, True, True, False, False]])
    heads_first = lambda a: a.transpose(0, 2, 1, 3)  # noqa: E731
    mask = F.attention_mask(5, 5, pad)
    assert_same_forward_and_grads(
        lambda a, b, c: F.grouped_attention(heads_first(a), heads_first(b), heads_first(c), mask),
        lambda a, b, c: heads_first(F.attention(a, b, c, pad)).reshape(2, 5, 12), [q, k, v])


def test_grouped_attention_refuses_heads_that_do_not_group():
    with pytest.raises(ValueError, match="do not fit"):
        F.grouped_attention(t64((1, 2, 3, 4)), t64((1, 2, 2, 4)), t64((1, 2, 2, 4)), F.attention_mask(2, 2))


# ----------------------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rmsnorm_kernel(dtype):
    x, w, dy = normal((24, 16), dtype, 0, scale=3.0), normal(16, dtype, 1), normal((24, 16), dtype, 2)
    y, rstd = rmsnorm.rmsnorm_forward_numba(x, w, 1e-6)
    agree((y, rstd), rmsnorm.rmsnorm_forward_reference(x, w, 1e-6), dtype)
    agree(rmsnorm.rmsnorm_backward_numba(dy, x, w, rstd), rmsnorm.rmsnorm_backward_reference(dy, x, w, rstd), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_silu_kernel(dtype):
    x, dy = normal((5, 37), dtype, 0, scale=6.0), normal((5, 37), dtype, 1)
    x.flat[:3] = [0.0, 100.0, -100.0]
    agree(silu.silu_forward_numba(x), silu.silu_forward_reference(x), dtype)
    agree(silu.silu_backward_numba(x, dy), silu.silu_backward_reference(x, dy), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_grouped_attention_kernel(dtype):
    q, k, v = normal((2, 6, 4, 8), dtype, 0), normal((2, 6, 2, 8), dtype, 1), normal((2, 6, 2, 8), dtype, 2)
    dy = normal((2, 6, 32), dtype, 3)
    seg = np.array([[1, 1, 2, 2, 2, 0], [0, 0, 5, 5, 5, 5]])
    allowed = F.attention_mask(6, 6, seg > 0, seg)
    out, probs = grouped_attention.grouped_attention_forward_numba(q, k, v, allowed)
    reference_out, reference_probs = grouped_attention.grouped_attention_forward_reference(q, k, v, allowed)
    agree((out, probs), (reference_out, reference_probs), dtype)
    agree(grouped_attention.grouped_attention_backward_numba(q, k, v, probs, dy),
          grouped_attention.grouped_attention_backward_reference(q, k, v, reference_probs, dy), dtype)
