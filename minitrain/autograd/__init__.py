"""The autograd core: `Tensor` and its tape, the differentiable ops (functional, ops, losses), the numba kernels
beside their NumPy references, the flat parameter buffer, the gradient checker, and the default generator that
layers draw from when given no `rng` (`minitrain.manual_seed`), and state dicts saved as safetensors
(`minitrain.save`, `minitrain.load`).

    from minitrain import Tensor, functional as F, gradcheck
"""
