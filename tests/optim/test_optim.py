"""Optimizers against the torch.optim formulas evaluated independently in float64, plus layout and state I/O."""

import json

import numpy as np
import pytest
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

import minitrain.autograd.kernels.adamw_update as adamw_module
from minitrain.autograd import kernels
from minitrain.autograd.parameters import ParameterBuffer
from minitrain.common.errors import UserError
from minitrain.common.registry import keyword_defaults
from minitrain.optim import OPTIMIZERS, AdamW, Optimizer, build_optimizer
from minitrain.optim.groups import Setting, resolve_settings

STEPS = 3


class Param:
    """The optimizer's view of a parameter: `.data` and `.grad` (minitrain's Tensor has the same two)."""

    def __init__(self, data, grad=None):
        self.data, self.grad = data, grad


def _init():
    """A (2,3) weight (decays by default), a (3,) bias and a (3,) LayerNorm gain (do not), in float64."""
    rng = np.random.default_rng(0)
    return {
        "layer.weight": rng.standard_normal((2, 3)),
        "layer.bias": rng.standard_normal(3),
        "ln.weight": 1.0 + 0.1 * rng.standard_normal(3),
    }


def _grads(step):
    """Deterministic gradients for step 1, 2, 3, ..."""
    rng = np.random.default_rng(100 + step)
    return {name: rng.standard_normal(a.shape) for name, a in _init().items()}


def _own_params():
    return [(n, Param(a.astype(np.float32), np.zeros(a.shape, np.float32))) for n, a in _init().items()]


def _run(opt_type, steps=STEPS, **keys):
    """Run `steps` optimizer steps on own-array parameters; return {name: float32 result}."""
    params = _own_params()
    opt = build_optimizer(opt_type, params, **keys)
    for t in range(1, steps + 1):
        for name, p in params:
            p.grad[...] = _grads(t)[name]
        opt.step()
    return {name: p.data for name, p in params}


def _expect(rule, wd_on_matrices, steps=STEPS):
    """Apply `rule(p, g, state, t, wd)` in float64 to each parameter; wd only where ndim >= 2."""
    out = {}
    for name, p in _init().items():
        p, state = p.copy(), {}
        for t in range(1, steps + 1):
            wd = wd_on_matrices if p.ndim >= 2 else 0.0
            p = rule(p, _grads(t)[name].astype(np.float32).astype(np.float64), state, t, wd)
        out[name] = p
    return out


def _assert_close(got, expected, rtol=2e-5, atol=2e-6):
    assert got.keys() == expected.keys()
    for name in got:
        np.testing.assert_allclose(got[name], expected[name], rtol=rtol, atol=atol, err_msg=name)


# ----------------------------------------------------------------------------------- formulas, float64
def _adam_rule(lr, b1, b2, eps, decoupled, amsgrad=False):
    def rule(p, g, s, t, wd):
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        # AMSGrad (torch's amsgrad=True) divides by the largest second moment seen so far
        s["v_max"] = np.maximum(s.get("v_max", 0.0), s["v"]) if amsgrad else s["v"]
        m_hat, v_hat = s["m"] / (1 - b1**t), s["v_max"] / (1 - b2**t)
        return p - lr * m_hat / (np.sqrt(v_hat) + eps)

    return rule


def test_adamw_three_steps_by_hand():
    keys = dict(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)
    _assert_close(_run("adamw", **keys), _expect(_adam_rule(1e-2, 0.9, 0.95, 1e-8, True), 0.1))


def test_adam_folds_decay_into_the_gradient():
    keys = dict(lr=1e-2, beta1=0.8, beta2=0.99, eps=1e-8, weight_decay=0.5)
    _assert_close(_run("adam", **keys), _expect(_adam_rule(1e-2, 0.8, 0.99, 1e-8, False), 0.5))


@pytest.mark.parametrize(("opt_type", "decoupled"), [("adamw", True), ("adam", False)])
def test_amsgrad_five_steps_by_hand(opt_type, decoupled):
    # Five steps with beta2 0.5: the second moment falls for some elements, so v_max and v part ways.
    keys = dict(lr=1e-2, beta1=0.9, beta2=0.5, eps=1e-8, weight_decay=0.1, amsgrad=True)
    got = _run(opt_type, steps=5, **keys)
    _assert_close(got, _expect(_adam_rule(1e-2, 0.9, 0.5, 1e-8, decoupled, amsgrad=True), 0.1, steps=5))
    plain = _run(opt_type, steps=5, **{**keys, "amsgrad": False})
    assert any(not np.allclose(got[n], plain[n], rtol=1e-4) for n in got)  # AMSGrad did change the result


