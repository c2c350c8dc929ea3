"""Each numba kernel agrees with its plain NumPy reference (float32 to rounding, float64 to ~1e-12).

Under NUMBA_DISABLE_JIT=1 the numba functions run as interpreted Python; the shapes here stay small so this
file still runs quickly then."""

import numpy as np
import pytest
from op_checks import agree, normal

from minitrain.autograd.kernels import (
    attention,
    cross_entropy,
    embedding_backward,
    fastmath,
    gelu,
    grad_norm,
    grouped_attention,
    layernorm,
)
from minitrain.autograd.kernels.attention_softmax import softmax_backward_numba, softmax_backward_reference

DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu(dtype):
    x = normal((4, 8, 33), dtype, 0, scale=4.0)  # wide enough to reach the ±1 region of tanh
    x.flat[:4] = [0.0, 12.0, -12.0, 1e-8]
    dy = normal(x.shape, dtype, 1)
    bias = normal(33, dtype, 2)
    # float32: the kernel's rational tanh is within 3e-7 of tanh; through the x³ slope that stays under 2e-5.
    agree(gelu.gelu_forward_numba(x), gelu.gelu_forward_reference(x), dtype)
    agree(gelu.gelu_backward_numba(x, dy), gelu.gelu_backward_reference(x, dy), dtype, atol=2e-5)
    # with a bias: exactly gelu of x + bias, forward and backward
    agree(gelu.gelu_forward_reference(x, bias), gelu.gelu_forward_reference(x + bias), dtype)
    agree(gelu.gelu_backward_reference(x, dy, bias), gelu.gelu_backward_reference(x + bias, dy), dtype)
    agree(gelu.gelu_forward_numba(x, bias), gelu.gelu_forward_reference(x + bias), dtype)
    agree(gelu.gelu_backward_numba(x, dy, bias), gelu.gelu_backward_reference(x + bias, dy), dtype, atol=2e-5)


def test_fast_tanh_accuracy():
    x = np.linspace(-10, 10, 20001).astype(np.float32)
    approx = np.array([gelu.tanh_f32(v) for v in x[::7]], dtype=np.float64)
    assert np.abs(approx - np.tanh(x[::7].astype(np.float64))).max() < 4e-7


