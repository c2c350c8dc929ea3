"""The fused kernels, and the one place that chooses which implementation runs.

Each kernel family lives in its own file with a plain NumPy `<name>_reference` and a numba `<name>_numba` of the
same signature (and a test that they agree). `active` holds the chosen set; `functional.py` calls only
`kernels.active.<name>`. It is chosen, and the kernel files (and numba) imported, on first use: `import minitrain`
does not import numba.

- "numba" (default): the jitted kernels, compiled on first use and cached on disk (`cache=True`).
- "numpy": the references. Chosen automatically when NUMBA_DISABLE_JIT=1 (the numba functions would then run
  as slow interpreted Python loops), or by MINITRAIN_KERNELS=numpy, or with `use_backend("numpy")`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

KERNELS = {  # the file (minitrain/autograd/kernels/<file>.py) -> the kernels it holds
    "gelu": ("gelu_forward", "gelu_backward"),
    "layernorm": ("layernorm_forward", "layernorm_backward"),
    "cross_entropy": ("cross_entropy_forward", "cross_entropy_backward"),
    "attention": ("attention_forward", "attention_backward"),
    "embedding_backward": ("embedding_backward",),
    "grad_norm": ("sum_of_squares",),
    "adamw_update": ("adamw_update",),
    "rmsnorm": ("rmsnorm_forward", "rmsnorm_backward"),
    "silu": ("silu_forward", "silu_backward"),
    "grouped_attention": ("grouped_attention_forward", "grouped_attention_backward"),
}
BACKENDS = ("numba", "numpy")


def backend(name: str) -> SimpleNamespace:
    """All kernels of one implementation, as attributes: `backend("numpy").gelu_forward(x)`."""
    if name not in BACKENDS:
        raise ValueError(f"unknown kernel backend {name!r}; choose one of {BACKENDS}")
    suffix = "numba" if name == "numba" else "reference"
    return SimpleNamespace(name=name, **{k: getattr(importlib.import_module(f"{__name__}.{file}"), f"{k}_{suffix}")
                                         for file, names in KERNELS.items() for k in names})


def default_backend_name() -> str:
    from numba import config as numba_config  # numba loads with the first kernel, not with minitrain

    if numba_config.DISABLE_JIT:
        return "numpy"
    return os.environ.get("MINITRAIN_KERNELS", "numba")


def __getattr__(name: str) -> SimpleNamespace:
    """`active`, chosen on first use (PEP 562: called only while the module has no such attribute)."""
    if name != "active":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    global active
    active = backend(default_backend_name())
    return active


@contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Run a block with another kernel implementation (tests run every op over both)."""
    global active
    previous, active = globals().get("active") or __getattr__("active"), backend(name)
    try:
        yield
    finally:
        active = previous