def test_amsgrad_state_round_trips_and_is_absent_without_it():
    params = _own_params()
    opt = build_optimizer("adamw", params, amsgrad=True)
    for name, p in params:
        p.grad[...] = _grads(1)[name]
    opt.step()
    state = opt.state_dict()
    assert {key.split(".")[0] for key in state["buffers"]} == {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    fresh = build_optimizer("adamw", _own_params(), amsgrad=True)
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh.state["max_exp_avg_sq"], opt.state["max_exp_avg_sq"])
    plain = build_optimizer("adamw", _own_params())
    assert "max_exp_avg_sq" not in plain.state


@pytest.mark.parametrize(
    ("momentum", "dampening", "nesterov", "wd"),
    [(0.0, 0.0, False, 0.0), (0.9, 0.0, False, 0.1), (0.9, 0.0, True, 0.1), (0.5, 0.3, False, 0.0)],
)
def test_sgd_three_steps_by_hand(momentum, dampening, nesterov, wd):
    lr = 0.1

    def rule(p, g, s, t, wd):
        g = g + wd * p
        if momentum:
            s["b"] = g.copy() if t == 1 else momentum * s["b"] + (1 - dampening) * g
            g = g + momentum * s["b"] if nesterov else s["b"]
        return p - lr * g

    keys = dict(lr=lr, momentum=momentum, dampening=dampening, nesterov=nesterov, weight_decay=wd)
    _assert_close(_run("sgd", **keys), _expect(rule, wd))


@pytest.mark.parametrize(("centered", "momentum", "wd"), [(False, 0.0, 0.0), (True, 0.0, 0.1), (True, 0.9, 0.1)])
def test_rmsprop_three_steps_by_hand(centered, momentum, wd):
    lr, alpha, eps = 1e-2, 0.9, 1e-8

    def rule(p, g, s, t, wd):
        g = g + wd * p
        s["sq"] = alpha * s.get("sq", 0.0) + (1 - alpha) * g * g
        if centered:
            s["avg"] = alpha * s.get("avg", 0.0) + (1 - alpha) * g
            denom = np.sqrt(s["sq"] - s["avg"] ** 2) + eps
        else:
            denom = np.sqrt(s["sq"]) + eps
        if momentum:
            s["b"] = momentum * s.get("b", 0.0) + g / denom
            return p - lr * s["b"]
        return p - lr * g / denom

    keys = dict(lr=lr, alpha=alpha, eps=eps, centered=centered, momentum=momentum, weight_decay=wd)
    # centered: √(s − a²) loses relative precision in float32 when s ≈ a², hence the looser bound
    _assert_close(_run("rmsprop", **keys), _expect(rule, wd), rtol=1e-4, atol=1e-5)


def test_adagrad_three_steps_by_hand():
    lr, lr_decay, init, eps, wd = 0.1, 0.5, 0.2, 1e-10, 0.1

    def rule(p, g, s, t, wd):
        g = g + wd * p
        s["sum"] = s.get("sum", init) + g * g
        return p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s["sum"]) + eps)

    keys = dict(lr=lr, lr_decay=lr_decay, initial_accumulator_value=init, eps=eps, weight_decay=wd)
    _assert_close(_run("adagrad", **keys), _expect(rule, wd))


def test_lamb_three_steps_by_hand():
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-6, 0.1

    def rule(p, g, s, t, wd):
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        r = (s["m"] / (1 - b1**t)) / (np.sqrt(s["v"] / (1 - b2**t)) + eps) + wd * p
        trust = np.linalg.norm(p) / np.linalg.norm(r)
        return p - lr * trust * r

    keys = dict(lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd)
    _assert_close(_run("lamb", **keys), _expect(rule, wd))


def test_lamb_trust_ratio_is_one_for_a_zero_parameter():
    p = Param(np.zeros(4, np.float32), np.array([1.0, -2.0, 3.0, -4.0], np.float32))
    build_optimizer("lamb", [("bias", p)], lr=0.1).step()
    # m̂/(√v̂+ε) = sign(g)·(1 − tiny) on step 1; trust 1 because ‖p‖ = 0.
    np.testing.assert_allclose(p.data, -0.1 * np.sign([1.0, -2.0, 3.0, -4.0]), rtol=1e-5)


