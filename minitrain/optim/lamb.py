"""LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"): Adam's direction, rescaled per
parameter tensor by a trust ratio so every layer moves by a step proportional to its own norm.

For each parameter tensor p (one layer) at step t:

    m ← β1·m + (1−β1)·g;   v ← β2·v + (1−β2)·g²
    m̂ = m/(1−β1ᵗ);  v̂ = v/(1−β2ᵗ)                   (bias correction, as in the paper's experiments)
    r = m̂/(√v̂ + ε) + wd·p                            (Adam direction plus decoupled weight decay)
    trust = ‖p‖/‖r‖   (1 if either norm is 0)
    p ← p − lr·trust·r

The norms are per tensor, so LAMB updates one parameter at a time even when they share a flat buffer.
"""

from __future__ import annotations

import numpy as np

from minitrain.optim.optimizer import Optimizer


class Lamb(Optimizer):
    """LAMB with bias correction (lr 1e-3, betas 0.9/0.999, eps 1e-6, weight_decay 0.01)."""

    name = "lamb"
    per_parameter = True

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-6
    weight_decay: float = 0.01
    state_names = ("exp_avg", "exp_avg_sq")

    def _update(
        self, data: np.ndarray, grad: np.ndarray, state: dict[str, np.ndarray], lr: float, weight_decay: float
    ) -> None:
        t = self.step_count
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg *= self.beta1
        exp_avg += (1.0 - self.beta1) * grad
        exp_avg_sq *= self.beta2
        exp_avg_sq += (1.0 - self.beta2) * grad * grad
        m_hat = exp_avg / (1.0 - self.beta1**t)
        v_hat = exp_avg_sq / (1.0 - self.beta2**t)
        update = m_hat / (np.sqrt(v_hat) + self.eps) + weight_decay * data
        # Norms accumulated in float64: a sum of many float32 squares loses digits otherwise.
        weight_norm = float(np.linalg.norm(data.astype(np.float64)))
        update_norm = float(np.linalg.norm(update.astype(np.float64)))
        trust = weight_norm / update_norm if weight_norm > 0 and update_norm > 0 else 1.0
        data -= (lr * trust) * update
