"""Check an op's backward against central differences, in float64.

    numeric ∂L/∂xᵢ ≈ (L(x + h·eᵢ) − L(x − h·eᵢ)) / 2h

where L = Σ fn(inputs) ⊙ R for a fixed random R, so one backward pass checks every output element at once.
With h = 1e-6 in float64 the truncation error (∝ h²) is about 1e-12 and the rounding error (∝ 1e-16/h) about
1e-10 of L's size, so agreement to rtol 1e-6 (plus a small atol for entries near zero) is a sharp test.
Points where fn is not differentiable (relu at 0, ties in max) must be avoided by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from minitrain.autograd.tensor import Tensor, no_grad


class GradcheckError(AssertionError):
    """The analytic gradient disagrees with the numeric one; the message names the worst element."""


def gradcheck(fn: Callable[..., Tensor], inputs: Sequence[Tensor], eps: float = 1e-6, rtol: float = 1e-6,
              atol: float = 1e-7, seed: int = 0) -> bool:
    """Return True if fn's gradients w.r.t. every input with requires_grad match central differences.

    `inputs` must be float64 Tensors. Raises GradcheckError with the worst mismatch otherwise."""
    compare_gradients(gradients(fn, inputs, eps, seed), rtol, atol)
    return True


def gradients(fn: Callable[..., Tensor], inputs: Sequence[Tensor], eps: float = 1e-6, seed: int = 0
              ) -> list[tuple[np.ndarray | None, np.ndarray] | None]:
    """For each input, (the gradient backward gave it, None if none; the central differences), or None for an
    input that does not require grad: plain arrays, which `compare_gradients` judges (a lab's checker compares
    them in its own process, lab05.py)."""
    for i, x in enumerate(inputs):
        if x.dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} is {x.dtype}; use float64 (float32 is too coarse to check)")
    with no_grad():
        out_shape = fn(*inputs).shape
    weights = np.random.default_rng(seed).standard_normal(out_shape)

    def objective() -> float:
        with no_grad():
            return float((fn(*inputs).data * weights).sum())

    for x in inputs:
        x.zero_grad()
    (fn(*inputs) * Tensor(weights, dtype=np.float64)).sum().backward()
    found: list[tuple[np.ndarray | None, np.ndarray] | None] = []
    for x in inputs:
        if not x.requires_grad:
            found.append(None)
            continue
        analytic = None if x.grad is None else np.array(x.grad)
        numeric = np.zeros_like(x.data)
        for j in np.ndindex(x.shape):  # indexing x.data itself nudges x, even when it is a strided view
            saved = x.data[j]
            x.data[j] = saved + eps
            upper = objective()
            x.data[j] = saved - eps
            lower = objective()
            x.data[j] = saved
            numeric[j] = (upper - lower) / (2 * eps)
        found.append((analytic, numeric))
    return found


def compare_gradients(found: Sequence[tuple[np.ndarray | None, np.ndarray] | None], rtol: float = 1e-6,
                      atol: float = 1e-7) -> None:
    """Raise GradcheckError unless each (analytic, numeric) of `gradients` agrees: |a − n| ≤ atol + rtol·|n|."""
    for i, pair in enumerate(found):
        # A backward that forgets to un-broadcast hands an input a gradient of another shape; comparing it
        # element by element would only crash, so say what is wrong instead.
        if pair is not None and pair[0] is not None and np.shape(pair[0]) != pair[1].shape:
            raise GradcheckError(f"gradcheck: input {i} has shape {pair[1].shape} but its gradient has shape "
                                 f"{np.shape(pair[0])}: the backward must give each input a gradient of the input's "
                                 "own shape (un-broadcast it)")
    for i, pair in enumerate(found):
        if pair is None:
            continue
        numeric = pair[1]
        analytic = np.zeros_like(numeric) if pair[0] is None else pair[0]
        error = np.abs(analytic - numeric) - (atol + rtol * np.abs(numeric))
        if (error > 0).any():
            worst = np.unravel_index(np.argmax(error), numeric.shape)
            raise GradcheckError(f"gradcheck: input {i} (shape {numeric.shape}) at {tuple(int(w) for w in worst)}: "
                                 f"analytic {analytic[worst]:.10g} vs numeric {numeric[worst]:.10g}")
