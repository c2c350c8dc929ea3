"""What the full-batch optimizers (L-BFGS, nonlinear CG) share: PyTorch's `step(closure)`, where the closure
zeroes the gradient, computes the loss on the SAME batch, backpropagates it and returns it, so that a line search
can evaluate the objective at as many points as it needs.

All parameters are one vector x (float64, laid out as the flat state buffers), the objective

    F(x) = closure() + ½ Σᵢ wdᵢ·xᵢ²        ∇F = the parameters' gradients + wd·x

(weight decay as an L2 penalty, so the line search sees the loss it minimizes; groups may set wd per parameter;
their lr_scale is not used: a line search picks one step for the whole vector). A subclass's `_direction(x, g)`
gives the descent direction and the first step to try; `_accepted(s, g, d)` hears what the step did. One `step()`
is one iteration: the direction, a strong-Wolfe line search along it (minitrain/optim/line_search.py), the
parameters moved. On mini-batches the objective would change between a line search's evaluations, which is why a
config picks these optimizers only for a full-batch table run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np

from minitrain.common.errors import ArgumentError
from minitrain.optim.groups import Setting
from minitrain.optim.line_search import strong_wolfe
from minitrain.optim.optimizer import Optimizer


class FullBatchOptimizer(Optimizer):
    """Base of the optimizers whose `step(closure)` searches along a direction; `c2` is the line search's
    curvature constant (0.9 suits quasi-Newton steps; conjugate directions want a closer search, cg.py)."""

    full_batch: ClassVar[bool] = True
    c2: ClassVar[float] = 0.9

    def _build_segments(self, order: list[str], settings: dict[str, Setting]) -> list:
        """The base's segments; also each element's weight decay, for the objective F."""
        self._size = max((s.stop for s in self._slices.values()), default=0)
        self._decay = np.zeros(self._size)
        for name in order:
            self._decay[self._slices[name]] = settings[name].weight_decay
        return super()._build_segments(order, settings)

    def _flat(self, grad: bool) -> np.ndarray:
        out = np.zeros(self._size)
        for name, p in self.params:
            values = p.grad if grad else p.data
            if values is not None:
                out[self._slices[name]] = values.reshape(-1)
        return out

    def _evaluate(self, closure: Callable[[], float], x: np.ndarray) -> tuple[float, np.ndarray]:
        """F and ∇F at x, the parameters left at x (rounded to their dtype: F is taken where they are)."""
        for name, p in self.params:
            p.data[...] = x[self._slices[name]].reshape(p.data.shape)
        x = self._flat(grad=False)
        loss = float(closure())
        return loss + 0.5 * float(self._decay @ (x * x)), self._flat(grad=True) + self._decay * x

    def step(self, closure: Callable[[], float] | None = None) -> float:
        """One iteration (module docstring); returns F before it (the closure's loss plus the L2 term), as torch's
        LBFGS.step returns the loss before its iterations."""
        if closure is None:
            raise ArgumentError(f"optimizer.type: {self.name} needs step(closure): a closure that zeroes the "
                                "gradient, computes the loss on the same batch, backpropagates it and returns it")
        self.step_count += 1
        x = self._flat(grad=False)
        f, g = self._evaluate(closure, x)
        d, t = self._direction(x, g)
        if float(g @ d) >= 0:  # not a descent direction (a stale history, rounding): fall back to the gradient
            d, t = -g, self._first_step(g)
        if not 0 < t < np.inf:  # the previous search did not move: no step length to go on
            t = self._first_step(g)
        tried = []

        def along(point: np.ndarray) -> tuple[float, np.ndarray]:
            tried.append(point)
            return self._evaluate(closure, point)

        t, _, _ = strong_wolfe(along, x, f, g, d, t, c2=self.c2)
        if not np.array_equal(tried[-1], x + t * d):  # leave the parameters, and their gradients, at the accepted point
            self._evaluate(closure, x + t * d)
        self._accepted(self._flat(grad=False) - x, g, d)
        return f

    def _first_step(self, g: np.ndarray) -> float:
        """The trial step along −g with no curvature known: lr, shortened so that it moves at most lr in ℓ₁."""
        return self.lr * min(1.0, 1.0 / max(float(np.abs(g).sum()), 1e-300))

    def _direction(self, x: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, float]:
        """(d, t): the direction to search along from x, whose gradient is g, and the first step to try."""
        raise NotImplementedError

    def _accepted(self, s: np.ndarray, g: np.ndarray, d: np.ndarray) -> None:
        """The step s taken from the point whose gradient was g, along d: what the next direction is built from."""
        raise NotImplementedError
