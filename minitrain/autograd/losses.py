"""Regression losses, each one tape node with its backward below its forward (cross-entropy, the classifier's and
the language model's loss, is `minitrain.autograd.functional.cross_entropy`).

With d = prediction − target over all N elements:

    mse    L = (1/N) Σ d²                                  dL/dd = 2d / N
    huber  L = (1/N) Σ h(d),  h(d) = d²/2        |d| ≤ δ    dL/dd = clip(d, −δ, δ) / N
                              h(d) = δ(|d| − δ/2) |d| > δ

Huber is quadratic near 0 and linear far from it, so one wild target pulls the fit by at most δ per element
instead of by its whole error (as MSE does).
"""

from __future__ import annotations

import numpy as np

from minitrain.autograd.tensor import Tensor


def _difference(prediction: Tensor, target: np.ndarray, name: str) -> np.ndarray:
    target = np.asarray(target)
    if target.shape != prediction.shape:
        raise ValueError(f"{name}: prediction of shape {prediction.shape} and target of shape {target.shape} differ")
    return prediction.data.astype(np.float64) - target


def mse_loss(prediction: Tensor, target: np.ndarray) -> Tensor:
    """Mean squared error; the mean is taken in float64."""
    d = _difference(prediction, target, "mse_loss")
    loss = np.asarray(np.mean(d * d), dtype=prediction.dtype)

    def backward(g: np.ndarray) -> None:
        prediction._accumulate((g * 2.0 * d / d.size).astype(prediction.dtype))

    return Tensor._from_op(loss, (prediction,), backward)


def huber_terms(d: np.ndarray, delta: float) -> np.ndarray:
    """h(d) per element: d²/2 where |d| ≤ δ, δ(|d| − δ/2) beyond."""
    size = np.abs(d)
    return np.where(size <= delta, 0.5 * d * d, delta * (size - 0.5 * delta))


def huber_loss(prediction: Tensor, target: np.ndarray, delta: float = 1.0) -> Tensor:
    """Mean Huber loss with threshold `delta` > 0 (torch.nn.HuberLoss's definition)."""
    if not delta > 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    d = _difference(prediction, target, "huber_loss")
    loss = np.asarray(np.mean(huber_terms(d, delta)), dtype=prediction.dtype)

    def backward(g: np.ndarray) -> None:
        prediction._accumulate((g * np.clip(d, -delta, delta) / d.size).astype(prediction.dtype))

    return Tensor._from_op(loss, (prediction,), backward)
