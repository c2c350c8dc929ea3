"""Learning-rate schedules at their boundaries, against the formulas written out by hand."""

import json
import math

import numpy as np
import pytest

from minitrain.common.errors import UserError
from minitrain.optim import SGD
from minitrain.optim.schedule import SCHEDULES, build_scheduler

LAB01 = dict(lr_max=3e-4, lr_min=3e-5, warmup_steps=100, total_steps=2000)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (0, 3e-4 * 1 / 100),  # first warm-up step is lr_max/warmup, not 0
        (49, 3e-4 * 50 / 100),
        (99, 3e-4),  # last warm-up step reaches lr_max
        (100, 3e-4),  # cosine starts at its top: cos(0) = 1
        (1050, 3e-5 + 0.5 * (3e-4 - 3e-5)),  # half-way through the cosine
        (1999, 3e-5 + 0.5 * (3e-4 - 3e-5) * (1 + math.cos(math.pi * 1899 / 1900))),
        (2000, 3e-5),
        (2001, 3e-5),
        (10**6, 3e-5),
    ],
)
def test_warmup_cosine_lab01_boundaries(step, expected):
    assert build_scheduler("warmup_cosine", **LAB01).lr_at(step) == pytest.approx(expected, rel=1e-12)


def test_warmup_cosine_shape():
    sched = build_scheduler("warmup_cosine", **LAB01)
    lrs = np.array([sched.lr_at(s) for s in range(2100)])
    assert np.all(np.diff(lrs[:100]) > 0)  # rising during warm-up
    assert np.all(np.diff(lrs[100:2001]) < 0)  # falling during the cosine
    assert lrs.max() == pytest.approx(3e-4) and lrs[100:].min() == pytest.approx(3e-5)
    no_warmup = build_scheduler("warmup_cosine", lr_max=1.0, total_steps=10)
    assert no_warmup.lr_at(0) == 1.0 and no_warmup.lr_at(5) == pytest.approx(0.5) and no_warmup.lr_at(10) == 0.0


def test_step_advances_and_drives_the_optimizer():
    param = type("P", (), {"data": np.zeros(2, np.float32), "grad": np.zeros(2, np.float32)})()
    opt = SGD([("w", param)], lr=1.0)
    sched = build_scheduler("warmup_cosine", optimizer=opt, **LAB01)
    assert opt.lr == sched.lr == pytest.approx(3e-6)  # set at construction, for step 0
    seen = []
    for _ in range(150):
        seen.append(opt.lr)
        sched.step()
    assert seen == [sched.lr_at(s) for s in range(150)]
    assert sched.step_count == 150 and opt.lr == sched.lr_at(150)


def test_other_shapes_by_hand():
    constant = build_scheduler("constant", lr_max=0.1, warmup_steps=4)
    assert [constant.lr_at(s) for s in (0, 3, 4, 1000)] == pytest.approx([0.025, 0.1, 0.1, 0.1])

    linear = build_scheduler("linear", lr_max=1.0, lr_min=0.2, warmup_steps=2, total_steps=12)
    assert [linear.lr_at(s) for s in (0, 1, 2, 7, 11, 12, 50)] == pytest.approx([0.5, 1.0, 1.0, 0.6, 0.28, 0.2, 0.2])

    step = build_scheduler("step", lr_max=1.0, step_size=3, gamma=0.5, warmup_steps=1)
    assert [step.lr_at(s) for s in (0, 1, 3, 4, 6, 7)] == pytest.approx([1.0, 1.0, 1.0, 0.5, 0.5, 0.25])

    exponential = build_scheduler("exponential", lr_max=1.0, gamma=0.5, lr_min=0.1)
    assert [exponential.lr_at(s) for s in (0, 1, 3, 4, 100)] == pytest.approx([1.0, 0.5, 0.125, 0.1, 0.1])


def test_one_cycle_matches_torch_formula():
    sched = build_scheduler(
        "one_cycle", lr_max=1.0, total_steps=100, pct_start=0.3, div_factor=25, final_div_factor=1e4
    )
    start, end, peak = 1.0 / 25, 1.0 / 25 / 1e4, 0.3 * 100 - 1
    assert sched.lr_at(0) == pytest.approx(start)
    assert sched.lr_at(15) == pytest.approx(1.0 + 0.5 * (start - 1.0) * (1 + math.cos(math.pi * 15 / peak)))
    assert sched.lr_at(29) == pytest.approx(1.0)
    assert sched.lr_at(64) == pytest.approx(end + 0.5 * (1.0 - end) * (1 + math.cos(math.pi * 35 / (99 - peak))))
    assert sched.lr_at(99) == pytest.approx(end) and sched.lr_at(150) == pytest.approx(end)


