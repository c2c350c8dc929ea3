"""minitrain: a hand-built, pure-NumPy deep-learning training library for teaching.

    from minitrain import Tensor, no_grad, gradcheck
    from minitrain import functional as F
    minitrain.manual_seed(0)      # seeds the default generator: nn.Linear(4, 32) draws from it
    minitrain.save(model.state_dict(), "model.safetensors"); model.load_state_dict(minitrain.load(...))
"""

import importlib
from typing import TYPE_CHECKING, Any

from minitrain import seam
from minitrain.common.versions import __version__

if TYPE_CHECKING:  # for editors and type checkers; at run time each name is imported on first use (__getattr__)
    from minitrain.autograd import functional
    from minitrain.autograd.gradcheck import gradcheck
    from minitrain.autograd.ops import concat, masked_fill, split, where
    from minitrain.autograd.random import manual_seed
    from minitrain.autograd.saving import load, save
    from minitrain.autograd.tensor import Tensor, no_grad, zero_grad

# MINITRAIN_LAB_DIR: a student's lab files stand in for the library's (minitrain/seam.py). Nothing imported
# above is a lab module, and every `import minitrain.<x>` runs this file first, so the seam is in place in time.
seam.install()

__all__ = ["Tensor", "__version__", "concat", "functional", "gradcheck", "load", "manual_seed", "masked_fill",
           "no_grad", "save", "split", "where", "zero_grad"]
_WHERE = {"functional": "autograd.functional", "gradcheck": "autograd.gradcheck", "manual_seed": "autograd.random",
          **dict.fromkeys(("concat", "masked_fill", "split", "where"), "autograd.ops"),
          **dict.fromkeys(("load", "save"), "autograd.saving"),
          **dict.fromkeys(("Tensor", "no_grad", "zero_grad"), "autograd.tensor")}


def __getattr__(name: str) -> Any:
    """The names of __all__, imported on first use (PEP 562): `minitrain --help` loads neither them nor NumPy."""
    if name not in _WHERE:
        raise AttributeError(f"module 'minitrain' has no attribute {name!r}")
    module = importlib.import_module(f"minitrain.{_WHERE[name]}")
    globals()[name] = value = module if name == "functional" else getattr(module, name)  # the one module
    return value
