"""`Conv1d`, `Conv2d`: a small kernel slid over a sequence or an image, the same weights at every position.
The math is `minitrain.autograd.conv` (im2col and one matmul); these layers own the weights, in PyTorch's layout
and under its names, so a torch state dict loads unchanged."""

from __future__ import annotations

import math

import numpy as np

from minitrain.autograd import conv as C
from minitrain.autograd.random import or_default
from minitrain.autograd.tensor import Tensor
from minitrain.nn.module import Module, Parameter


class Conv2d(Module):
    """y = conv2d(x, W) + b.  x (B, C, H, W) -> y (B, O, OH, OW); W (O, C, KH, KW), b (O,).

    Init, as PyTorch's: W and b ~ U(−1/√fan_in, 1/√fan_in), fan_in = C·KH·KW (kaiming_uniform with a = √5),
    drawn from `rng` (the training RNG; the default generator when not given)."""

    dims = 2
    op = staticmethod(C.conv2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...], stride: C.Pair = 1,
                 padding: C.Pair = 0, dilation: C.Pair = 1, bias: bool = True, *,
                 rng: np.random.Generator | None = None, dtype: type = np.float32) -> None:
        super().__init__()
        kernel = (kernel_size,) * self.dims if isinstance(kernel_size, int) else tuple(kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel
        self.stride, self.padding, self.dilation = stride, padding, dilation
        rng = or_default(rng)
        bound = 1.0 / math.sqrt(in_channels * math.prod(kernel))
        self.weight = Parameter(rng.uniform(-bound, bound, (out_channels, in_channels, *kernel)), dtype=dtype)
        self.bias = Parameter(rng.uniform(-bound, bound, out_channels), dtype=dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return self.op(x, self.weight, self.bias, self.stride, self.padding, self.dilation)

    def extra_repr(self) -> str:
        given = (("stride", self.stride, 1), ("padding", self.padding, 0), ("dilation", self.dilation, 1))
        options = [f"{key}={value}" for key, value, default in given if value != default]
        return ", ".join([f"{self.in_channels} → {self.out_channels}", f"kernel_size={self.kernel_size}", *options,
                          *([] if self.bias is not None else ["bias=False"])])


class Conv1d(Conv2d):
    """y = conv1d(x, W) + b.  x (B, C, L) -> y (B, O, OL); W (O, C, K), b (O,); stride, padding, dilation ints."""

    dims = 1
    op = staticmethod(C.conv1d)
