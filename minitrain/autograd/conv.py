"""Convolution and pooling as tape ops: conv2d by im2col and one matmul, max/avg pooling over the same windows,
and their 1d forms as a 2d op over a height of 1. PyTorch's layouts and arguments (stride, padding, dilation).

Shape letters: B batch, C input channels, O output channels, H×W an image (L a sequence), KH×KW the kernel,
OH×OW the output. A window of the zero-padded input x_p starts at (s_h·i, s_w·j) and takes every d-th pixel:

    y[b, o, i, j] = bias[o] + Σ_{c, u, v} W[o, c, u, v] · x_p[b, c, s_h·i + d_h·u, s_w·j + d_w·v]
    OH = (H + 2·p_h − d_h·(KH − 1) − 1) // s_h + 1        (OW likewise)

im2col lays each window out as a row, cols (B·OH·OW, C·KH·KW), so the sum is cols · W_matᵀ with W_mat (O, C·KH·KW).
Backward: dW_mat = gᵀ · cols, db = Σ g, and dcols = g · W_mat, which `_fold` adds back to the pixels each window
read (col2im: a pixel in several windows gets the sum of their gradients).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from minitrain.autograd.tensor import Tensor
from minitrain.common.runtime import one_thread_below

Pair = int | tuple[int, int]


def _pair(value: Pair) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


def output_size(size: int, kernel: int, stride: int = 1, padding: int = 0, dilation: int = 1) -> int:
    """The number of windows along one axis (PyTorch's formula); < 1 when the kernel does not fit the input."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _windows(x_p: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int]
             ) -> np.ndarray:
    """A view (B, C, OH, OW, KH, KW) of the padded x_p (B, C, H, W): every window's pixels, no copy."""
    span = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True))
    view = sliding_window_view(x_p, span, axis=(2, 3))  # (B, C, H − span + 1, W − span + 1, span_h, span_w)
    return view[:, :, :: stride[0], :: stride[1], :: dilation[0], :: dilation[1]]


def _fold(d_windows: np.ndarray, padded_shape: tuple[int, ...], padding: tuple[int, int],
          stride: tuple[int, int], dilation: tuple[int, int]) -> np.ndarray:
    """col2im, `_windows`' adjoint: d_windows (B, C, OH, OW, KH, KW) added back to the pixels they came from, then
    the padding cut off -> dx (B, C, H, W). One strided slice per kernel offset (u, v): KH·KW adds of a whole grid."""
    _, _, out_h, out_w, kernel_h, kernel_w = d_windows.shape
    dx = np.zeros(padded_shape, dtype=d_windows.dtype)
    for u in range(kernel_h):
        for v in range(kernel_w):
            top, left = u * dilation[0], v * dilation[1]
            dx[:, :, top : top + stride[0] * (out_h - 1) + 1 : stride[0],
               left : left + stride[1] * (out_w - 1) + 1 : stride[1]] += d_windows[:, :, :, :, u, v]
    return dx[:, :, padding[0] : padded_shape[2] - padding[0], padding[1] : padded_shape[3] - padding[1]]


def _pad(x: np.ndarray, padding: tuple[int, int], value: float = 0.0) -> np.ndarray:
    return np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2), constant_values=value)


def _check(name: str, shape: tuple[int, ...], kernel: tuple[int, int], stride: tuple[int, int],
           padding: tuple[int, int], dilation: tuple[int, int]) -> tuple[int, int]:
    """(OH, OW), or a ValueError when x is not (B, C, H, W) or the kernel's span does not fit the padded input."""
    if len(shape) != 4:
        raise ValueError(f"{name}: input of shape {shape} is not (B, C, H, W)")
    sizes = tuple(output_size(n, k, s, p, d) for n, k, s, p, d in zip(shape[2:], kernel, stride, padding, dilation,
                                                                        strict=True))
    if min(sizes) < 1:
        raise ValueError(f"{name}: kernel {kernel} (dilation {dilation}) is larger than the input {shape[2:]} padded "
                         f"by {padding}")
    return sizes


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Pair = 1, padding: Pair = 0,
           dilation: Pair = 1) -> Tensor:
    """y = conv(x, W) + b, PyTorch's (a cross-correlation).  x (B, C, H, W), W (O, C, KH, KW), b (O,)
    -> y (B, O, OH, OW)."""
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    n_out, channels, kernel_h, kernel_w = weight.shape
    if x.ndim == 4 and x.shape[1] != channels:
        raise ValueError(f"conv2d: input of shape {x.shape} has {x.shape[1]} channels, the weight {channels}")
    out_h, out_w = _check("conv2d", x.shape, (kernel_h, kernel_w), stride, padding, dilation)
    batch = x.shape[0]
    x_p = _pad(x.data, padding)
    windows = _windows(x_p, (kernel_h, kernel_w), stride, dilation)  # (B, C, OH, OW, KH, KW)
    cols = windows.transpose(0, 2, 3, 1, 4, 5).reshape(batch * out_h * out_w, -1)  # (B·OH·OW, C·KH·KW), a copy
    w_mat = weight.data.reshape(n_out, -1)  # (O, C·KH·KW)
    macs = cols.size * n_out  # small products run on one BLAS thread (`one_thread_below`, as linear's)
    with one_thread_below(macs):
        y = cols @ w_mat.T  # (B·OH·OW, O)
    if bias is not None:
        y += bias.data

    def backward(g: np.ndarray) -> None:
        g_rows = g.transpose(0, 2, 3, 1).reshape(-1, n_out)  # (B·OH·OW, O)
        if bias is not None and bias.requires_grad:
            bias._accumulate(g_rows.sum(axis=0))
        with one_thread_below(macs):
            if weight.requires_grad:
                weight._accumulate((g_rows.T @ cols).reshape(weight.shape))
            d_cols = (g_rows @ w_mat) if x.requires_grad else None
        if d_cols is not None:
            d_cols = d_cols.reshape(batch, out_h, out_w, channels, kernel_h, kernel_w)
            x._accumulate(_fold(d_cols.transpose(0, 3, 1, 2, 4, 5), x_p.shape, padding, stride, dilation))

    parents = (x, weight) if bias is None else (x, weight, bias)
    return Tensor._from_op(y.reshape(batch, out_h, out_w, n_out).transpose(0, 3, 1, 2), parents, backward)


