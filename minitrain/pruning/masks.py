"""Pruning masks: from a score per weight to the weights kept, with the exact count asked for.

A linear layer's weight W is stored (in, out) (minitrain/nn/linear.py), so output j is computed from the column
W[:, j] and input i feeds the row W[i, :]. A mask is a bool array of W's shape, True where the weight is kept.
Every mask prunes the lowest scores of its comparison group:

    unstructured, group "layer"    the k = round(s · in · out) lowest scores of the whole matrix
    unstructured, group "output"   the same k, spread over the columns: each prunes ⌊k / out⌋ of its own lowest,
                                   and the k mod out weights left go to the columns whose next-lowest score is
                                   smallest (so the layer's count is still exactly k, whatever s · in is)
    2:4                            in every group of 4 consecutive inputs of a column, the 2 lowest (50 % exactly;
                                   the layout sparse tensor cores run; `in` must be a multiple of 4)

Ties are broken by position: of equal scores, the one earlier in the array (C order, or along the column) is
pruned first, so the same weights always give the same mask. `exclude_pruned` marks weights already pruned
(gradual pruning): they stay pruned and count towards k.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from minitrain.common.registry import Registry
from minitrain.nn import Linear, Module
from minitrain.nn.module import module_matches

UNSTRUCTURED, TWO_FOUR = "unstructured", "2:4"
GROUPS = ("layer", "output")
N_KEPT, M_GROUP = 2, 4  # 2:4 keeps N of every M consecutive inputs

# The output layer maps to the vocabulary: like the embeddings it is left dense (Wanda's and SparseGPT's rule).
OUTPUT_LAYERS = ("lm_head",)


def prunable_paths(model: Module, exclude: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(paths of the linear layers to prune, the `exclude` entries that name no linear layer).

    Only linear weights are pruned: the attention and MLP projections (93 % of lab 01's MiniGPT's parameters);
    embeddings, norms, biases and an untied lm_head stay dense."""
    paths = [path for path, module in model.named_modules()
             if isinstance(module, Linear) and path.rsplit(".", 1)[-1] not in OUTPUT_LAYERS]
    unmatched = [name for name in exclude if not any(module_matches(p, name) for p in paths)]
    return [p for p in paths if not any(module_matches(p, name) for name in exclude)], unmatched


def pruned_count(shape: tuple[int, ...], sparsity: float) -> int:
    """How many of a layer's weights sparsity `s` prunes: round(s · size), the same for every method."""
    return round(sparsity * int(np.prod(shape)))


def keep_mask(scores: np.ndarray, sparsity: float, structure: str = UNSTRUCTURED, group: str = "layer",
              exclude_pruned: np.ndarray | None = None) -> np.ndarray:
    """The bool mask (shape of `scores`, (in, out)) that keeps the highest scores (module docstring)."""
    scores = np.asarray(scores, dtype=np.float64)
    if exclude_pruned is not None:  # already pruned: below every real score (scores are ≥ 0)
        scores = np.where(exclude_pruned, -1.0, scores)
    if structure not in STRUCTURES:
        raise ValueError(f"structure must be one of {', '.join(STRUCTURES)}, got {structure!r}")
    if STRUCTURES[structure].sparsity not in (None, sparsity):
        raise ValueError(f"{structure} prunes {STRUCTURES[structure].sparsity} of each layer, not {sparsity}")
    return STRUCTURES[structure].mask(scores, sparsity, group)


def _unstructured_mask(scores: np.ndarray, sparsity: float, group: str) -> np.ndarray:
    if group not in GROUPS:
        raise ValueError(f"group must be one of {', '.join(GROUPS)}, got {group!r}")
    return (_layer_mask if group == "layer" else _output_mask)(scores, pruned_count(scores.shape, sparsity))


def _layer_mask(scores: np.ndarray, k: int) -> np.ndarray:
    order = np.argsort(scores, axis=None, kind="stable")  # ascending, ties in C order
    keep = np.ones(scores.size, dtype=bool)
    keep[order[:k]] = False
    return keep.reshape(scores.shape)


def _output_mask(scores: np.ndarray, k: int) -> np.ndarray:
    n_out = scores.shape[1]
    per_column, extra = divmod(k, n_out)
    order = np.argsort(scores, axis=0, kind="stable")  # each column ascending, ties by input index
    keep = np.ones_like(scores, dtype=bool)
    np.put_along_axis(keep, order[:per_column], False, axis=0)
    if extra:
        # One more weight from each of the `extra` columns whose next-lowest score is the smallest.
        next_scores = scores[order[per_column], np.arange(n_out)]
        chosen = np.argsort(next_scores, kind="stable")[:extra]
        keep[order[per_column, chosen], chosen] = False
    return keep


def _n_of_m_mask(scores: np.ndarray, sparsity: float, group: str) -> np.ndarray:
    n_in, n_out = scores.shape
    if n_in % M_GROUP:
        raise ValueError(f"2:4 needs inputs in groups of {M_GROUP}; this layer has {n_in}")
    grouped = scores.reshape(n_in // M_GROUP, M_GROUP, n_out)  # [g, i, j] is input 4g + i of column j
    order = np.argsort(grouped, axis=1, kind="stable")
    keep = np.ones_like(grouped, dtype=bool)
    np.put_along_axis(keep, order[:, : M_GROUP - N_KEPT], False, axis=1)
    return keep.reshape(n_in, n_out)


@dataclass(frozen=True)
class PruningStructure:
    """`mask(scores, sparsity, group) -> keep` (module docstring); `sparsity`: the only share it prunes (2:4)."""

    name: str
    mask: Callable[[np.ndarray, float, str], np.ndarray]
    sparsity: float | None = None


STRUCTURES: Registry[PruningStructure] = Registry("pruning structure", [
    PruningStructure(UNSTRUCTURED, _unstructured_mask),
    PruningStructure(TWO_FOUR, _n_of_m_mask, sparsity=1 - N_KEPT / M_GROUP),
])


def apply_masks(model: Module, masks: dict[str, np.ndarray]) -> None:
    """Zero the pruned weights of each layer in place (W ← W ⊙ mask)."""
    for path, mask in masks.items():
        weight = model.get_submodule(path).weight.data
        weight[~mask] = 0.0


def layer_sparsity(model: Module, paths: Sequence[str]) -> dict[str, dict[str, int | float]]:
    """{path: {"zeros", "size", "sparsity"}}: what each layer's weight holds (the file's zeros, counted)."""
    found = {}
    for path in paths:
        weight = model.get_submodule(path).weight.data
        zeros = int(np.count_nonzero(weight == 0))
        found[path] = {"zeros": zeros, "size": int(weight.size), "sparsity": zeros / weight.size}
    return found
