"""Lion (Chen et al., 2023), as a user adds it: save this file as minitrain/optim/lion.py and add the line
`"lion.Lion",` to OPTIMIZER_CLASSES in minitrain/optim/factory.py; `optimizer.type: lion` then works from YAML."""

from __future__ import annotations

import numpy as np

from minitrain.optim.optimizer import Optimizer


class Lion(Optimizer):
    """Lion: a step of fixed size per element, in the sign of a momentum.

    c = β1·m + (1 − β1)·g;   p ← p − lr·(sign(c) + wd·p);   m ← β2·m + (1 − β2)·g
    """

    name = "lion"
    lr: float = 1e-4
    beta1: float = 0.9
    beta2: float = 0.99
    weight_decay: float = 0.0
    state_names = ("exp_avg",)

    def _update(self, data, grad, state, lr, weight_decay):
        m = state["exp_avg"]
        direction = np.sign(self.beta1 * m + (1 - self.beta1) * grad)
        data -= lr * (direction + weight_decay * data)
        m *= self.beta2
        m += (1 - self.beta2) * grad
