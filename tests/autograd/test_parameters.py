"""ParameterBuffer: one flat data array and one flat grad array, with shaped views into both."""

import numpy as np
import pytest

from minitrain.autograd.parameters import ParameterBuffer, gets_weight_decay


def _arrays():
    rng = np.random.default_rng(0)
    return [
        ("ln.weight", rng.standard_normal(3)),
        ("wte.weight", rng.standard_normal((4, 3))),
        ("fc.bias", rng.standard_normal(5)),
        ("fc.weight", rng.standard_normal((3, 5))),
    ]


def test_decay_group_first_then_the_rest_in_given_order():
    buf = ParameterBuffer(_arrays())
    assert buf.names == ["wte.weight", "fc.weight", "ln.weight", "fc.bias"]
    assert buf.decay_slice == slice(0, 12 + 15)
    assert buf.no_decay_slice == slice(27, 27 + 3 + 5)
    assert buf.size == 35
    assert buf.data.dtype == np.float32 and buf.grad.dtype == np.float32
    assert buf.data.ndim == 1 and buf.data.flags.c_contiguous


def test_values_are_copied_in_and_views_share_memory():
    arrays = dict(_arrays())
    buf = ParameterBuffer(list(arrays.items()))
    for name, array in arrays.items():
        view = buf.views(name)
        assert view.data.shape == array.shape and view.grad.shape == array.shape
        np.testing.assert_array_equal(view.data, array.astype(np.float32))
        np.testing.assert_array_equal(buf.data[buf.slice_of(name)], array.astype(np.float32).ravel())
        assert np.shares_memory(view.data, buf.data) and np.shares_memory(view.grad, buf.grad)
    # Writing through a view writes the flat array, and the other way round.
    buf.views("fc.weight").data[1, 2] = 42.0
    assert buf.data[buf.slice_of("fc.weight")][1 * 5 + 2] == 42.0
    buf.grad[buf.slice_of("ln.weight")] = 7.0
    np.testing.assert_array_equal(buf.views("ln.weight").grad, np.full(3, 7.0, np.float32))


def test_decay_slice_holds_exactly_the_matrices():
    buf = ParameterBuffer(_arrays())
    for name in buf.names:
        sl = buf.slice_of(name)
        in_decay = buf.decay_slice.start <= sl.start and sl.stop <= buf.decay_slice.stop
        assert in_decay == gets_weight_decay(buf.shapes[name])


def test_zero_grad_clears_every_view():
    buf = ParameterBuffer(_arrays())
    for name in buf.names:
        buf.views(name).grad[...] = 3.0
    buf.zero_grad()
    for name in buf.names:
        assert not buf.views(name).grad.any()


def test_dtype_float64_and_duplicate_names_rejected():
    buf = ParameterBuffer(_arrays(), dtype=np.float64)
    assert buf.data.dtype == np.float64
    np.testing.assert_array_equal(buf.views("wte.weight").data, dict(_arrays())["wte.weight"])
    with pytest.raises(ValueError, match="duplicate parameter names"):
        ParameterBuffer([("a", np.zeros(2)), ("a", np.zeros(3))])
