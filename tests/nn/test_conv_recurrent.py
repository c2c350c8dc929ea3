"""Conv1d/2d, max/avg pooling, LSTM and GRU: float64 central-difference gradchecks on tiny shapes, and agreement
with PyTorch's layers given the same weights (outputs and every gradient), from the committed reference
tests/data/nn/torch_layers.npz (scripts/make_nn_fixtures.py, run once with torch)."""

from pathlib import Path

import numpy as np
import pytest

from minitrain import Tensor, gradcheck, nn
from minitrain.autograd import conv as C
from tests.op_checks import t64

REFERENCE = np.load(Path(__file__).parents[1] / "data" / "nn" / "torch_layers.npz", allow_pickle=False)

LAYERS = {  # the fixture's case: the same layer in minitrain
    "conv2d": lambda: nn.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2), dtype=np.float64),
    "conv2d_plain": lambda: nn.Conv2d(2, 3, 3, bias=False, dtype=np.float64),
    "conv1d": lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1, dilation=2, dtype=np.float64),
    "max_pool2d": lambda: nn.MaxPool2d(3, stride=2, padding=1),
    "max_pool1d": lambda: nn.MaxPool1d(3, stride=2, padding=1, dilation=2),
    "avg_pool2d": lambda: nn.AvgPool2d((3, 2), stride=(2, 1), padding=1),
    "avg_pool1d": lambda: nn.AvgPool1d(3, stride=2, padding=1),
    "lstm": lambda: nn.LSTM(3, 4, num_layers=2, batch_first=True, dtype=np.float64),
    "gru": lambda: nn.GRU(3, 4, num_layers=2, batch_first=True, dtype=np.float64),
    "lstm_time_major": lambda: nn.LSTM(3, 4, bias=False, dtype=np.float64),
}


def _case(name):
    prefix = f"{name}."
    return {key[len(prefix):]: REFERENCE[key] for key in REFERENCE.files if key.startswith(prefix)}


@pytest.mark.parametrize("name", LAYERS)
def test_agrees_with_pytorch(name):
    ref, layer = _case(name), LAYERS[name]()
    params = dict(layer.named_parameters())
    assert sorted(params) == sorted(key[len("param_"):] for key in ref if key.startswith("param_"))  # torch's names
    for key, p in params.items():
        assert p.shape == ref[f"param_{key}"].shape
        p.data[...] = ref[f"param_{key}"]
    inputs = {key: Tensor(ref[key], requires_grad=True) for key in ("x", "h0", "c0") if key in ref}
    if name == "lstm":
        output, (h_n, c_n) = layer(inputs["x"], (inputs["h0"], inputs["c0"]))
        results = {"output": output, "h_n": h_n, "c_n": c_n}
    elif name == "gru":
        output, h_n = layer(inputs["x"], inputs["h0"])
        results = {"output": output, "h_n": h_n}
    elif name == "lstm_time_major":
        output, (h_n, c_n) = layer(inputs["x"])
        results = {"output": output, "h_n": h_n, "c_n": c_n}
    else:
        results = {"output": layer(inputs["x"])}
    loss = None
    for key, value in results.items():
        np.testing.assert_allclose(value.data, ref[key], rtol=1e-10, atol=1e-12, err_msg=f"{name} {key}")
        term = (value * Tensor(ref[f"R_{key}"])).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    for key, tensor in [*inputs.items(), *params.items()]:
        np.testing.assert_allclose(tensor.grad, ref[f"grad_{key}"], rtol=1e-10, atol=1e-12, err_msg=f"{name} {key}")


@pytest.mark.parametrize("op, options", [
    (C.conv2d, dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    (C.conv1d, dict(stride=2, padding=2, dilation=1)),
])
def test_conv_gradcheck(op, options):
    x, w, b = (t64((2, 2, 5, 5)), t64((3, 2, 2, 2), 1), t64(3, 2)) if op is C.conv2d else \
        (t64((2, 2, 6)), t64((3, 2, 3), 1), t64(3, 2))
    assert gradcheck(lambda *a: op(*a, **options), [x, w, b])


@pytest.mark.parametrize("op, shape, options", [
    (C.max_pool2d, (1, 2, 5, 5), dict(kernel_size=2, stride=1, padding=1)),
    (C.max_pool1d, (2, 1, 7), dict(kernel_size=3, stride=2, dilation=2)),
    (C.avg_pool2d, (1, 2, 5, 4), dict(kernel_size=(3, 2), stride=(1, 2), padding=1)),
    (C.avg_pool1d, (2, 1, 7), dict(kernel_size=2)),
])
def test_pool_gradcheck(op, shape, options):
    # distinct values a step apart: no ties, and no nudge of 1e-6 changes which pixel is a window's largest
    x = Tensor(np.random.default_rng(0).permutation(np.prod(shape)).reshape(shape) * 0.1, requires_grad=True,
               dtype=np.float64)
    assert gradcheck(lambda v: op(v, **options), [x])


@pytest.mark.parametrize("layer", [nn.LSTM, nn.GRU])
def test_recurrent_gradcheck(layer):
    module = layer(2, 3, num_layers=2, batch_first=True, rng=np.random.default_rng(0), dtype=np.float64)
    params = [p for _, p in module.named_parameters()]
    assert gradcheck(lambda x, *_: module(x)[0], [t64((2, 3, 2)), *params])


def test_a_kernel_larger_than_its_input_is_refused():
    with pytest.raises(ValueError, match="larger than the input"):
        C.conv2d(t64((1, 1, 3, 3)), t64((1, 1, 4, 2)))
    with pytest.raises(ValueError, match=r"not \(B, C, L\)"):
        C.conv1d(t64((1, 3)), t64((1, 1, 2)))