@pytest.mark.parametrize("dtype", DTYPES)
def test_layernorm(dtype):
    x = normal((24, 16), dtype, 0, scale=3.0) + dtype(5.0)  # an offset mean tests the centring
    w, b = normal(16, dtype, 1), normal(16, dtype, 2)
    dy = normal(x.shape, dtype, 3)
    y, mean, rstd = layernorm.layernorm_forward_numba(x, w, b, 1e-5)
    agree((y, mean, rstd), layernorm.layernorm_forward_reference(x, w, b, 1e-5), dtype)
    agree(layernorm.layernorm_backward_numba(dy, x, w, mean, rstd),
          layernorm.layernorm_backward_reference(dy, x, w, mean, rstd), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy(dtype):
    logits = normal((30, 11), dtype, 0, scale=5.0)
    logits[0] += dtype(80.0)  # large logits must not overflow
    targets = np.random.default_rng(1).integers(0, 11, size=30)
    mask = np.random.default_rng(2).random(30) < 0.6
    mask[0] = True
    nll, lse = cross_entropy.cross_entropy_forward_numba(logits, targets, mask)
    agree((nll, lse), cross_entropy.cross_entropy_forward_reference(logits, targets, mask), dtype)
    assert np.all(nll[~mask] == 0) and np.all(nll[mask] > 0)
    dnll = (mask * normal(30, dtype, 3)).astype(dtype)
    agree(cross_entropy.cross_entropy_backward_numba(logits, targets, lse, dnll),
          cross_entropy.cross_entropy_backward_reference(logits, targets, lse, dnll), dtype)


def test_cross_entropy_skips_an_uncounted_row_whose_logits_overflow_exp():
    """A row that is not counted (dnll 0, its lse recorded as 0) gets no gradient from either kernel, even when
    exp(z − 0) overflows: 0 · inf would be NaN, and would reach every parameter through the head."""
    dtype = np.float32
    logits = normal((3, 5), dtype, 0)
    logits[1] += dtype(200.0)
    targets, mask = np.array([0, 1, 2]), np.array([True, False, True])
    _, lse = cross_entropy.cross_entropy_forward_reference(logits, targets, mask)
    dnll = (mask * normal(3, dtype, 1)).astype(dtype)
    with np.errstate(over="raise", invalid="raise"):
        reference = cross_entropy.cross_entropy_backward_reference(logits, targets, lse, dnll)
    assert np.all(reference[1] == 0) and np.all(np.isfinite(reference))
    agree(cross_entropy.cross_entropy_backward_numba(logits, targets, lse, dnll), reference, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_causal_softmax(dtype):
    scores = normal((2, 3, 6, 6), dtype, 0, scale=4.0)
    key_mask = np.array([[True] * 6, [True, True, True, True, False, False]])
    bias = attention.causal_bias(key_mask, 6, dtype)
    probs = grouped_attention.masked_softmax_forward_numba(scores.copy(), 0.5, bias)  # the kernel works in place
    agree(probs, grouped_attention.masked_softmax_forward_reference(scores, 0.5, bias), dtype)
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0, rtol=1e-6)
    assert np.all(np.triu(probs[0, 0], k=1) == 0) and np.all(probs[1, :, :, 4:] == 0)
    dprobs = normal(probs.shape, dtype, 1)
    agree(softmax_backward_numba(probs, dprobs.copy(), 0.5), softmax_backward_reference(probs, dprobs, 0.5), dtype)


def test_causal_softmax_row_without_keys_is_zero():
    scores = np.ones((1, 1, 3, 3))
    no_keys = np.array([[False, True, True]])  # query 0 may only see key 0, which is padding
    for kernel in (grouped_attention.masked_softmax_forward_numba, grouped_attention.masked_softmax_forward_reference):
        probs = kernel(scores.copy(), 1.0, attention.causal_bias(no_keys, 3, scores.dtype))
        np.testing.assert_array_equal(probs[0, 0, 0], 0.0)
        np.testing.assert_allclose(probs[0, 0, 2], [0.0, 0.5, 0.5])


@pytest.mark.parametrize("dtype", DTYPES)
def test_self_attention_kernels(dtype):
    qkv = normal((3, 7, 3 * 8), dtype, 0, scale=2.0)  # B 3, T 7, C 8 as 2 heads of 4
    key_mask = np.ones((3, 7), dtype=bool)
    key_mask[1, 5:] = False  # right padding
    key_mask[2, 0] = False  # query 0 of batch 2 has no key at all: its row and output are 0
    out, probs = attention.attention_forward_numba(qkv, 2, key_mask)
    agree((out, probs), attention.attention_forward_reference(qkv, 2, key_mask), dtype)
    assert out.shape == (3, 7, 8) and probs.shape == (3, 2, 7, 7)
    assert not probs[2, :, 0].any() and not out[2, 0].any() and not probs[1, :, :, 5:].any()
    dy = normal(out.shape, dtype, 1)
    agree(attention.attention_backward_numba(qkv, probs, dy),
          attention.attention_backward_reference(qkv, probs, dy), dtype)


def test_fast_exp_accuracy():
    x = np.concatenate([np.linspace(-87.3, 88.0, 4001), [0.0, -1e-8, 1e-8]]).astype(np.float32)
    approx = np.array([fastmath.exp_f32(v) for v in x], dtype=np.float64)
    exact = np.exp(x.astype(np.float64))
    assert np.max(np.abs(approx - exact) / exact) < 4e-7
    assert fastmath.exp_f32(np.float32(-90.0)) == 0.0 and fastmath.exp_f32(np.float32(-np.inf)) == 0.0
    with np.errstate(invalid="ignore"):  # without the JIT, NumPy warns about casting NaN to int
        assert np.isnan(fastmath.exp_f32(np.float32(np.nan)))  # a NaN must reach the loss, not vanish


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_scatter_add(dtype):
    idx = np.array([3, 0, 3, 3, 7, 0])
    dy = normal((6, 5), dtype, 0)
    out = embedding_backward.embedding_backward_numba(idx, dy, 9)
    agree(out, embedding_backward.embedding_backward_reference(idx, dy, 9), dtype)
    np.testing.assert_allclose(out[3], dy[[0, 2, 3]].sum(axis=0), rtol=1e-6)
    assert not out[[1, 2, 4, 5, 6, 8]].any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_of_squares(dtype):
    x = normal((3, 1000), dtype, 0, scale=100.0)
    exact = float((x.astype(np.float64) ** 2).sum())
    assert grad_norm.sum_of_squares_numba(x) == pytest.approx(grad_norm.sum_of_squares_reference(x), rel=1e-12)
    strided = x[:, ::3]  # a strided view: the kernel copies it to a contiguous array first
    assert grad_norm.sum_of_squares_numba(strided) == pytest.approx(
        float((strided.astype(np.float64) ** 2).sum()), rel=1e-12
    )
    assert grad_norm.sum_of_squares_reference(x) == pytest.approx(exact, rel=1e-12)
