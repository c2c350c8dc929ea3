"""The fused kernels, and the one place that chooses which implementation runs.

Each kernel family lives in its own file with a plain NumPy `<name>_reference` and a numba `<name>_numba` of the
same signature (and a test that they agree). `active` holds the chosen set; `functional.py` calls only
`kernels.active.<name>`:

- "numba" (default): the jitted kernels, compiled on first use and cached on disk (`cache=True`).
- "numpy": the references. Chosen automatically when NUMBA_DISABLE_JIT=1 (the numba functions would then run
  as slow interpreted Python loops), or by MINITRAIN_KERNELS=numpy, or with `use_backend("numpy")`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

from numba import config as numba_config

from minitrain.autograd.kernels import (
    adamw_update,
    attention,
    cross_entropy,
    embedding_backward,
    gelu,
    grad_norm,
    grouped_attention,
    layernorm,
    rmsnorm,
    silu,
)

KERNELS = {
    "gelu_forward": gelu,
    "gelu_backward": gelu,
    "layernorm_forward": layernorm,
    "layernorm_backward": layernorm,
    "cross_entropy_forward": cross_entropy,
    "cross_entropy_backward": cross_entropy,
    "attention_forward": attention,
    "attention_backward": attention,
    "embedding_backward": embedding_backward,
    "sum_of_squares": grad_norm,
    "adamw_update": adamw_update,
    "rmsnorm_forward": rmsnorm,
    "rmsnorm_backward": rmsnorm,
    "silu_forward": silu,
    "silu_backward": silu,
    "grouped_attention_forward": grouped_attention,
    "grouped_attention_backward": grouped_attention,
}
BACKENDS = ("numba", "numpy")


def backend(name: str) -> SimpleNamespace:
    """All kernels of one implementation, as attributes: `backend("numpy").gelu_forward(x)`."""
    if name not in BACKENDS:
        raise ValueError(f"unknown kernel backend {name!r}; choose one of {BACKENDS}")
    suffix = "numba" if name == "numba" else "reference"
    return SimpleNamespace(name=name, **{k: getattr(module, f"{k}_{suffix}") for k, module in KERNELS.items()})


def default_backend_name() -> str:
    if numba_config.DISABLE_JIT:
        return "numpy"
    return os.environ.get("MINITRAIN_KERNELS", "numba")


active = backend(default_backend_name())


@contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Run a block with another kernel implementation (tests run every op over both)."""
    global active
    previous, active = active, backend(name)
    try:
        yield
    finally:
        active = previous
