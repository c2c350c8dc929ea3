"""The triplet margin and NT-Xent losses (minitrain/autograd/embedding_losses.py): their gradients against float64
central differences, their values and gradients against PyTorch's (tests/data/losses/torch_references.safetensors,
written by scripts/make_loss_references.py), and hand-computed cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from minitrain.autograd.embedding_losses import nt_xent_loss, triplet_margin_loss
from minitrain.autograd.gradcheck import gradcheck
from minitrain.autograd.tensor import Tensor

REFERENCES = load_file(Path(__file__).parents[1] / "data" / "losses" / "torch_references.safetensors")
# The script's cases, in its order: (p, margin, swap, reduction) and the temperatures.
TRIPLET_CASES = [(2.0, 1.0, False, "mean"), (2.0, 1.0, True, "mean"), (1.0, 0.5, False, "sum"),
                 (3.0, 2.0, True, "none"), (1.5, 0.3, True, "sum")]
TEMPERATURES = [0.1, 0.5, 1.0]


def leaf(array: np.ndarray) -> Tensor:
    return Tensor(array.copy(), dtype=np.float64, requires_grad=True)


@pytest.mark.parametrize(("p", "margin", "swap", "reduction"), [(1.0, 1.5, False, "mean"), (2.0, 0.5, True, "sum"),
                                                                (3.0, 1.0, False, "none")])
def test_triplet_gradient_matches_central_differences(p, margin, swap, reduction):
    rng = np.random.default_rng(0)
    inputs = [leaf(rng.normal(size=(5, 3))) for _ in range(3)]
    loss = lambda a, pos, neg: triplet_margin_loss(a, pos, neg, margin, p, swap, reduction)  # noqa: E731
    rows = triplet_margin_loss(*inputs, margin, p, swap, "none").data
    assert 0 < np.count_nonzero(rows) < len(rows)  # both sides of the hinge are checked
    assert gradcheck(loss, inputs)


def test_nt_xent_gradient_matches_central_differences():
    rng = np.random.default_rng(1)
    assert gradcheck(lambda a, b: nt_xent_loss(a, b, 0.3), [leaf(rng.normal(size=(4, 3))) for _ in range(2)])


@pytest.mark.parametrize("case", range(len(TRIPLET_CASES)))
def test_triplet_matches_torch_triplet_margin_loss(case):
    p, margin, swap, reduction = TRIPLET_CASES[case]
    inputs = [leaf(REFERENCES[k]) for k in ("anchor", "positive", "negative")]
    loss = triplet_margin_loss(*inputs, margin=margin, p=p, swap=swap, reduction=reduction)
    np.testing.assert_allclose(np.atleast_1d(loss.data), REFERENCES[f"triplet{case}.loss"], rtol=1e-12)
    (loss * Tensor(REFERENCES["row_weights"]) if reduction == "none" else loss).sum().backward()
    for x, key in zip(inputs, ("anchor", "positive", "negative"), strict=True):
        np.testing.assert_allclose(x.grad, REFERENCES[f"triplet{case}.grad.{key}"], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("case", range(len(TEMPERATURES)))
def test_nt_xent_matches_the_torch_reference(case):
    z1, z2 = leaf(REFERENCES["z1"]), leaf(REFERENCES["z2"])
    loss = nt_xent_loss(z1, z2, TEMPERATURES[case])
    np.testing.assert_allclose(loss.data, REFERENCES[f"nt_xent{case}.loss"][0], rtol=1e-12)
    loss.backward()
    np.testing.assert_allclose(z1.grad, REFERENCES[f"nt_xent{case}.grad.z1"], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(z2.grad, REFERENCES[f"nt_xent{case}.grad.z2"], rtol=1e-10, atol=1e-14)


def test_hand_computed_cases():
    # 1-D points: d(a, p) = 1, d(a, n) = 3, d(p, n) = 2 (up to ε); the swap picks the nearer p–n distance.
    a, pos, neg = (Tensor(np.array([[x]])) for x in (0.0, 1.0, 3.0))
    assert triplet_margin_loss(a, pos, neg, margin=2.5).item() == pytest.approx(0.5)
    assert triplet_margin_loss(a, pos, neg, margin=2.5, swap=True).item() == pytest.approx(1.5)
    assert triplet_margin_loss(a, pos, neg, margin=1.0).item() == 0.0  # negative far enough: nothing to learn
    # Two items whose views coincide and are orthogonal to the other item's: each row sees its positive at
    # cosine 1 and two negatives at cosine 0, so L = −log(e^{1/τ} / (e^{1/τ} + 2)).
    z = Tensor(np.eye(2))
    assert nt_xent_loss(z, z, 0.5).item() == pytest.approx(-np.log(np.exp(2) / (np.exp(2) + 2)))


def test_bad_arguments_name_the_loss():
    x = Tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match="reduction"):
        triplet_margin_loss(x, x, x, reduction="max")
    with pytest.raises(ValueError, match="p must be"):
        triplet_margin_loss(x, x, x, p=0.5)
    with pytest.raises(ValueError, match="temperature"):
        nt_xent_loss(x, x, 0.0)
    with pytest.raises(ValueError, match="N >= 2"):
        nt_xent_loss(Tensor(np.ones((1, 3))), Tensor(np.ones((1, 3))))
