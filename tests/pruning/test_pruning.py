"""Pruning masks and scores (minitrain/pruning/): exact counts per layer, magnitude and Wanda against a direct NumPy
reading of their papers, 2:4, deterministic ties, and the cubic schedule of gradual pruning."""

from __future__ import annotations

import numpy as np
import pytest
from fakehub import TINY_MODEL

from minitrain.autograd.tensor import Tensor
from minitrain.data.batch import Batch
from minitrain.models.registry import build_model
from minitrain.nn import Linear, Module
from minitrain.pruning.gradual import GradualPruner, cubic_sparsity
from minitrain.pruning.masks import keep_mask, prunable_paths, pruned_count
from minitrain.pruning.scores import input_norms, magnitude_scores, prune_model, wanda_scores


def weights(shape=(16, 12), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("sparsity", [0.0, 0.3, 0.5, 0.7, 0.95])
@pytest.mark.parametrize("group", ["layer", "output"])
def test_every_mask_prunes_exactly_round_s_times_size(sparsity, group):
    for shape in ((20, 7), (13, 5)):  # 13 · s is never whole: per output, the remainder is spread over columns
        w = weights(shape)
        mask = keep_mask(np.abs(w), sparsity, group=group)
        assert mask.shape == shape and int((~mask).sum()) == pruned_count(shape, sparsity) == round(sparsity * w.size)


def test_magnitude_per_layer_prunes_the_smallest_magnitudes_of_the_whole_matrix():
    w = weights()
    mask = keep_mask(magnitude_scores(w), 0.4)
    k = round(0.4 * w.size)
    threshold = np.sort(np.abs(w), axis=None)[k - 1]  # the paper's rule: |W| below the k-th smallest goes
    assert np.array_equal(mask, np.abs(w) > threshold)


def wanda_reference(w_in_out: np.ndarray, x: np.ndarray, sparsity: float) -> np.ndarray:
    """Sun et al. 2023, Algorithm 1, in the paper's (out, in) layout: S = |W| · ‖X‖₂ (the norm over the N tokens of
    each input feature, broadcast along the rows), and in each row (one output) the int(in · s) lowest S pruned."""
    w = w_in_out.T  # (out, in)
    metric = np.abs(w) * np.sqrt((x.astype(np.float64) ** 2).sum(axis=0)).reshape(1, -1)
    pruned = np.zeros_like(w, dtype=bool)
    for row in range(w.shape[0]):
        pruned[row, np.argsort(metric[row], kind="stable")[: int(w.shape[1] * sparsity)]] = True
    return ~pruned.T  # kept, back in (in, out)


@pytest.mark.parametrize("sparsity", [0.25, 0.5, 0.75])
def test_wanda_is_the_papers_per_output_rule(sparsity):
    rng = np.random.default_rng(1)
    w = weights((16, 10), seed=2)
    x = rng.standard_normal((50, 16)) * rng.uniform(0.1, 10, size=16)  # features of very different scales
    norms = np.sqrt((x**2).sum(axis=0))
    mask = keep_mask(wanda_scores(w, norms), sparsity, group="output")
    assert np.array_equal(mask, wanda_reference(w, x, sparsity))  # 16 · s is whole: no remainder to spread
    assert not np.array_equal(mask, keep_mask(magnitude_scores(w), sparsity, group="output"))  # the norms matter


def test_per_output_spreads_the_remainder_to_the_columns_with_the_lowest_next_score():
    scores = np.array([[1.0, 5.0, 2.0], [4.0, 6.0, 3.0]])  # 3 columns of 2; s = 0.5 -> 3 pruned, 1 per column
    assert np.array_equal(keep_mask(scores, 0.5, group="output"), [[False, False, False], [True, True, True]])
    # s = 4/6: one per column, and the fourth from the column whose next-lowest score is smallest (3.0, column 2)
    assert np.array_equal(keep_mask(scores, 4 / 6, group="output"), [[False, False, False], [True, True, False]])


def test_ties_are_broken_by_position_and_already_pruned_weights_stay_pruned():
    scores = np.ones((4, 2))
    assert np.array_equal(keep_mask(scores, 0.25), [[False, False], [True, True], [True, True], [True, True]])
    earlier = np.array([[True, True], [True, True], [True, True], [False, True]])  # (3, 0) pruned before
    mask = keep_mask(scores, 0.25, exclude_pruned=~earlier)
    assert not mask[3, 0] and int((~mask).sum()) == 2 and not mask[0, 0]


def test_two_four_keeps_the_two_largest_of_every_four_consecutive_inputs():
    w = weights((12, 5), seed=3)
    mask = keep_mask(magnitude_scores(w), 0.5, structure="2:4")
    groups = mask.reshape(3, 4, 5)
    assert (groups.sum(axis=1) == 2).all()
    for g in range(3):
        for j in range(5):
            block = np.abs(w[4 * g: 4 * g + 4, j])
            assert set(np.flatnonzero(groups[g, :, j])) == set(np.argsort(block)[2:])
    with pytest.raises(ValueError, match="groups of 4; this layer has 6"):
        keep_mask(np.ones((6, 2)), 0.5, structure="2:4")


def tiny_model():
    return build_model(TINY_MODEL)


def test_the_pruned_layers_are_the_linear_projections_only():
    model = tiny_model()
    paths, unmatched = prunable_paths(model, ["mlp.c_proj", "nothing"])
    assert unmatched == ["nothing"]
    assert paths == [f"transformer.h.{i}.{p}" for i in (0, 1) for p in ("attn.c_attn", "attn.c_proj", "mlp.c_fc")]


def batches(seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, TINY_MODEL["vocab_size"], size=(3, 10))
    mask = np.ones_like(ids, dtype=bool)
    mask[0, 7:] = False  # padding: its inputs must not count
    return [Batch(ids, ids, mask, mask.astype(np.float32))]


def test_wanda_reads_each_layers_input_norms_over_real_positions():
    model = tiny_model()
    layer = model.get_submodule("transformer.h.0.mlp.c_fc")
    seen = []
    forward = layer.forward
    layer.forward = lambda x: (seen.append(x.data.copy()), forward(x))[1]
    batch = batches()[0]
    model(batch.input, attn_pad_mask=batch.attn_pad_mask)
    del layer.forward
    x = seen[0][batch.attn_pad_mask]  # (real tokens, in)
    norms = input_norms(model, batches(), ["transformer.h.0.mlp.c_fc"])["transformer.h.0.mlp.c_fc"]
    np.testing.assert_allclose(norms, np.sqrt((x.astype(np.float64) ** 2).sum(axis=0)), rtol=1e-6)


def test_the_cubic_schedule_is_zhu_and_gupta():
    s_f, s_i, t0, end = 0.8, 0.1, 10, 110
    for t in (10, 35, 60, 85, 110):
        assert cubic_sparsity(t, s_f, s_i, t0, end) == pytest.approx(s_f + (s_i - s_f) * (1 - (t - t0) / 100) ** 3)
    assert cubic_sparsity(0, s_f, s_i, t0, end) == s_i and cubic_sparsity(500, s_f, s_i, t0, end) == s_f
    assert cubic_sparsity(0, 0.5) == 0.5  # start = end = 0: one shot
    pruner = GradualPruner(["a"], s_f, s_i, t0, end, every=30)
    assert [t for t in range(200) if pruner.prunes_at(t)] == [10, 40, 70, 100, 110]


def test_gradual_pruning_only_ever_prunes_more_and_its_state_round_trips():
    model = tiny_model()
    paths = prunable_paths(model)[0]
    pruner = GradualPruner(paths, 0.75, 0.0, 0, 4, every=1)
    rng = np.random.default_rng(5)
    before = None
    for t in range(6):
        for path in paths:  # an "update": every weight moves, the pruned ones too
            model.get_submodule(path).weight.data[...] += 0.01 * rng.standard_normal(
                model.get_submodule(path).weight.shape).astype(np.float32)
        pruner.after_update(t, model)
        pruned = {p: ~m for p, m in pruner.masks.items()}
        w = model.get_submodule(paths[0]).weight.data
        assert int((w == 0).sum()) == round(cubic_sparsity(t, 0.75, 0.0, 0, 4) * w.size)
        if before is not None:
            assert all((pruned[p] | ~before[p]).all() for p in paths)  # what was pruned stays pruned
        before = pruned
    copy = GradualPruner(paths, 0.75, 0.0, 0, 4, every=1)
    copy.load_state_dict(pruner.state_dict(), model)
    assert all(np.array_equal(copy.masks[p], pruner.masks[p]) for p in paths)


class OneLinear(Module):
    """A model that is one bias-free Linear(2, 2) on the calibration inputs themselves (floats, not token ids)."""

    def __init__(self, weight: np.ndarray) -> None:
        super().__init__()
        self.fc = Linear(2, 2, bias=False)
        self.fc.weight.data[...] = weight

    def forward(self, x: np.ndarray, attn_pad_mask: np.ndarray | None = None) -> Tensor:
        return self.fc(Tensor(x))


def test_prune_model_compares_wanda_scores_within_each_output_by_hand():
    """W (in, out) = [[4, 1], [3, 0.25]], inputs with ‖X_0‖ = 1, ‖X_1‖ = 2 (the padded position left out): scores
    [[4, 1], [6, 0.5]]. Half of each output's column goes: 4 of column 0, 0.5 of column 1. Over the whole layer the
    two smallest (1 and 0.5) would go, both of output 1; by magnitude alone, 3 of column 0."""
    x = np.array([[[1.0, 2.0], [100.0, 0.0]]], dtype=np.float32)
    mask = np.array([[True, False]])
    model = OneLinear(np.array([[4.0, 1.0], [3.0, 0.25]]))
    masks = prune_model(model, "wanda", 0.5, ["fc"], calibration=[Batch(x, x, mask, mask)])
    assert masks["fc"].tolist() == [[False, True], [True, False]]
    assert model.fc.weight.data.tolist() == [[0.0, 1.0], [3.0, 0.0]]
