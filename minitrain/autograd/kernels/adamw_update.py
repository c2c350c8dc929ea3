"""The fused AdamW update: a numba kernel and its plain NumPy reference (same signature, same math).

For step t >= 1, learning rate lr, gradient g and parameter p (all updated in place, element by element):

    p ← p · (1 − lr·wd)                              decoupled weight decay (AdamW), before the moments
    m ← β1·m + (1 − β1)·g                            first moment  (exp_avg)
    v ← β2·v + (1 − β2)·g²                           second moment (exp_avg_sq)
    p ← p − lr/(1 − β1ᵗ) · m / (√v / √(1 − β2ᵗ) + ε)  bias-corrected step

exactly in the order `torch.optim.AdamW` performs it. With `decoupled=False` the decay is the classic L2 term
of `torch.optim.Adam` instead: g ← g + wd·p, and p is not shrunk directly. Given `max_exp_avg_sq` (AMSGrad,
Reddi et al., torch's `amsgrad=True`; the reference only), the step divides by the largest second moment so far,
v_max ← max(v_max, v), instead of v, so the effective step never grows back.

Both work in float32 throughout (scalars are cast to float32 once), so they agree to float32 rounding (on x86-64
they come out bit-identical; the test allows rtol 1e-6, atol 1e-7 so that a compiler that fuses multiply-adds
still passes).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


def adamw_update_reference(
    param: np.ndarray,
    grad: np.ndarray,
    exp_avg: np.ndarray,
    exp_avg_sq: np.ndarray,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
    decoupled: bool = True,
    max_exp_avg_sq: np.ndarray | None = None,
) -> None:
    """One AdamW (or Adam, with `decoupled=False`; AMSGrad with `max_exp_avg_sq`) step on float32 arrays of one
    shape, in place."""
    step_size = lr / (1.0 - beta1**step)
    bias_correction2_sqrt = math.sqrt(1.0 - beta2**step)
    if decoupled:
        param *= 1.0 - lr * weight_decay
    else:
        grad = grad + weight_decay * param  # a new array: the caller's gradient stays as it was
    exp_avg *= beta1
    exp_avg += (1.0 - beta1) * grad
    exp_avg_sq *= beta2
    exp_avg_sq += (1.0 - beta2) * grad * grad
    if max_exp_avg_sq is not None:
        exp_avg_sq = np.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)  # v_max, which divides below
    param -= step_size * (exp_avg / (np.sqrt(exp_avg_sq) / bias_correction2_sqrt + eps))


# error_model="numpy": a float division by zero gives inf/nan as in NumPy instead of raising. Without it numba
# checks every division, which stops the loop from vectorising (3.6x slower here). No fastmath: it would let
# LLVM use approximate reciprocals and fused multiply-adds, and the kernel would no longer match the reference.
@njit(cache=True, error_model="numpy")
def adamw_update_numba(
    param: np.ndarray,
    grad: np.ndarray,
    exp_avg: np.ndarray,
    exp_avg_sq: np.ndarray,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
    decoupled: bool = True,
) -> None:
    """Fused kernel of `adamw_update_reference` on 1-D float32 arrays: one pass, no temporaries."""
    # Scalars in float64 first (as the reference's Python floats), then float32 so the loop stays float32.
    step_size = np.float32(lr / (1.0 - beta1**step))
    bias_correction2_sqrt = np.float32(math.sqrt(1.0 - beta2**step))
    decay = np.float32(1.0 - lr * weight_decay)
    wd = np.float32(weight_decay)
    b1, b2 = np.float32(beta1), np.float32(beta2)
    one_minus_b1, one_minus_b2 = np.float32(1.0 - beta1), np.float32(1.0 - beta2)
    eps32 = np.float32(eps)
    for i in range(param.size):
        p = param[i]
        g = grad[i]
        if decoupled:
            p = p * decay
        else:
            g = g + wd * p
        m = b1 * exp_avg[i] + one_minus_b1 * g
        v = b2 * exp_avg_sq[i] + one_minus_b2 * g * g
        exp_avg[i] = m
        exp_avg_sq[i] = v
        param[i] = p - step_size * (m / (np.sqrt(v) / bias_correction2_sqrt + eps32))
