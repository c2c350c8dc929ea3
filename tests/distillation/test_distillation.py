"""The knowledge-distillation loss (minitrain/distillation/loss.py): its gradient against central differences in
float64, its value against a direct NumPy reading of Hinton et al.'s definition, the teachers' mixture, and the
training task that puts them together on real models (the teachers run without a tape, in eval mode)."""

from __future__ import annotations

import numpy as np
import pytest

from minitrain.autograd import functional as F
from minitrain.autograd.gradcheck import gradcheck
from minitrain.autograd.tensor import Tensor
from minitrain.data.batch import Batch
from minitrain.distillation import distillation_loss, soft_loss, soft_targets
from minitrain.distillation.teacher import Teachers
from minitrain.models.registry import build_model
from minitrain.training.distillation_task import Distillation

V = 7  # vocabulary size of the hand-made examples


def softmax_rows(z: np.ndarray) -> np.ndarray:
    """softmax over the last axis, the textbook way (shifted for safety, nothing else)."""
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def reference_soft(student: np.ndarray, teacher_p: np.ndarray, mask: np.ndarray, t: float) -> float:
    """T² · (1/N) Σ over masked positions of Σ_v p_v (log p_v − log q_v), q = softmax(z_S / T): position by
    position, with plain Python sums."""
    total, n = 0.0, 0
    for pos in zip(*np.nonzero(mask), strict=True):
        p, q = teacher_p[pos], softmax_rows(student[pos] / t)
        total += sum(float(p[v] * (np.log(p[v]) - np.log(q[v]))) for v in range(V) if p[v] > 0)
        n += 1
    return t * t * total / n


@pytest.fixture
def example():
    rng = np.random.default_rng(0)
    student = rng.standard_normal((2, 5, V)) * 2.0
    teachers = [rng.standard_normal((2, 5, V)) * 3.0, rng.standard_normal((2, 5, V))]
    mask = np.array([[0, 1, 1, 1, 0], [1, 1, 0, 0, 0]], dtype=bool)
    return student, teachers, mask


@pytest.mark.parametrize("t", [1.0, 2.0, 4.5])
def test_the_soft_loss_is_t_squared_times_the_mean_kl_over_the_masked_positions(example, t):
    student, teachers, mask = example
    p = softmax_rows(teachers[0] / t)
    got = soft_loss(Tensor(student, dtype=np.float64), p, mask, t).item()
    assert got == pytest.approx(reference_soft(student, p, mask, t), rel=1e-12)
    # Positions outside the mask do not count: changing them changes nothing.
    moved = student.copy()
    moved[~mask] += 100.0
    assert soft_loss(Tensor(moved, dtype=np.float64), p, mask, t).item() == pytest.approx(got, rel=1e-12)


def test_the_soft_loss_is_zero_when_the_student_matches_and_ignores_ids_the_teacher_rules_out(example):
    student, _, mask = example
    t = 2.0
    same = soft_loss(Tensor(student, dtype=np.float64), softmax_rows(student / t), mask, t).item()
    assert abs(same) < 1e-12
    p = softmax_rows(student / t)
    p[..., 0] = 0.0  # a teacher certain that id 0 never comes: 0 · log 0 = 0, no NaN
    p /= p.sum(axis=-1, keepdims=True)
    got = soft_loss(Tensor(student, dtype=np.float64), p, mask, t).item()
    assert np.isfinite(got) and got == pytest.approx(reference_soft(student, p, mask, t), rel=1e-12)


