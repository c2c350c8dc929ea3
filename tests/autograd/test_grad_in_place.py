"""A tied embedding's gradient is written in place: the head's loss (functional.linear_cross_entropy) and the
embedding's scatter-add add into W's own gradient array, a view of the flat buffer, without a dense (V, C)
temporary; the values are NumPy's float64 dW to float32 rounding, and a second backward adds to the first."""

import tracemalloc

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.parameters import ParameterBuffer
from minitrain.autograd.tensor import Tensor

V, C = 4096, 256  # W is 4 MiB; the step's logits (8 × 4096) are 128 KiB


def tied_loss(weight, idx, targets):
    return F.linear_cross_entropy(F.embedding(weight, idx) * 2.0, weight, targets)


def reference_dw(w, idx, targets):
    """d(mean nll)/dW in float64 NumPy: the head's softmax − onehot times the rows, plus the embedding's rows."""
    x = 2.0 * w[idx.reshape(-1)]
    z = x @ w.T
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(x)), targets.reshape(-1)] -= 1
    dz = p / len(x)
    dw = dz.T @ x
    np.add.at(dw, idx.reshape(-1), 2.0 * (dz @ w))
    return dw


def test_the_tied_weights_gradient_takes_no_dense_temporary_and_is_numpys():
    rng = np.random.default_rng(0)
    weight = Tensor(rng.normal(0, 0.1, (V, C)), requires_grad=True, dtype=np.float32)
    ParameterBuffer.pack([("w", weight)])  # weight.grad is a zeroed view of the buffer, as in a training step
    idx, targets = rng.integers(0, V, (2, 4)), rng.integers(0, V, (2, 4))
    idx[1, 3] = idx[0, 0]  # a repeated token: its rows add
    loss = tied_loss(weight, idx, targets)
    tracemalloc.start()
    loss.backward()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < weight.data.nbytes / 4  # the old path held one (V, C) array for the head and one for the lookup
    expected = reference_dw(weight.data.astype(np.float64), idx, targets)
    np.testing.assert_allclose(weight.grad, expected, rtol=1e-4, atol=1e-7)
    tied_loss(weight, idx, targets).backward()  # gradients accumulate: twice the first
    np.testing.assert_allclose(weight.grad, 2 * expected, rtol=1e-4, atol=1e-7)
