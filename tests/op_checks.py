"""What the op tests share (test_functional.py, test_kernels.py, test_llama_ops.py): float64 inputs for gradcheck,
a fused op checked against the same math composed from elementary ops, and a numba kernel against its NumPy
reference at each dtype's tolerance."""

import numpy as np

from minitrain import Tensor

# numba kernel vs NumPy reference: float32 agrees to rounding, float64 to ~1e-12.
TOLERANCE = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-12)}


def t64(shape, seed=0, scale=1.0):
    """A float64 leaf of standard normals (times `scale`) that wants a gradient."""
    return Tensor(np.random.default_rng(seed).standard_normal(shape) * scale, requires_grad=True, dtype=np.float64)


def assert_same_forward_and_grads(fused, composed, inputs, rtol=1e-10):
    """Both functions give the same output and the same gradients for every input."""
    out_f, grads_f = _forward_and_grads(fused, inputs)
    out_c, grads_c = _forward_and_grads(composed, inputs)
    np.testing.assert_allclose(out_f, out_c, rtol=rtol, atol=1e-12)
    for gf, gc in zip(grads_f, grads_c, strict=True):
        np.testing.assert_allclose(gf, gc, rtol=rtol, atol=1e-12)


def _forward_and_grads(fn, inputs):
    # The gradient of a random weighting of the output: every output element counts, each with its own weight.
    for x in inputs:
        x.grad = None
    out = fn(*inputs)
    weights = np.random.default_rng(7).standard_normal(out.shape)
    (out * weights).sum().backward()
    return out.data.copy(), [x.grad.copy() for x in inputs]


def normal(shape, dtype, seed, scale=1.0):
    """A plain array of standard normals (times `scale`) of `dtype`, for a kernel's inputs."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def agree(numba_out, reference_out, dtype, **override):
    """A kernel's output (an array or a tuple of them) equals its reference's, in `dtype`, to TOLERANCE[dtype]
    (or the `override`n rtol/atol)."""
    tol = {**TOLERANCE[dtype], **override}
    as_list = lambda out: list(out) if isinstance(out, tuple) else [out]  # noqa: E731
    for a, b in zip(as_list(numba_out), as_list(reference_out), strict=True):
        assert a.dtype == b.dtype == dtype
        np.testing.assert_allclose(a, b, **tol)