@pytest.mark.parametrize("t", [1.0, 3.0])
def test_the_soft_loss_gradient_matches_central_differences(example, t):
    student, teachers, mask = example
    p = soft_targets(teachers, [0.25, 0.75], t)
    x = Tensor(student, requires_grad=True, dtype=np.float64)
    assert gradcheck(lambda z: soft_loss(z, p, mask, t), [x])
    # and it is the closed form T · (p_S − p_T) · mask / N
    x.zero_grad()
    soft_loss(x, p, mask, t).backward()
    expected = t * (softmax_rows(student / t) - p) * mask[..., None] / mask.sum()
    np.testing.assert_allclose(x.grad, expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
def test_the_whole_kd_loss_gradient_matches_central_differences(example, alpha):
    student, teachers, mask = example
    t = 2.0
    targets = np.argmax(teachers[1], axis=-1)
    p = soft_targets(teachers[:1], [1.0], t)
    x = Tensor(student, requires_grad=True, dtype=np.float64)

    def kd(z):
        return distillation_loss(F.cross_entropy(z, targets, mask), soft_loss(z, p, mask, t), alpha)

    assert gradcheck(kd, [x])
    hard = -np.mean(np.log(softmax_rows(student)[mask, targets[mask]]))
    expected = alpha * hard + (1 - alpha) * reference_soft(student, p, mask, t)
    assert kd(x).item() == pytest.approx(expected, rel=1e-12)


def test_several_teachers_are_mixed_by_weight_and_give_the_gradient_of_the_weighted_kls(example):
    student, teachers, mask = example
    t, weights = 2.0, [0.3, 0.7]
    mixed = soft_targets(teachers, weights, t)
    np.testing.assert_allclose(mixed, 0.3 * softmax_rows(teachers[0] / t) + 0.7 * softmax_rows(teachers[1] / t),
                               rtol=1e-14)
    np.testing.assert_allclose(mixed.sum(axis=-1), 1.0, rtol=1e-14)
    # The module docstring's claim: KL to the mixture and the weighted sum of KLs differ by a constant only.
    x = Tensor(student, requires_grad=True, dtype=np.float64)
    soft_loss(x, mixed, mask, t).backward()
    of_mixture = x.grad.copy()
    x.zero_grad()
    (soft_loss(x, softmax_rows(teachers[0] / t), mask, t) * 0.3
     + soft_loss(x, softmax_rows(teachers[1] / t), mask, t) * 0.7).backward()
    np.testing.assert_allclose(x.grad, of_mixture, rtol=1e-12, atol=1e-15)


def test_a_teacher_of_another_shape_or_an_empty_mask_is_refused(example):
    student, teachers, mask = example
    with pytest.raises(ValueError, match="same vocabulary"):
        soft_loss(Tensor(student), softmax_rows(teachers[0][..., :-1]), mask, 2.0)
    with pytest.raises(ValueError, match="no position"):
        soft_loss(Tensor(student), softmax_rows(teachers[0]), np.zeros_like(mask), 2.0)


# ------------------------------------------------------------------------------------------ on real models


def tiny(seed: int, dropout: float = 0.0, dtype=np.float64):
    config = dict(n_layer=1, n_head=2, d_model=8, d_ff=16, vocab_size=V, max_seq_len=6, dropout=dropout)
    return build_model(config, rng=np.random.default_rng(seed), dtype=dtype)


def batch() -> Batch:
    rng = np.random.default_rng(3)
    ids = rng.integers(0, V, size=(3, 6))
    pad = np.ones((3, 6), dtype=bool)
    pad[2, 4:] = False
    loss = pad.copy()
    loss[:, :2] = False  # as loss_on: answer, only the later positions count
    return Batch(ids, np.roll(ids, -1, axis=1), pad, loss)


def test_the_task_loss_is_alpha_hard_plus_the_soft_loss_of_the_teachers_eval_logits():
    student, teachers = tiny(0), [tiny(1, dropout=0.5), tiny(2, dropout=0.5)]
    b, t, alpha = batch(), 2.0, 0.4
    task = Distillation(Teachers(teachers, [0.5, 0.5], t), alpha)
    got = task.loss(student, b)

    logits, _ = student(b.input, attn_pad_mask=b.attn_pad_mask)
    z = logits.data
    for teacher in teachers:
        teacher.eval()
    p = np.mean([softmax_rows(m(b.input, attn_pad_mask=b.attn_pad_mask)[0].data / t) for m in teachers], axis=0)
    q = softmax_rows(z)
    hard = -np.mean(np.log(q[b.loss_mask, b.target[b.loss_mask]]))
    assert got.item() == pytest.approx(alpha * hard + (1 - alpha) * reference_soft(z, p, b.loss_mask, t),
                                       rel=1e-10)


def test_the_teachers_run_in_eval_mode_without_a_tape_and_get_no_gradient():
    student, teacher = tiny(0), tiny(1, dropout=0.5)
    teacher.train()
    task = Distillation(Teachers([teacher], [1.0], 2.0), 0.5)
    b = batch()
    first = task.teachers.targets(b)
    np.testing.assert_array_equal(first, task.teachers.targets(b))  # no dropout mask drawn: the same twice
    task.loss(student, b).backward()
    assert all(p.grad is None or not np.any(p.grad) for p in teacher.parameters())
    assert any(np.any(p.grad) for p in student.parameters())
    assert teacher.training  # its mode is given back


def test_alpha_one_is_the_plain_language_model_loss():
    student, teacher = tiny(0), tiny(1)
    b = batch()
    _, plain = student(b.input, b.target, b.attn_pad_mask, b.loss_mask)
    assert Distillation(Teachers([teacher], [1.0], 2.0), 1.0).loss(student, b).item() == plain.item()