# ------------------------------------------------------------------------------- weight-decay groups
def test_decay_only_on_matrices_by_default():
    params = _own_params()
    opt = AdamW(params, lr=0.1, weight_decay=0.5)
    for _ in range(2):
        opt.step()  # zero gradients: only the decay moves anything
    init = _init()
    for name, p in params:
        factor = (1 - 0.1 * 0.5) ** 2 if init[name].ndim >= 2 else 1.0
        np.testing.assert_allclose(p.data, init[name] * factor, rtol=1e-6, err_msg=name)


def test_group_rules_override_lr_and_decay_by_pattern():
    lr, wd = 1e-2, 0.1
    rules = [{"pattern": "layer.*", "lr_scale": 0.5, "weight_decay": 0.0}, {"pattern": "ln.*", "weight_decay": 0.3}]
    got = _run("adamw", lr=lr, weight_decay=wd, groups=rules)
    half = _expect(_adam_rule(lr * 0.5, 0.9, 0.999, 1e-8, True), 0.0)
    ln = {}
    p, state = _init()["ln.weight"], {}
    for t in range(1, STEPS + 1):
        p = _adam_rule(lr, 0.9, 0.999, 1e-8, True)(p, _grads(t)["ln.weight"].astype(np.float32), state, t, 0.3)
    ln["ln.weight"] = p
    _assert_close(got, {"layer.weight": half["layer.weight"], "layer.bias": half["layer.bias"], **ln})


def test_first_matching_rule_wins_and_sets_only_its_keys():
    shapes = {name: a.shape for name, a in _init().items()}
    rules = [{"pattern": "layer.bias", "lr_scale": 2.0}, {"pattern": "layer.*", "lr_scale": 0.5, "weight_decay": 0.0}]
    assert resolve_settings(shapes, 0.1, rules) == {
        "layer.weight": Setting(0.5, 0.0),
        "layer.bias": Setting(2.0, 0.0),  # keeps the default no-decay of a 1-D parameter
        "ln.weight": Setting(1.0, 0.0),
    }


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([{"pattern": "encoder.*"}], r"groups\[0\].pattern: 'encoder.\*' matches no parameter"),
        ([{"pattern": "layer.*", "lr_scal": 0.5}], r"groups\[0\].lr_scal: unknown key"),
        ([{"lr_scale": 0.5}], r"groups\[0\].pattern: required"),
        ([{"pattern": "ln.*", "weight_decay": -1}], r"groups\[0\].weight_decay: must be a number >= 0"),
    ],
)
def test_bad_group_rules_are_value_errors(rules, message):
    with pytest.raises(ValueError, match=message):
        AdamW(_own_params(), groups=rules)


def _step(opt, params, t):
    """opt.step() on the gradients already fed; a full-batch optimizer (L-BFGS, CG) gets the closure of the
    objective ½‖p‖² + _grads(t)·p instead, whose gradient p + _grads(t) it re-evaluates along its line search."""
    if not opt.full_batch:
        opt.step()
        return

    def closure():
        loss = 0.0
        for name, p in params:
            g = _grads(t)[name]
            p.grad[...] = p.data + g
            loss += float(0.5 * np.sum(np.square(p.data, dtype=np.float64)) + np.sum(g * p.data, dtype=np.float64))
        return loss

    opt.step(closure)


# ---------------------------------------------------------------------------------- flat-buffer path
def _flat_params():
    buffer = ParameterBuffer(list(_init().items()))
    return buffer, [(name, Param(*buffer.views(name))) for name in _init()]


@pytest.mark.parametrize("opt_type", sorted(OPTIMIZERS))
@pytest.mark.parametrize("rules", [None, [{"pattern": "layer.bias", "lr_scale": 2.0, "weight_decay": 0.05}]])
def test_flat_buffer_path_equals_per_parameter_path(opt_type, rules):
    keys = {"lr": 1e-2, "weight_decay": 0.1, "groups": rules}
    if opt_type == "sgd":
        keys["momentum"] = 0.9
    own = _own_params()
    buffer, flat = _flat_params()
    opt_own = build_optimizer(opt_type, own, **keys)
    opt_flat = build_optimizer(opt_type, flat, buffer=buffer, **keys)
    for t in range(1, 5):
        opt_own.zero_grad()
        opt_flat.zero_grad()
        for (name, p), (_, q) in zip(own, flat, strict=True):
            p.grad += _grads(t)[name]
            q.grad += _grads(t)[name]
        _step(opt_own, own, t)
        _step(opt_flat, flat, t)
    for (name, p), (_, q) in zip(own, flat, strict=True):
        np.testing.assert_allclose(q.data, p.data, rtol=1e-6, atol=1e-7, err_msg=name)
        assert np.shares_memory(q.data, buffer.data)