def test_plateau_cuts_after_patience_and_respects_cooldown():
    sched = build_scheduler("plateau", lr_max=1.0, factor=0.5, patience=2, cooldown=1, threshold=0.01, warmup_steps=2)
    assert sched.lr_at(0) == 0.5 and sched.lr_at(1) == 1.0
    lrs = []
    # 0.995 is not 1% better than 1.0: counts as a bad report.
    for metric in [1.0, 0.995, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 0.5]:
        sched.step(metric=metric)
        lrs.append(sched.lr)
    # bad reports: 1, 2, 3 > patience → cut (0.5), cooldown swallows the next, then 1, 2, 3 → cut (0.25)
    assert lrs == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25]
    steps_without_metric = build_scheduler("plateau", lr_max=1.0, patience=0)
    for _ in range(5):
        steps_without_metric.step()
    assert steps_without_metric.lr == 1.0  # no metric, no cut

    maximise = build_scheduler("plateau", lr_max=1.0, factor=0.1, patience=0, mode="max", lr_min=0.05)
    for metric in (0.5, 0.6, 0.6, 0.6):
        maximise.step(metric=metric)
    assert maximise.lr == 0.05  # cut twice, floored at lr_min


@pytest.mark.parametrize("kind", sorted(SCHEDULES))
def test_state_dict_round_trip_through_json(kind):
    keys = {
        "warmup_cosine": LAB01,
        "linear": LAB01,
        "constant": {"lr_max": 0.1, "warmup_steps": 3},
        "step": {"lr_max": 0.1, "step_size": 2},
        "exponential": {"lr_max": 0.1, "gamma": 0.9},
        "plateau": {"lr_max": 0.1, "patience": 1},
        "one_cycle": {"lr_max": 0.1, "total_steps": 50},
    }[kind]
    a = build_scheduler(kind, **keys)
    for i in range(7):
        a.step(metric=1.0 + i % 2)
    b = build_scheduler(kind, **keys)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    for i in range(6):
        assert b.lr == a.lr
        a.step(metric=3.0 - i)
        b.step(metric=3.0 - i)
    assert b.state_dict() == a.state_dict() and b.state_dict()["step"] == 13


def test_bad_state_is_a_user_error():
    sched = build_scheduler("plateau", lr_max=0.1)
    with pytest.raises(UserError, match="scheduler state: missing 'level'"):
        sched.load_state_dict({"type": "plateau", "step": 3})
    with pytest.raises(UserError, match="saved by 'constant', cannot load into 'plateau'"):
        sched.load_state_dict({**sched.state_dict(), "type": "constant"})


@pytest.mark.parametrize(
    ("kind", "keys", "message"),
    [
        ("cosine", {"lr_max": 1.0}, "scheduler.type: unknown schedule 'cosine'"),
        ("warmup_cosine", {**LAB01, "lr_mx": 1.0}, r"scheduler.lr_mx: not a key of warmup_cosine \(valid: lr_max"),
        ("warmup_cosine", {"lr_max": 1.0, "warmup_steps": 10}, "scheduler.total_steps: required by warmup_cosine"),
        # one_cycle rises from lr_max/div_factor: the shared warm-up start is not one of its keys
        ("one_cycle", {"lr_max": 1.0, "total_steps": 10, "warmup_start_lr": 0.1}, "warmup_start_lr: not a key of"),
        ("step", {"lr_max": 1.0, "step_size": 5, "lr_min": 0.1}, "scheduler.lr_min: not a key of step"),
    ],
)
def test_unknown_types_and_keys_are_user_errors(kind, keys, message):
    with pytest.raises(UserError, match=message) as info:
        build_scheduler(kind, **keys)
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("kind", "keys", "message"),
    [
        ("warmup_cosine", {**LAB01, "warmup_steps": 2000}, r"scheduler.total_steps: must be an integer > warmup_steps"),
        ("linear", {**LAB01, "lr_min": 1.0}, r"scheduler.lr_min: must be in \[0, lr_max=0.0003\]"),
        ("one_cycle", {"lr_max": 1.0, "total_steps": 10, "warmup_steps": 2}, "scheduler.warmup_steps: must be 0"),
        ("step", {"lr_max": 1.0, "step_size": 0}, "scheduler.step_size: must be an integer >= 1"),
        ("plateau", {"lr_max": 1.0, "mode": "mean"}, "scheduler.mode: must be 'min' or 'max'"),
        ("constant", {"lr_max": 0.0}, "scheduler.lr_max: must be > 0"),
        ("constant", {"lr_max": 1.0, "warmup_start_lr": 2.0}, r"scheduler.warmup_start_lr: must be in \[0, lr_max=1.0"),
        ("exponential", {"lr_max": 1.0, "gamma": 0.5, "lr_min": -0.1}, r"scheduler.lr_min: must be in \[0, lr_max"),
        ("plateau", {"lr_max": 1.0, "lr_min": 1.5}, r"scheduler.lr_min: must be in \[0, lr_max"),
    ],
)
def test_bad_values_are_value_errors(kind, keys, message):
    with pytest.raises(ValueError, match=message):
        build_scheduler(kind, **keys)


