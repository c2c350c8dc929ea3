"""The default generator: what a layer draws its initial weights from when it is given no `rng`.

    minitrain.manual_seed(0)                                # PyTorch's torch.manual_seed
    layer = nn.Linear(4, 32)                                # drawn from the default generator
    layer = nn.Linear(4, 32, rng=np.random.default_rng(0))  # drawn from the rng given: the library's way

The library's own models and training never use it: they pass the training RNG (`rng=`) to every layer, so a
run's numbers depend on its seeds alone, and the two streams never touch each other.
"""

from __future__ import annotations

import numpy as np

_DEFAULT = np.random.Generator(np.random.PCG64())


def manual_seed(seed: int) -> np.random.Generator:
    """Seed the default generator (in place: a layer already holding it, e.g. a Dropout, sees the new stream)
    and return it."""
    _DEFAULT.bit_generator.state = np.random.PCG64(seed).state
    return _DEFAULT


def or_default(rng: np.random.Generator | None) -> np.random.Generator:
    """`rng` when one is given, else the default generator."""
    return _DEFAULT if rng is None else rng
