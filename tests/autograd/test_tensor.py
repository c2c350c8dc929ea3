"""The autograd core: every Tensor op gradchecked in float64, broadcasting, the tape's rules, and errors."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

from minitrain import Tensor, concat, gradcheck, masked_fill, no_grad, split, where, zero_grad
from minitrain.autograd.gradcheck import GradcheckError
from minitrain.autograd.tensor import TAPE

FAST = settings(max_examples=25, deadline=None)


def t64(shape, seed=0, low=None):
    """A float64 leaf with reproducible values; with `low`, values are kept at least that far from zero."""
    data = np.random.default_rng(seed).standard_normal(shape)
    if low is not None:
        data = np.sign(data + (data == 0)) * (low + np.abs(data))
    return Tensor(data, requires_grad=True, dtype=np.float64)


two_shapes = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=3)


@FAST
@given(shapes=two_shapes, seed=st.integers(0, 1000))
def test_add_sub_mul_broadcast(shapes, seed):
    a, b = t64(shapes.input_shapes[0], seed), t64(shapes.input_shapes[1], seed + 1)
    assert gradcheck(lambda x, y: x + y, [a, b])
    assert gradcheck(lambda x, y: x - y, [a, b])
    assert gradcheck(lambda x, y: x * y, [a, b])


@FAST
@given(shapes=two_shapes, seed=st.integers(0, 1000))
def test_div_broadcast(shapes, seed):
    a, b = t64(shapes.input_shapes[0], seed), t64(shapes.input_shapes[1], seed + 1, low=0.5)
    assert gradcheck(lambda x, y: x / y, [a, b])


@FAST
@given(
    batch=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3),
    n=st.integers(1, 3), k=st.integers(1, 3), m=st.integers(1, 3), seed=st.integers(0, 1000),
)
def test_batched_matmul_broadcast(batch, n, k, m, seed):
    a = t64((*batch.input_shapes[0], n, k), seed)
    b = t64((*batch.input_shapes[1], k, m), seed + 1)
    assert gradcheck(lambda x, y: x @ y, [a, b])


def test_scalars_on_either_side():
    x = t64((2, 3))
    assert gradcheck(lambda a: 2.0 * a - 1.5 + a / 3.0 + 1.0 / (a * a + 1.0) - (3.0 - a), [x])
    assert gradcheck(lambda a: -a, [x])


@pytest.mark.parametrize("p", [2, 3, 0.5, -1.5])
def test_pow_scalar(p):
    x = t64((3, 2), low=0.3)
    assert gradcheck(lambda a: (a * a) ** p, [x])


@pytest.mark.parametrize(
    "name, fn, low",
    [
        ("exp", lambda a: a.exp(), None),
        ("log", lambda a: (a * a).log(), 0.2),
        ("tanh", lambda a: a.tanh(), None),
        ("relu", lambda a: a.relu(), 0.1),  # away from the kink at 0
        ("sqrt", lambda a: (a * a).sqrt(), 0.2),
    ],
)
def test_unary(name, fn, low):
    assert gradcheck(fn, [t64((2, 3, 2), low=low)])


@FAST
@given(
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple),
    keepdims=st.booleans(),
    data=st.data(),
)
def test_reductions(shape, keepdims, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1),
                               st.just(tuple(range(len(shape))))))
    x = t64(shape, data.draw(st.integers(0, 100)))  # continuous values: ties in max have probability 0
    assert gradcheck(lambda a: a.sum(axis=axis, keepdims=keepdims), [x])
    assert gradcheck(lambda a: a.mean(axis=axis, keepdims=keepdims), [x])
    assert gradcheck(lambda a: a.max(axis=axis, keepdims=keepdims), [x])


def test_mean_value_and_max_ties_share_gradient():
    x = Tensor([[1.0, 3.0, 3.0]], requires_grad=True, dtype=np.float64)
    assert x.mean().item() == pytest.approx(7 / 3)
    x.max().backward()
    np.testing.assert_array_equal(x.grad, [[0.0, 0.5, 0.5]])


def test_shape_ops():
    x = t64((2, 3, 4))
    assert gradcheck(lambda a: a.reshape(6, 4) * 2.0, [x])
    assert gradcheck(lambda a: a.reshape((4, 6)), [x])
    assert gradcheck(lambda a: a.transpose(2, 0, 1), [x])
    assert gradcheck(lambda a: a.permute((1, 2, 0)), [x])
    assert gradcheck(lambda a: a.T, [x])
    assert x.transpose(2, 0, 1).shape == (4, 2, 3)


@pytest.mark.parametrize(
    "index",
    [
        (slice(None), 1),
        (0, slice(1, 3), slice(None, None, 2)),
        (np.array([0, 1, 0]),),  # a repeated row collects both gradients
        (Ellipsis, np.array([3, 3, 1])),
        (np.array([[True, False, True], [False, True, True]]),),
    ],
)
def test_indexing(index):
    assert gradcheck(lambda a: a[index], [t64((2, 3, 4))])


def test_concat_split_where_masked_fill():
    a, b = t64((2, 3), 1), t64((2, 2), 2)
    assert gradcheck(lambda x, y: concat([x, y, x], axis=1), [a, b])
    assert gradcheck(lambda x: split(x, [1, 2], axis=1)[1] * split(x, 3, axis=1)[0], [a])
    cond = np.array([[True, False, True], [False, False, True]])
    c = t64((1, 3), 3)
    assert gradcheck(lambda x, y: where(cond, x, y), [a, c])
    assert gradcheck(lambda x: masked_fill(x, cond, -5.0), [a])
    np.testing.assert_array_equal(masked_fill(a, cond, -5.0).data[cond], -5.0)


def test_reused_node_gets_summed_gradient():
    x = Tensor([1.5, -2.0], requires_grad=True, dtype=np.float64)
    h = x * 3.0  # used three times below
    (h * h + h).sum().backward()
    np.testing.assert_allclose(x.grad, 3.0 * (2 * 3.0 * x.data + 1.0))


def test_diamond_graph_and_gradcheck_agree():
    x = t64((3,))
    assert gradcheck(lambda a: (a.exp() * a.tanh() + a.exp() / (a * a + 1.0)).sum(), [x])


def test_no_grad_records_nothing():
    x = Tensor(np.ones((2, 2)), requires_grad=True)
    before = len(TAPE.nodes)
    with no_grad():
        y = (x * 2.0 + 1.0).sum()
    assert not y.requires_grad
    assert len(TAPE.nodes) == before
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward()


def test_backward_consumes_tape_and_frees_intermediate_grads():
    x = Tensor(np.ones(3), requires_grad=True)
    h = x * 2.0
    loss = h.sum()
    loss.backward()
    assert h.grad is None and loss.grad is None
    assert all(node is not loss for node in TAPE.nodes)
    np.testing.assert_array_equal(x.grad, [2.0, 2.0, 2.0])


def test_leaf_grads_accumulate_across_backward_calls_and_into_buffer_views():
    flat_grad = np.zeros(4, dtype=np.float32)
    w = Tensor(np.arange(4.0), requires_grad=True)
    w.grad = flat_grad[:4]  # a view into a flat buffer, as ParameterBuffer sets it up
    (w * w).sum().backward()
    (w * 1.0).sum().backward()
    np.testing.assert_array_equal(flat_grad, 2 * np.arange(4.0) + 1)
    w.zero_grad()
    assert w.grad is not None and not flat_grad.any()


def test_zero_grad_helper_zeroes_buffer_views_and_drops_own_grads():
    flat_grad = np.ones(3, dtype=np.float32)
    in_buffer, own = Tensor(np.ones(3), requires_grad=True), Tensor(np.ones(2), requires_grad=True)
    in_buffer.grad = flat_grad[:3]
    own.grad = np.ones(2, dtype=np.float32)
    zero_grad([in_buffer, own])
    assert in_buffer.grad is not None and not flat_grad.any() and own.grad is None


def test_backward_needs_grad_for_non_scalar():
    y = Tensor(np.ones((2, 3)), requires_grad=True) * 2.0
    with pytest.raises(RuntimeError, match=r"not a scalar"):
        y.backward()
    y.backward(np.ones((2, 3), dtype=np.float32))


def test_dtypes():
    assert Tensor([1, 2, 3]).dtype == np.float32
    assert (Tensor([1.0]) * 2.0).dtype == np.float32
    x = Tensor(np.ones(2), requires_grad=True, dtype=np.float64)
    y = (x * 2.0).exp().sum()
    assert y.dtype == np.float64
    y.backward()
    assert x.grad.dtype == np.float64


def test_shape_errors_name_both_shapes():
    a, b = Tensor(np.ones((2, 3))), Tensor(np.ones((4, 5)))
    for op in (lambda: a + b, lambda: a * b, lambda: a - b, lambda: a / b):
        with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 5\)"):
            op()
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 5\)"):
        a @ b
    with pytest.raises(ValueError, match="do not add up"):
        split(a, [1, 1], axis=1)


def test_detach_and_item():
    x = Tensor([2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.data is x.data
    assert (x * 3.0).item() == 6.0


def test_gradcheck_rejects_a_wrong_backward():
    """Every test above trusts gradcheck: here it must catch a backward that is off by a factor 1 + 1e-4."""
    x = t64((3, 4))

    def scaled(factor):  # y = 2x with a hand-written backward dx = factor · g
        return lambda a: Tensor._from_op(2.0 * a.data, (a,), lambda g: a._accumulate(factor * g))

    assert gradcheck(scaled(2.0), [x])
    with pytest.raises(GradcheckError, match=r"input 0 \(shape \(3, 4\)\) at \(\d, \d\): analytic"):
        gradcheck(scaled(2.0 * (1 + 1e-4)), [x])
    with pytest.raises(TypeError, match="float64"):
        gradcheck(lambda a: a * 2.0, [Tensor([1.0, 2.0], requires_grad=True)])  # float32


@pytest.mark.parametrize(("x_shape", "b_shape", "wrong"), [((3, 4), (4,), 1), ((2, 3, 4), (1, 4), 1),
                                                        ((4,), (3, 4), 0)])
def test_gradcheck_names_a_gradient_of_the_wrong_shape(x_shape, b_shape, wrong):
    """theory/01's exercise 2: an add whose backward forgets to un-broadcast gives the broadcast input a gradient
    of the output's shape. gradcheck must say so, not crash comparing the two."""
    x, b = t64(x_shape), t64(b_shape)

    def add_without_unbroadcast(p, q):
        return Tensor._from_op(p.data + q.data, (p, q), lambda g: (p._accumulate(g), q._accumulate(g)))

    expected = (f"gradcheck: input {wrong} has shape {(x_shape, b_shape)[wrong]} but its gradient has shape "
                f"{np.broadcast_shapes(x_shape, b_shape)}: the backward must give each input a gradient of the "
                "input's own shape")
    with pytest.raises(GradcheckError, match=re.escape(expected)):
        gradcheck(add_without_unbroadcast, [x, b])
    assert gradcheck(lambda p, q: p + q, [x, b])  # the real add un-broadcasts


def test_gradcheck_nudges_strided_inputs():
    x = Tensor(np.random.default_rng(1).standard_normal((4, 3)).T, requires_grad=True, dtype=np.float64)
    assert not x.data.flags.c_contiguous  # a transposed view: reshape(-1) of it would be a copy
    assert gradcheck(lambda a: a.exp() * a[:, :1], [x])
