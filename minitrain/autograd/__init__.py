"""The autograd core: `Tensor` and its tape, the differentiable ops (functional, ops, losses), the numba kernels
beside their NumPy references, the flat parameter buffer and the gradient checker.

    from minitrain import Tensor, functional as F, gradcheck
"""