@pytest.mark.parametrize(("backend", "chosen"), [("numba", "adamw_update_numba"), ("numpy", "adamw_update_reference")])
def test_adamw_on_a_buffer_is_one_kernel_call_per_decay_group(monkeypatch, backend, chosen):
    calls = []

    def counting(name, original):
        def wrapper(param, *rest):
            calls.append((name, param.size))
            original(param, *rest)

        return wrapper

    for name in ("adamw_update_numba", "adamw_update_reference"):
        monkeypatch.setattr(adamw_module, name, counting(name, getattr(adamw_module, name)))
    buffer, flat = _flat_params()
    opt = AdamW(flat, weight_decay=0.1, buffer=buffer)
    with kernels.use_backend(backend):
        opt.step()
    assert calls == [(chosen, buffer.decay_slice.stop), (chosen, buffer.size - buffer.decay_slice.stop)]


def test_rebinding_a_buffer_parameter_is_caught():
    buffer, flat = _flat_params()
    opt = AdamW(flat, buffer=buffer)
    flat[0][1].grad = np.ones((2, 3), np.float32)
    with pytest.raises(RuntimeError, match=r"layer.weight: its data/grad is no longer the ParameterBuffer.s view"):
        opt.step()


def test_zero_grad_and_set_lr():
    params = _own_params()
    opt = build_optimizer("sgd", params, lr=1.0)
    for name, p in params:
        p.grad[...] = _grads(1)[name]
    opt.set_lr(0.25)
    assert opt.lr == 0.25
    opt.step()
    for name, p in params:
        np.testing.assert_allclose(p.data, _init()[name] - 0.25 * _grads(1)[name], rtol=1e-6)
    opt.zero_grad()
    assert all(not p.grad.any() for _, p in params)


# ------------------------------------------------------------------------------------- state I/O
@pytest.mark.parametrize("opt_type", sorted(OPTIMIZERS))
def test_state_dict_round_trip_continues_identically(opt_type):
    keys = {"momentum": 0.9} if opt_type in ("sgd", "rmsprop") else {}
    a_params = _own_params()
    a = build_optimizer(opt_type, a_params, lr=1e-2, **keys)

    def feed(params, t):
        for name, p in params:
            p.grad[...] = _grads(t)[name]

    for t in (1, 2):
        feed(a_params, t)
        _step(a, a_params, t)
    state = a.state_dict()
    # What a checkpoint does: arrays into safetensors, the rest into JSON.
    scalars = json.loads(json.dumps({k: v for k, v in state.items() if k != "buffers"}))
    buffers = st_load(st_save(state["buffers"]))
    assert scalars == {"type": opt_type, "step": 2, "lr": 1e-2}

    b_params = [(name, Param(p.data.copy(), np.zeros_like(p.grad))) for name, p in a_params]
    b = build_optimizer(opt_type, b_params, lr=1.0, **keys)  # lr comes back from the state
    b.load_state_dict({**scalars, "buffers": buffers})
    for t in (3, 4):
        feed(a_params, t)
        feed(b_params, t)
        _step(a, a_params, t)
        _step(b, b_params, t)
    for (name, p), (_, q) in zip(a_params, b_params, strict=True):
        np.testing.assert_array_equal(q.data, p.data, err_msg=name)


