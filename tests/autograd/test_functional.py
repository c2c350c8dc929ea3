"""Every fused op in minitrain.autograd.functional: float64 gradcheck on every kernel backend, and agreement with the
same math composed from elementary Tensor ops."""

import numpy as np
import pytest
from op_checks import assert_same_forward_and_grads, t64

from minitrain import Tensor, gradcheck, masked_fill
from minitrain import functional as F
from minitrain.autograd import kernels
from minitrain.autograd.kernels.gelu import CUBIC, SQRT_2_OVER_PI


@pytest.fixture(params=kernels.BACKENDS, autouse=True)
def backend(request):
    with kernels.use_backend(request.param):
        yield request.param


def test_linear():
    x, w, b = t64((2, 3, 4), 1), t64((4, 5), 2), t64((5,), 3)
    assert gradcheck(F.linear, [x, w, b])
    assert gradcheck(lambda a, m: F.linear(a, m), [x, w])
    assert_same_forward_and_grads(F.linear, lambda a, m, c: a @ m + c, [x, w, b])


def test_linear_with_gelu_is_gelu_of_linear():
    x, w, b = t64((2, 3, 4), 1), t64((4, 5), 2), t64((5,), 3)
    assert gradcheck(lambda a, m, c: F.linear(a, m, c, activation="gelu"), [x, w, b])
    assert gradcheck(lambda a, m: F.linear(a, m, activation="gelu"), [x, w])
    assert_same_forward_and_grads(lambda a, m, c: F.linear(a, m, c, activation="gelu"),
                                  lambda a, m, c: F.gelu(F.linear(a, m, c)), [x, w, b])
    with pytest.raises(ValueError, match="unknown activation"):
        F.linear(x, w, b, activation="relu")


def test_gelu():
    x = t64((3, 7), scale=3.0)
    assert gradcheck(F.gelu, [x])

    def composed(a):
        return 0.5 * a * (1.0 + (SQRT_2_OVER_PI * (a + CUBIC * a * a * a)).tanh())

    assert_same_forward_and_grads(F.gelu, composed, [x])


def test_layer_norm():
    x, w, b = t64((2, 3, 6), 1, scale=2.0), t64((6,), 2), t64((6,), 3)
    assert gradcheck(lambda a, m, c: F.layer_norm(a, m, c), [x, w, b])

    def composed(a, m, c):
        mu = a.mean(axis=-1, keepdims=True)
        centred = a - mu
        var = (centred * centred).mean(axis=-1, keepdims=True)
        return centred / (var + 1e-5).sqrt() * m + c

    assert_same_forward_and_grads(F.layer_norm, composed, [x, w, b])


def test_softmax_and_log_softmax():
    x = t64((2, 3, 5), scale=2.0)
    assert gradcheck(F.softmax, [x])
    assert gradcheck(F.log_softmax, [x])
    assert gradcheck(lambda a: F.softmax(a, axis=1), [x])
    np.testing.assert_allclose(F.softmax(x).data.sum(axis=-1), 1.0)

    def composed_log_softmax(a):
        peak = Tensor(a.data.max(axis=-1, keepdims=True), dtype=np.float64)
        return a - peak - (a - peak).exp().sum(axis=-1, keepdims=True).log()

    assert_same_forward_and_grads(F.log_softmax, composed_log_softmax, [x])


def test_cross_entropy_with_mask():
    logits = t64((2, 4, 6), scale=2.0)
    targets = np.random.default_rng(1).integers(0, 6, size=(2, 4))
    mask = np.array([[True, False, True, True], [False, False, True, False]])
    assert gradcheck(lambda z: F.cross_entropy(z, targets, mask), [logits])
    assert gradcheck(lambda z: F.cross_entropy(z, targets), [logits])

    def composed(z):
        picked = F.log_softmax(z)[np.arange(2)[:, None], np.arange(4)[None, :], targets]
        return -(masked_fill(picked, ~mask, 0.0).sum()) / float(mask.sum())

    assert_same_forward_and_grads(lambda z: F.cross_entropy(z, targets, mask), composed, [logits])
    with pytest.raises(ValueError, match="selects no position"):
        F.cross_entropy(logits, targets, np.zeros((2, 4), dtype=bool))


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_over_no_counted_position(label_smoothing):
    """Nothing counted (every target ignore_index): a sum is 0 and "none" is 0 everywhere, with zero gradients, as
    torch's; only the mean, a division by zero positions, is refused."""
    logits, ignored = Tensor(np.ones((2, 3, 5)), requires_grad=True), np.full((2, 3), -100)
    total = F.cross_entropy(logits, ignored, reduction="sum", label_smoothing=label_smoothing)
    total.backward()
    assert total.item() == 0.0 and np.all(logits.grad == 0)
    per = F.cross_entropy(logits, ignored, reduction="none", label_smoothing=label_smoothing)
    assert per.shape == (2, 3) and np.all(per.data == 0)
    with pytest.raises(ValueError, match="selects no position"):
        F.cross_entropy(logits, ignored, label_smoothing=label_smoothing)


