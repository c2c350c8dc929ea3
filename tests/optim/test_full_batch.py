"""L-BFGS and nonlinear CG (minitrain/optim/lbfgs.py, cg.py, their strong-Wolfe line search): they reach the
minimizer scipy.optimize.minimize finds on the same objective (Rosenbrock; an L2-regularized logistic regression
on a small table through minitrain's tape), the line search meets the conditions it promises, and step() without
a closure is refused with the reason."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize, rosen, rosen_der

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import ArgumentError
from minitrain.optim.factory import build_optimizer
from minitrain.optim.line_search import strong_wolfe

SCIPY_METHOD = {"lbfgs": "L-BFGS-B", "cg": "CG"}
# scipy run to convergence: L-BFGS-B also stops on a relative change of f (ftol 2.2e-9 by default)
SCIPY_OPTIONS = {"lbfgs": {"gtol": 1e-10, "ftol": 1e-15}, "cg": {"gtol": 1e-10}}


class Param:
    def __init__(self, data: np.ndarray) -> None:
        self.data, self.grad = data, np.zeros_like(data)


@pytest.mark.parametrize("name", ["lbfgs", "cg"])
def test_rosenbrock_reaches_scipys_minimizer(name):
    start = np.array([-1.2, 1.0, -0.5])
    x = Param(start.copy())
    opt = build_optimizer(name, [("x", x)])

    def closure():
        x.grad[...] = rosen_der(x.data)
        return rosen(x.data)

    for _ in range(45 if name == "lbfgs" else 50):
        opt.step(closure)
    reference = minimize(rosen, start, jac=rosen_der, method=SCIPY_METHOD[name], options=SCIPY_OPTIONS[name]).x
    np.testing.assert_allclose(x.data, reference, atol=1e-6)
    np.testing.assert_allclose(x.data, np.ones(3), atol=1e-6)  # and that is Rosenbrock's known minimum


def table(rows: int = 60, features: int = 4, classes: int = 3):
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(rows, features))
    labels = np.argmax(inputs @ rng.normal(size=(features, classes)) + rng.normal(size=(rows, classes)), axis=1)
    return inputs, labels


def logistic_objective(theta, inputs, labels, classes, wd):
    """Mean cross-entropy of softmax(X W) plus ½·wd·‖W‖², in float64 NumPy: scipy's side. (No bias: weight decay
    leaves 1-D parameters alone, and a softmax's bias without it has no unique minimizer.)"""
    logits = inputs @ theta.reshape(inputs.shape[1], classes)
    logits -= logits.max(axis=1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    p = np.exp(log_p)
    p[np.arange(len(labels)), labels] -= 1
    grad = (inputs.T @ p).ravel() / len(labels) + wd * theta
    return -log_p[np.arange(len(labels)), labels].mean() + 0.5 * wd * theta @ theta, grad


@pytest.mark.parametrize("name", ["lbfgs", "cg"])
def test_logistic_regression_on_a_table_matches_scipy(name):
    inputs, labels = table()
    wd, classes = 0.05, 3
    # float64: a float32 loss resolves F to ~1e-8, so the minimizer only to ~1e-4 (the float32 table run of
    # tests/training/test_full_batch_run.py checks that path)
    w = Tensor(np.zeros((4, classes)), dtype=np.float64, requires_grad=True)
    opt = build_optimizer(name, [("w", w)], weight_decay=wd)
    x = Tensor(inputs, dtype=np.float64)

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(x @ w, labels)
        loss.backward()
        return loss.item()

    for _ in range(25):
        opt.step(closure)
    result = minimize(logistic_objective, np.zeros(4 * classes), args=(inputs, labels, classes, wd),
                      jac=True, method=SCIPY_METHOD[name], options=SCIPY_OPTIONS[name])
    ours = w.data.ravel()
    np.testing.assert_allclose(ours, result.x, atol=1e-6)
    assert logistic_objective(ours, inputs, labels, classes, wd)[0] == pytest.approx(result.fun, abs=1e-12)


def test_the_line_search_returns_a_strong_wolfe_step():
    # f(x) = x⁴ − 3x from x = 0 along d = 1, a trial step far too long: it must bracket and zoom.
    objective = lambda x: (float(x[0] ** 4 - 3 * x[0]), np.array([4 * x[0] ** 3 - 3]))  # noqa: E731
    x0, d = np.zeros(1), np.ones(1)
    f0, g0 = objective(x0)
    t, f, g = strong_wolfe(objective, x0, f0, g0, d, t=10.0, c1=1e-4, c2=0.1)
    assert f <= f0 + 1e-4 * t * (g0 @ d)
    assert abs(g @ d) <= 0.1 * abs(g0 @ d)
    assert (f, g) == objective(x0 + t * d)


def test_a_line_search_that_finds_no_decrease_does_not_move():
    # A flat f whose gradient still claims descent (what rounding looks like near a minimum): no step decreases f
    # enough, so the search returns t = 0 and the starting point, without dividing by a zero-width bracket.
    g0 = np.array([-1.0])
    t, f, g = strong_wolfe(lambda x: (1.0, g0), np.zeros(1), 1.0, g0, np.ones(1), t=1.0)
    assert (t, f) == (0.0, 1.0) and g is g0


def test_a_step_without_a_closure_is_refused_with_the_reason():
    opt = build_optimizer("lbfgs", [("x", Param(np.zeros(2)))])
    with pytest.raises(ArgumentError, match=r"optimizer\.type: lbfgs needs step\(closure\)"):
        opt.step()
    with pytest.raises(ArgumentError, match=r"optimizer\.history_size"):
        build_optimizer("lbfgs", [("x", Param(np.zeros(2)))], history_size=0)
