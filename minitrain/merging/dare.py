"""DARE (Yu et al. 2023, "Language Models are Super Mario: Absorbing Abilities from Homologous Models as a Free
Lunch"): Drop And REscale each task vector, then merge what is left.

For one tensor, τ_i = θ_i − θ_base, drop probability p = 1 − density (mergekit's name for the kept share):

    m_i ~ Bernoulli(p), one draw per entry        (1: dropped)
    τ̃_i = (1 − m_i) ⊙ τ_i / (1 − p)              (rescaled so that E[τ̃_i] = τ_i)

then either task arithmetic on the τ̃_i (`dare_linear`: θ = θ_base + λ Σ_i w_i τ̃_i) or TIES's sign election and
disjoint mean on them (`dare_ties`, as mergekit does: DARE's random drop replaces TIES's magnitude trim). The paper
finds fine-tuned deltas so redundant that dropping 90 % of them barely changes the model, so two models' deltas
can be thinned until they rarely touch the same weight.

Reproducible: the mask of model i for tensor NAME comes from its own generator, seeded by (seed, i, crc32(NAME)),
so the same seed gives the same masks whatever order the tensors are merged in.

From linear.py, imported here: `task_vectors` gives the τ_i of every model in float64, as `dare_deltas` takes them;
`combine` is task arithmetic on any changed task vectors, as `dare_linear` does on the τ̃_i.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from minitrain.merging.linear import combine, task_vectors
from minitrain.merging.ties import elect_and_mean


def mask_rng(seed: int, model_index: int, name: str) -> np.random.Generator:
    """The generator of model `model_index`'s drop mask for tensor `name`:
    np.random.default_rng([seed, model_index, zlib.crc32(name.encode("utf-8"))])."""
    return np.random.default_rng([seed, model_index, zlib.crc32(name.encode("utf-8"))])


def drop_and_rescale(delta: np.ndarray, density: float, rng: np.random.Generator) -> np.ndarray:
    """τ̃ = (1 − m) ⊙ τ / density with m ~ Bernoulli(1 − density) per entry: one draw
    u = rng.random(delta.shape), an entry kept (and divided by density) where u < density, else 0; density 1
    returns a copy of τ and draws nothing."""
    if density >= 1.0:
        return delta.copy()
    keep = rng.random(delta.shape) < density  # P(keep) = density = 1 − p
    return np.where(keep, delta / density, 0.0)


def dare_deltas(base: np.ndarray, tensors: Sequence[np.ndarray], densities: Sequence[float], seed: int,
                name: str) -> list[np.ndarray]:
    """Each model's τ̃_i for tensor `name`: drop_and_rescale(θ_i − θ_base, densities[i], mask_rng(seed, i,
    name)), i = 0, 1, ... in the order of `tensors` (a generator of its own for each model)."""
    return [drop_and_rescale(d, p, mask_rng(seed, i, name))
            for i, (d, p) in enumerate(zip(task_vectors(base, tensors), densities, strict=True))]


def dare_linear(base: np.ndarray, tensors: Sequence[np.ndarray], weights: Sequence[float],
                densities: Sequence[float], seed: int, name: str, lam: float = 1.0,
                normalize: bool = False) -> np.ndarray:
    """θ_base + λ Σ_i w_i τ̃_i (/ Σ_i w_i when `normalize`), the τ̃_i of dare_deltas; in the base's dtype."""
    return combine(base, dare_deltas(base, tensors, densities, seed, name), weights, lam, normalize)


def dare_ties(base: np.ndarray, tensors: Sequence[np.ndarray], weights: Sequence[float],
              densities: Sequence[float], seed: int, name: str, lam: float = 1.0) -> np.ndarray:
    """θ_base + λ · elect_and_mean(τ̃_i of dare_deltas, weights): TIES's sign election and disjoint mean, its
    trim replaced by the drop; in the base's dtype."""
    merged = elect_and_mean(dare_deltas(base, tensors, densities, seed, name), weights)
    return (base.astype(np.float64) + lam * merged).astype(base.dtype)