def test_cross_entropy_of_uniform_logits_is_log_vocab():
    loss = F.cross_entropy(Tensor(np.zeros((3, 64))), np.array([0, 5, 63]))
    assert loss.item() == pytest.approx(np.log(64), rel=1e-6)


def test_embedding_with_repeated_indices():
    w = t64((5, 3))
    idx = np.array([[0, 4, 0], [2, 4, 4]])
    assert gradcheck(lambda m: F.embedding(m, idx), [w])
    np.testing.assert_array_equal(F.embedding(w, idx).data, w.data[idx])


def test_dropout():
    x = t64((50, 40))
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0, training=True) is x
    assert gradcheck(lambda a: F.dropout(a, 0.3, True, np.random.default_rng(5)), [x])
    y = F.dropout(Tensor(np.ones((200, 100), dtype=np.float32)), 0.25, True, np.random.default_rng(0)).data
    assert abs((y == 0).mean() - 0.25) < 0.02
    assert set(np.unique(y)) == {0.0, np.float32(1 / 0.75)}
    again = F.dropout(Tensor(np.ones((200, 100), dtype=np.float32)), 0.25, True, np.random.default_rng(0)).data
    np.testing.assert_array_equal(y, again)


def test_attention_gradcheck_and_composed():
    q, k, v = t64((2, 2, 4, 3), 1), t64((2, 2, 4, 3), 2), t64((2, 2, 4, 3), 3)
    pad = np.array([[True, True, True, False], [True, True, True, True]])
    assert gradcheck(lambda a, b, c: F.attention(a, b, c, pad), [q, k, v])

    def composed(a, b, c):
        scores = (a @ b.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(3))
        allowed = np.tril(np.ones((4, 4), dtype=bool))[None, None] & pad[:, None, None, :]
        return F.softmax(masked_fill(scores, ~allowed, -1e30)) @ c

    assert_same_forward_and_grads(lambda a, b, c: F.attention(a, b, c, pad), composed, [q, k, v])


def test_attention_is_causal_and_ignores_padding_keys():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 5, 4)) for _ in range(3))
    pad = np.array([[True, True, True, False, False]])
    base = F.attention(Tensor(q), Tensor(k), Tensor(v), pad).data
    k2, v2 = k.copy(), v.copy()
    k2[:, :, 2:] += 10.0  # the future of positions 0 and 1
    v2[:, :, 2:] -= 3.0
    changed = F.attention(Tensor(q), Tensor(k2), Tensor(v2), pad).data
    np.testing.assert_allclose(changed[:, :, :2], base[:, :, :2], rtol=1e-6)
    k3, v3 = k.copy(), v.copy()
    k3[:, :, 3:] = 99.0  # padding keys
    v3[:, :, 3:] = -99.0
    np.testing.assert_allclose(F.attention(Tensor(q), Tensor(k3), Tensor(v3), pad).data, base, rtol=1e-6)


def test_self_attention_matches_split_heads_attention():
    qkv = t64((2, 4, 3 * 6), 4)
    pad = np.array([[True, True, True, False], [True, True, True, True]])
    assert gradcheck(lambda a: F.self_attention(a, 2, pad), [qkv])

    def composed(a):
        q, k, v = (a[:, :, i * 6:(i + 1) * 6].reshape(2, 4, 2, 3).transpose(0, 2, 1, 3) for i in range(3))
        return F.attention(q, k, v, pad).transpose(0, 2, 1, 3).reshape(2, 4, 6)

    assert_same_forward_and_grads(lambda a: F.self_attention(a, 2, pad), composed, [qkv])


def test_float32_path_runs_and_keeps_dtype():
    x = Tensor(np.random.default_rng(0).standard_normal((2, 8, 16)).astype(np.float32), requires_grad=True)
    w, b = Tensor(np.ones(16, np.float32), requires_grad=True), Tensor(np.zeros(16, np.float32), requires_grad=True)
    h = F.gelu(F.layer_norm(x, w, b))
    loss = F.cross_entropy(h, np.zeros((2, 8), dtype=np.int64))
    loss.backward()
    assert h.dtype == np.float32 and x.grad.dtype == np.float32 and w.grad.dtype == np.float32


def test_bad_arguments_are_clear_errors_not_out_of_bounds_reads():
    logits = Tensor(np.zeros((2, 5)))
    for bad in ([1, 5], [-1, 0]):  # the numba kernel would read beyond the row without this check
        with pytest.raises(ValueError, match=r"target ids must be in \[0, 5\)"):
            F.cross_entropy(logits, np.array(bad))
    qkv = Tensor(np.zeros((2, 4, 12)))
    with pytest.raises(ValueError, match=r"pad_mask of shape \(2, 3\) does not match \(B, T\) = \(2, 4\)"):
        F.self_attention(qkv, 2, np.ones((2, 3), dtype=bool))
    with pytest.raises(ValueError, match="does not split into q, k, v of 5 heads"):
        F.self_attention(qkv, 5)
    for p in (1.0, -0.1):
        with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
            F.dropout(logits, p, True, np.random.default_rng(0))
