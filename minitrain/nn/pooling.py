"""`MaxPool1d/2d`, `AvgPool1d/2d`: each window of a sequence or an image summed up by its largest value or its
mean (no weights). The math is `minitrain.autograd.conv`; the stride defaults to the kernel size, as PyTorch's."""

from __future__ import annotations

from minitrain.autograd import conv as C
from minitrain.autograd.tensor import Tensor
from minitrain.nn.module import Module


class MaxPool2d(Module):
    """y = the largest pixel of each window.  x (B, C, H, W) -> y (B, C, OH, OW)."""

    def __init__(self, kernel_size: C.Pair, stride: C.Pair | None = None, padding: C.Pair = 0, dilation: C.Pair = 1
                 ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation

    def forward(self, x: Tensor) -> Tensor:
        return C.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride or self.kernel_size}"


class MaxPool1d(MaxPool2d):
    """y = the largest value of each window.  x (B, C, L) -> y (B, C, OL)."""

    def forward(self, x: Tensor) -> Tensor:
        return C.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation)


class AvgPool2d(Module):
    """y = the mean of each window, padding counted as zeros.  x (B, C, H, W) -> y (B, C, OH, OW)."""

    def __init__(self, kernel_size: C.Pair, stride: C.Pair | None = None, padding: C.Pair = 0) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Tensor) -> Tensor:
        return C.avg_pool2d(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride or self.kernel_size}"


class AvgPool1d(AvgPool2d):
    """y = the mean of each window.  x (B, C, L) -> y (B, C, OL)."""

    def forward(self, x: Tensor) -> Tensor:
        return C.avg_pool1d(x, self.kernel_size, self.stride, self.padding)