def test_state_dict_names_and_shapes():
    opt = AdamW(_own_params())
    buffers = opt.state_dict()["buffers"]
    assert sorted(buffers) == sorted(f"{k}.{n}" for k in ("exp_avg", "exp_avg_sq") for n in _init())
    assert buffers["exp_avg.layer.weight"].shape == (2, 3) and buffers["exp_avg.layer.weight"].dtype == np.float32


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s["buffers"].pop("exp_avg_sq.ln.weight"), "missing buffer 'exp_avg_sq.ln.weight'"),
        (
            lambda s: s["buffers"].__setitem__("exp_avg.layer.weight", np.zeros((3, 2), np.float32)),
            r"buffer 'exp_avg.layer.weight' has shape \[3, 2\], expected \[2, 3\]",
        ),
        (lambda s: s["buffers"].__setitem__("exp_avg.extra", np.zeros(1)), r"unexpected buffer\(s\) exp_avg.extra"),
        (lambda s: s.__setitem__("type", "sgd"), "saved by 'sgd', cannot load into 'adamw'"),
        (lambda s: s.pop("step"), "missing 'step'"),
    ],
)
def test_bad_state_is_a_user_error_and_changes_nothing(change, message):
    params = _own_params()
    opt = AdamW(params)
    opt.step()
    state = opt.state_dict()
    change(state)
    fresh = AdamW(_own_params())
    with pytest.raises(UserError, match=message):
        fresh.load_state_dict(state)
    assert fresh.step_count == 0 and not any(a.any() for a in fresh.state.values())


# ---------------------------------------------------------------------------------------- factory
def test_build_optimizer_rejects_unknown_type_and_keys():
    with pytest.raises(UserError, match=r"optimizer.type: unknown optimizer .adamx."):
        build_optimizer("adamx", _own_params())
    with pytest.raises(UserError, match=r"optimizer.momentum: not a key of adamw \(valid: lr, beta1"):
        build_optimizer("adamw", _own_params(), momentum=0.9)
    assert list(keyword_defaults(OPTIMIZERS["sgd"], skip=("named_params",))) == [
        "lr", "momentum", "dampening", "nesterov", "weight_decay", "groups", "buffer", "betas"]


@pytest.mark.parametrize(
    ("opt_type", "keys", "message"),
    [
        ("adamw", {"lr": 0.0}, r"optimizer.lr: must be in \(0.0, inf\]"),
        ("adamw", {"beta1": 1.0}, r"optimizer.beta1: must be in \[0.0, 1.0\)"),
        ("adam", {"weight_decay": -0.1}, "optimizer.weight_decay"),
        ("sgd", {"nesterov": True}, "optimizer.nesterov: needs momentum > 0 and dampening = 0"),
        ("rmsprop", {"alpha": "0.9"}, "optimizer.alpha: must be in"),
    ],
)
def test_bad_hyperparameters_are_value_errors(opt_type, keys, message):
    with pytest.raises(ValueError, match=message):
        build_optimizer(opt_type, _own_params(), **keys)


@pytest.mark.parametrize("opt_type", list(OPTIMIZERS))
def test_every_float_keyword_is_range_checked_and_stored_as_a_float(opt_type):
    defaults = keyword_defaults(OPTIMIZERS[opt_type], skip=("named_params",))
    floats = [key for key, value in defaults.items() if isinstance(value, float)]
    assert "lr" in floats and "weight_decay" in floats
    for key in floats:
        with pytest.raises(ValueError, match=rf"optimizer.{key}: must be in"):
            build_optimizer(opt_type, _own_params(), **{key: -1.0})
    opt = build_optimizer(opt_type, _own_params(), lr=1, weight_decay=0)  # ints in, floats stored
    assert type(opt.lr) is float and type(opt.weight_decay) is float
    assert opt.state_dict()["lr"] == 1.0 and json.dumps(opt.state_dict()["lr"]) == "1.0"


def test_an_optimizer_is_its_declared_keywords_and_its_rule():
    class HalfStep(Optimizer):
        name = "half_step"
        lr: float = 0.5
        shrink: bool = 0  # stored as a bool
        weight_decay: float = 0.0
        state_names = ("seen",)

        def _update(self, data, grad, state, lr, weight_decay):
            state["seen"] += 1
            data -= lr * grad

    assert list(keyword_defaults(HalfStep, skip=("named_params",))) == [
        "lr", "shrink", "weight_decay", "groups", "buffer", "betas"]
    p = Param(np.ones((2, 2), dtype=np.float32), np.full((2, 2), 2.0, dtype=np.float32))
    opt = HalfStep([("p", p)])
    assert opt.shrink is False and opt.lr == 0.5
    opt.step()
    np.testing.assert_array_equal(p.data, np.zeros((2, 2)))
    np.testing.assert_array_equal(opt.state_dict()["buffers"]["seen.p"], np.ones((2, 2)))
    with pytest.raises(TypeError):
        HalfStep([("p", p)], 0.5, False, 0.0, None)  # groups and buffer are keyword-only
    with pytest.raises(ValueError, match=r"optimizer.lr: must be in \(0.0, inf\]"):
        HalfStep([("p", p)], lr=0.0)