@pytest.mark.parametrize("kind", list(SCHEDULES))
def test_integer_keys_give_float_learning_rates(kind):
    # lr_max=1 and warmup_start_lr=0 as ints: every lr and every stored float is still a float (the logs print 1.0)
    keys = {"total_steps": 10, "step_size": 3, "gamma": 1}
    accepted = {k: v for k, v in keys.items() if k in SCHEDULES[kind].__dataclass_fields__}
    schedule = build_scheduler(kind, lr_max=1, **accepted)
    assert isinstance(schedule.lr_max, float) and isinstance(schedule.warmup_start_lr, float)
    for _ in range(5):
        assert type(schedule.lr) is float
        schedule.step()


def torch_linear_lr(base_lr: float, start_factor: float, total_iters: int, step: int) -> float:
    """torch.optim.lr_scheduler.LinearLR's closed form (end_factor 1): the lr of step `step`."""
    return base_lr * (start_factor + (1.0 - start_factor) * min(total_iters, step) / total_iters)


def test_warmup_can_start_from_a_given_lr():
    # the spec's warmup.start_lr: torch's LinearLR(start_factor=start_lr/lr_max, total_iters=warmup_steps), then
    # the cosine from its milestone (SequentialLR): step 0 trains at start_lr, step warmup_steps at lr_max
    for start, lr_max, warmup in ((1e-5, 3e-4, 100), (1e-7, 1e-3, 10)):
        sched = build_scheduler("warmup_cosine", lr_max=lr_max, warmup_steps=warmup, total_steps=200,
                                warmup_start_lr=start)
        expected = [torch_linear_lr(lr_max, start / lr_max, warmup, s) for s in range(warmup + 1)]
        assert [sched.lr_at(s) for s in range(warmup + 1)] == pytest.approx(expected, rel=1e-12)
        assert sched.lr_at(0) == pytest.approx(start, rel=1e-12)
    # start 0 is lab 01's warm-up bit for bit: lr_max · (s + 1) / warmup_steps
    plain = build_scheduler("warmup_cosine", **LAB01, warmup_start_lr=0.0)
    assert [plain.lr_at(s) for s in range(100)] == [3e-4 * (s + 1) / 100 for s in range(100)]
    with pytest.raises(ValueError, match="warmup_start_lr"):
        build_scheduler("constant", lr_max=1e-3, warmup_steps=4, warmup_start_lr=1e-2)


def test_decay_steps_ends_the_cosine_before_the_run_does():
    # T_max of the spec: the cosine spans 400 steps after the warm-up, then the lr stays at lr_min.
    sched = build_scheduler("warmup_cosine", **LAB01, decay_steps=400)
    assert sched.lr_at(300) == pytest.approx(3e-5 + 0.5 * (3e-4 - 3e-5), rel=1e-12)
    assert sched.lr_at(500) == pytest.approx(3e-5) and sched.lr_at(1999) == pytest.approx(3e-5)
    linear = build_scheduler("linear", lr_max=1.0, total_steps=100, decay_steps=10)
    assert [linear.lr_at(s) for s in (0, 5, 10, 99)] == pytest.approx([1.0, 0.5, 0.0, 0.0])


def test_one_cycle_decays_to_lr_min_when_given():
    # optimizer.lr_min used to be ignored: a run ended at 4e-8, below a floor of 1e-4.
    sched = build_scheduler("one_cycle", lr_max=1e-3, total_steps=100, lr_min=1e-4)
    assert sched.lr_at(99) == pytest.approx(1e-4, rel=1e-12)
    assert min(sched.lr_at(s) for s in range(29, 100)) == pytest.approx(1e-4, rel=1e-12)
    torch_end = build_scheduler("one_cycle", lr_max=1e-3, total_steps=100)
    assert torch_end.lr_at(99) == pytest.approx(1e-3 / 25 / 1e4, rel=1e-12)


def test_one_cycle_linear_annealing_is_straight_lines():
    sched = build_scheduler("one_cycle", lr_max=1.0, total_steps=101, pct_start=0.5, div_factor=10,
                            final_div_factor=10, anneal_strategy="linear")
    peak = 0.5 * 101 - 1  # torch's (fractional) last step of the rise
    assert sched.lr_at(0) == pytest.approx(0.1) and sched.lr_at(25) == pytest.approx(0.1 + 0.9 * 25 / peak)
    assert sched.lr_at(100) == pytest.approx(0.01)
    assert sched.lr_at(75) == pytest.approx(1.0 + (0.01 - 1.0) * (75 - peak) / (100 - peak))
