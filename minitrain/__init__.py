"""minitrain: a hand-built, pure-NumPy deep-learning training library for teaching.

    from minitrain import Tensor, no_grad, gradcheck
    import minitrain.functional as F
"""

from minitrain import functional, seam
from minitrain.gradcheck import gradcheck
from minitrain.ops import concat, masked_fill, split, where
from minitrain.tensor import Tensor, no_grad, zero_grad

# MINITRAIN_LAB_DIR: a student's lab files stand in for the library's (minitrain/seam.py). Nothing imported
# above is a lab module, and every `import minitrain.<x>` runs this file first, so the seam is in place in time.
seam.install()

__version__ = "0.1.0"
__all__ = ["Tensor", "concat", "functional", "gradcheck", "masked_fill", "no_grad", "split", "where", "zero_grad"]