def max_pool2d(x: Tensor, kernel_size: Pair, stride: Pair | None = None, padding: Pair = 0, dilation: Pair = 1
               ) -> Tensor:
    """y = the largest pixel of each window (padding never wins: it is −∞).  x (B, C, H, W) -> y (B, C, OH, OW);
    stride defaults to the kernel (windows side by side), as PyTorch's. dx: g to each window's arg-max pixel."""
    return _pool("max_pool2d", x, kernel_size, stride, padding, dilation)


def avg_pool2d(x: Tensor, kernel_size: Pair, stride: Pair | None = None, padding: Pair = 0) -> Tensor:
    """y = the mean of each window, padding counted as zeros (PyTorch's count_include_pad=True).
    x (B, C, H, W) -> y (B, C, OH, OW). dx: g / (KH·KW) to every pixel of the window."""
    return _pool("avg_pool2d", x, kernel_size, stride, padding, 1)


def _pool(name: str, x: Tensor, kernel: Pair, stride: Pair | None, padding: Pair, dilation: Pair) -> Tensor:
    kernel = _pair(kernel)
    stride, padding, dilation = kernel if stride is None else _pair(stride), _pair(padding), _pair(dilation)
    if any(2 * p > k for p, k in zip(padding, kernel, strict=True)):
        raise ValueError(f"{name}: padding {padding} must be at most half the kernel {kernel}")
    _check(name, x.shape, kernel, stride, padding, dilation)
    is_max = name == "max_pool2d"
    x_p = _pad(x.data, padding, -np.inf if is_max else 0.0)
    windows = _windows(x_p, kernel, stride, dilation)
    flat = windows.reshape(*windows.shape[:4], -1)  # (B, C, OH, OW, KH·KW)
    size = flat.shape[-1]
    if is_max:
        where = flat.argmax(axis=-1)[..., None]  # the first maximum of each window, as PyTorch picks
        y = np.take_along_axis(flat, where, axis=-1)[..., 0]
    else:
        y = flat.mean(axis=-1)

    def backward(g: np.ndarray) -> None:
        if is_max:
            d_flat = np.zeros(flat.shape, dtype=g.dtype)
            np.put_along_axis(d_flat, where, g[..., None], axis=-1)
        else:
            d_flat = np.broadcast_to((g / size)[..., None], flat.shape)
        x._accumulate(_fold(d_flat.reshape(windows.shape), x_p.shape, padding, stride, dilation))

    return Tensor._from_op(y.astype(x.dtype), (x,), backward)


def _as_1d(op: Callable[..., Tensor], x: Tensor, *args: Tensor | None, **options: int | None) -> Tensor:
    """A 2d op over a height of 1: x (B, C, L) -> (B, C, 1, L), each int option o -> (1, o) (padding 0 along the
    height), weights (O, C, K) -> (O, C, 1, K); the result's height dropped again."""
    if x.ndim != 3:
        raise ValueError(f"{op.__name__.replace('2d', '1d')}: input of shape {x.shape} is not (B, C, L)")
    lifted = {key: value if value is None else (0 if key == "padding" else 1, value) for key, value in options.items()}
    tensors = [t if t is None or t.ndim == 1 else t.reshape(*t.shape[:2], 1, t.shape[2]) for t in args]
    y = op(x.reshape(x.shape[0], x.shape[1], 1, x.shape[2]), *tensors, **lifted)
    return y.reshape(y.shape[0], y.shape[1], y.shape[3])


def conv1d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: int = 1, padding: int = 0,
           dilation: int = 1) -> Tensor:
    """y[b, o, t] = bias[o] + Σ_{c, k} W[o, c, k] · x_p[b, c, s·t + d·k].  x (B, C, L), W (O, C, K) -> y (B, O, OL)."""
    return _as_1d(conv2d, x, weight, bias, stride=stride, padding=padding, dilation=dilation)


def max_pool1d(x: Tensor, kernel_size: int, stride: int | None = None, padding: int = 0, dilation: int = 1
               ) -> Tensor:
    """The largest value of each window.  x (B, C, L) -> y (B, C, OL)."""
    return _as_1d(max_pool2d, x, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)


def avg_pool1d(x: Tensor, kernel_size: int, stride: int | None = None, padding: int = 0) -> Tensor:
    """The mean of each window, padding counted as zeros.  x (B, C, L) -> y (B, C, OL)."""
    return _as_1d(avg_pool2d, x, kernel_size=kernel_size, stride=stride, padding=padding)
