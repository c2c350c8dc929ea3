"""The autograd core: a `Tensor` over a NumPy array, and a tape.

Every op on tensors that require grad computes its result with NumPy and appends the result to the tape (a
Wengert list) together with a small closure that knows the op's local derivative. `loss.backward()` walks the
tape once, newest entry first, and hands each node's gradient to its closure, which adds (`+=`) its share into
the gradients of the node's inputs. A node used twice therefore receives both contributions before its own
closure runs, because everything that used it was recorded (and is replayed) after it.

Conventions:
- float32 by default; float64 arrays keep float64, so gradcheck can run in double precision.
- Only leaves (tensors you created with `requires_grad=True`) keep `.grad` after `backward()`; intermediate
  gradients are freed as soon as they have been passed on, like PyTorch.
- A leaf whose `.grad` is already an array (e.g. a view into a flat gradient buffer) is accumulated into in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple, NoReturn

import numpy as np

Backward = Callable[[np.ndarray], None]
Axes = int | tuple[int, ...] | None


def device_move(name: str) -> Callable[..., NoReturn]:
    """PyTorch's device move `name` as a Tensor's or Module's method that says minitrain's way (one device: the CPU)."""

    def move(self: object, *args: object, **kwargs: object) -> NoReturn:
        raise AttributeError(f"{type(self).__name__}.{name}(): minitrain is CPU-only (NumPy arrays in memory): drop "
                             "the device move (docs/pytorch-users.md)")

    return move


class Tape:
    """The Wengert list: result tensors in the order their ops ran."""

    def __init__(self) -> None:
        self.nodes: list[Tensor] = []
        self.recording = True


TAPE = Tape()


@contextmanager
def no_grad() -> Iterator[None]:
    """Within this block ops record nothing: for evaluation, sampling and optimizer updates."""
    previous, TAPE.recording = TAPE.recording, False
    try:
        yield
    finally:
        TAPE.recording = previous


def _as_float_array(data: object, dtype: np.dtype | None) -> np.ndarray:
    if dtype is None:  # float64 arrays stay float64 (for gradcheck); anything else becomes float32
        is_f64 = isinstance(data, np.ndarray | np.floating) and data.dtype == np.float64
        dtype = np.float64 if is_f64 else np.float32
    return np.asarray(data, dtype=dtype)


class Tensor:
    """An n-dimensional float array that remembers how it was computed.

    `Tensor(data, requires_grad=False, dtype=None)`: data is anything `np.asarray` accepts; it becomes float32
    unless it is a float64 NumPy array (or `dtype` says otherwise).
    """

    __slots__ = ("_backward", "data", "grad", "requires_grad")
    __array_priority__ = 1000  # so `ndarray * Tensor` calls Tensor.__rmul__

    def __init__(self, data: object, requires_grad: bool = False, dtype: np.dtype | None = None) -> None:
        self.data: np.ndarray = _as_float_array(data, dtype)
        self.grad: np.ndarray | None = None
        self.requires_grad = requires_grad
        self._backward: Backward | None = None

    # ----------------------------------------------------------------- plumbing
    @staticmethod
    def _from_op(data: np.ndarray, parents: tuple[Tensor, ...], backward: Backward) -> Tensor:
        """Wrap an op's result; record it on the tape if any parent needs a gradient."""
        out = Tensor.__new__(Tensor)
        out.data, out.grad, out._backward, out.requires_grad = data, None, None, False
        if TAPE.recording:
            for p in parents:  # a plain loop: any(<generator>) costs more than the rest of this method
                if p.requires_grad:
                    out.requires_grad, out._backward = True, backward
                    TAPE.nodes.append(out)
                    break
        return out

    def _accumulate(self, g: np.ndarray) -> None:
        """grad += g. Leaves own their grad (copy on first write, then add in place); intermediate nodes may
        share the incoming array with a sibling, so they add out of place."""
        if not self.requires_grad:
            return
        if self.grad is None:
            self.grad = g.astype(self.data.dtype, copy=True) if self.is_leaf else g
        elif self.is_leaf:
            self.grad += g
        else:
            self.grad = self.grad + g

    def _accumulate_product(self, a: np.ndarray, b: np.ndarray) -> None:
        """grad += a @ b. When this is a leaf whose grad is an all-zero view into a flat gradient buffer (its first
        gradient after zero_grad), the product is written straight into it: no temporary, and a read-only zero
        check (`any()`) instead of the add's read-and-write pass. The same bits: 0 + p = p for every p but −0,
        and BLAS never returns −0 (its sums start from +0, +0 + −0 = +0).
        Only a leaf: an intermediate node's grad may be an array it shares with a sibling."""
        if not self.requires_grad:
            return
        grad = self.grad
        if self.is_leaf and grad is not None and grad.base is not None and grad.dtype == a.dtype and not grad.any():
            np.matmul(a, b, out=grad)
        else:
            self._accumulate(a @ b)

    @property
    def is_leaf(self) -> bool:
        return self._backward is None

    def backward(self, grad: np.ndarray | None = None) -> None:
        """Back-propagate from this tensor through everything recorded on the tape before it.

        `grad` is d(something)/d(self); it defaults to 1 for a scalar. The tape entries up to this tensor are
        consumed (released), so a second `backward()` needs a new forward pass.
        """
        if not self.requires_grad:
            raise RuntimeError("backward(): this tensor does not require grad (was it computed under no_grad?)")
        if grad is None:
            if self.data.size != 1:
                raise RuntimeError(f"backward(): output of shape {self.shape} is not a scalar; pass grad= of that "
                                   "shape")
            grad = np.ones_like(self.data)
        grad = np.asarray(grad, dtype=self.data.dtype)
        if grad.shape != self.shape:
            raise ValueError(f"backward(): grad of shape {grad.shape} does not match tensor of shape {self.shape}")
        if self.is_leaf:
            self._accumulate(grad)
            return
        nodes = TAPE.nodes
        end = len(nodes) - 1
        while end >= 0 and nodes[end] is not self:
            end -= 1
        if end < 0:
            raise RuntimeError("backward(): this tensor is no longer on the tape (backward already ran?)")
        self.grad = grad
        for i in range(end, -1, -1):
            node = nodes[i]
            if node.grad is not None:
                node._backward(node.grad)
                node.grad = None  # intermediate gradients are not kept
            node._backward = None  # frees the saved activations
        del nodes[: end + 1]

    # ----------------------------------------------------------------- helpers
    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    def numel(self) -> int:
        """The number of elements (PyTorch's name; `size` is NumPy's, the same int, not PyTorch's shape)."""
        return self.data.size

    def __len__(self) -> int:
        return len(self.data)

    cuda, to, cpu = device_move("cuda"), device_move("to"), device_move("cpu")  # PyTorch's: say minitrain's way

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"Tensor({self.data!r}{grad})"

    def numpy(self) -> np.ndarray:
        return self.data

    def item(self) -> float:
        return self.data.item()

    def detach(self) -> Tensor:
        """The same data, cut from the graph."""
        return Tensor(self.data, dtype=self.data.dtype)

    def zero_grad(self) -> None:
        """Reset the gradient: zero it in place if it is a buffer view, else drop it."""
        if self.grad is not None and self.grad.base is not None:
            self.grad.fill(0)
        else:
            self.grad = None

    def _lift(self, other: object) -> Tensor:
        return other if isinstance(other, Tensor) else Tensor(other, dtype=self.data.dtype)

    # ----------------------------------------------------------------- arithmetic (with broadcasting)
    def __add__(self, other: object) -> Tensor:
        """y = a + b"""
        other = self._lift(other)
        a, b = self, other

        def backward(g: np.ndarray) -> None:
            a._accumulate(unbroadcast(g, a.shape))
            b._accumulate(unbroadcast(g, b.shape))

        return Tensor._from_op(_check_broadcast("+", a, b, np.add), (a, b), backward)

    def __sub__(self, other: object) -> Tensor:
        """y = a - b"""
        other = self._lift(other)
        a, b = self, other

        def backward(g: np.ndarray) -> None:
            a._accumulate(unbroadcast(g, a.shape))
            b._accumulate(unbroadcast(-g, b.shape))

        return Tensor._from_op(_check_broadcast("-", a, b, np.subtract), (a, b), backward)

    def __mul__(self, other: object) -> Tensor:
        """y = a * b;  da = g * b,  db = g * a"""
        other = self._lift(other)
        a, b = self, other

        def backward(g: np.ndarray) -> None:
            a._accumulate(unbroadcast(g * b.data, a.shape))
            b._accumulate(unbroadcast(g * a.data, b.shape))

        return Tensor._from_op(_check_broadcast("*", a, b, np.multiply), (a, b), backward)

    def __truediv__(self, other: object) -> Tensor:
        """y = a / b;  da = g / b,  db = -g * a / b²"""
        other = self._lift(other)
        a, b = self, other

        def backward(g: np.ndarray) -> None:
            a._accumulate(unbroadcast(g / b.data, a.shape))
            b._accumulate(unbroadcast(-g * a.data / (b.data * b.data), b.shape))

        return Tensor._from_op(_check_broadcast("/", a, b, np.divide), (a, b), backward)

    def __radd__(self, other: object) -> Tensor:
        return self._lift(other) + self

    def __rsub__(self, other: object) -> Tensor:
        return self._lift(other) - self

    def __rmul__(self, other: object) -> Tensor:
        return self._lift(other) * self

    def __rtruediv__(self, other: object) -> Tensor:
        return self._lift(other) / self

    def __neg__(self) -> Tensor:
        return Tensor._from_op(-self.data, (self,), lambda g: self._accumulate(-g))

    def __pow__(self, exponent: float) -> Tensor:
        """y = x**p for a constant p;  dx = g * p * x**(p-1)"""
        if isinstance(exponent, Tensor):
            raise TypeError("Tensor ** Tensor is not supported: the exponent must be a Python number")
        p = float(exponent)
        x = self
        return Tensor._from_op(
            x.data**p, (x,), lambda g: x._accumulate(g * (p * x.data ** (p - 1)).astype(x.data.dtype))
        )

    def __matmul__(self, other: Tensor) -> Tensor:
        """Batched matrix product y = a @ b, (..., n, k) @ (..., k, m) -> (..., n, m), batch dims broadcast.

        da = g @ bᵀ,  db = aᵀ @ g  (each summed back over the batch dims it was broadcast along)."""
        other = self._lift(other)
        a, b = self, other
        if a.ndim < 2 or b.ndim < 2:
            raise ValueError(f"@ needs operands with at least 2 dims, got shapes {a.shape} and {b.shape}")
        if a.shape[-1] != b.shape[-2]:
            raise ValueError(f"@: shapes {a.shape} and {b.shape} do not match (inner dims {a.shape[-1]} != "
                             f"{b.shape[-2]})")

        def backward(g: np.ndarray) -> None:
            if a.requires_grad:
                a._accumulate(unbroadcast(g @ np.swapaxes(b.data, -1, -2), a.shape))
            if b.requires_grad:
                b._accumulate(unbroadcast(np.swapaxes(a.data, -1, -2) @ g, b.shape))

        return Tensor._from_op(_check_broadcast("@", a, b, np.matmul), (a, b), backward)

    # ----------------------------------------------------------------- elementwise functions
    def exp(self) -> Tensor:
        """y = eˣ;  dx = g * y"""
        y = np.exp(self.data)
        return Tensor._from_op(y, (self,), lambda g: self._accumulate(g * y))

    def log(self) -> Tensor:
        """y = ln x;  dx = g / x"""
        return Tensor._from_op(np.log(self.data), (self,), lambda g: self._accumulate(g / self.data))

    def tanh(self) -> Tensor:
        """y = tanh x;  dx = g * (1 - y²)"""
        y = np.tanh(self.data)
        return Tensor._from_op(y, (self,), lambda g: self._accumulate(g * (1 - y * y)))

    def relu(self) -> Tensor:
        """y = max(x, 0);  dx = g where x > 0"""
        x = self
        return Tensor._from_op(np.maximum(x.data, 0), (x,), lambda g: x._accumulate(g * (x.data > 0)))

    def sqrt(self) -> Tensor:
        """y = √x;  dx = g / (2y)"""
        y = np.sqrt(self.data)
        return Tensor._from_op(y, (self,), lambda g: self._accumulate(g / (2 * y)))

    def softmax(self, axis: int = -1, *, dim: int | None = None) -> Tensor:
        """y = exp(x − max) / Σ exp(x − max) over `axis` (or PyTorch's `dim`);  dx = y·(g − Σ g·y)."""
        axis = axis if dim is None else dim
        e = np.exp(self.data - self.data.max(axis=axis, keepdims=True))
        y = e / e.sum(axis=axis, keepdims=True)
        return Tensor._from_op(y, (self,), lambda g: self._accumulate(y * (g - (g * y).sum(axis=axis, keepdims=True))))

    # ----------------------------------------------------------------- reductions (PyTorch's dim=, keepdim= too)
    def sum(self, axis: Axes = None, keepdims: bool = False, *, dim: Axes = None, keepdim: bool = False) -> Tensor:
        """y = Σ x over `axis`;  dx = g broadcast back to x's shape"""
        axis, keepdims, x = axis if dim is None else dim, keepdims or keepdim, self

        def backward(g: np.ndarray) -> None:
            x._accumulate(np.broadcast_to(_keep_reduced_dims(g, x.ndim, axis, keepdims), x.shape))

        return Tensor._from_op(np.sum(x.data, axis=axis, keepdims=keepdims), (x,), backward)

    def mean(self, axis: Axes = None, keepdims: bool = False, *, dim: Axes = None, keepdim: bool = False) -> Tensor:
        """y = Σ x / n over `axis`"""
        axis, keepdims = axis if dim is None else dim, keepdims or keepdim
        axes = range(self.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
        n = int(np.prod([self.shape[a] for a in axes]))
        return self.sum(axis=axis, keepdims=keepdims) * (1.0 / n)

    def max(self, axis: Axes = None, keepdims: bool = False, *, dim: int | None = None,
            keepdim: bool = False) -> Tensor | MaxResult:
        """y = max x over `axis`; the gradient is shared equally among tied maxima. PyTorch's `dim=` gives PyTorch's
        answer, `(values, indices)`."""
        keepdims, x = keepdims or keepdim, self
        if dim is not None:
            return MaxResult(x.max(dim, keepdims), np.argmax(x.data, axis=dim, keepdims=keepdims))
        y = np.max(x.data, axis=axis, keepdims=keepdims)

        def backward(g: np.ndarray) -> None:
            y_full = _keep_reduced_dims(y, x.ndim, axis, keepdims)
            winners = x.data == y_full
            share = winners / np.sum(winners, axis=axis, keepdims=True)
            x._accumulate((_keep_reduced_dims(g, x.ndim, axis, keepdims) * share).astype(x.data.dtype))

        return Tensor._from_op(y, (x,), backward)

    # ----------------------------------------------------------------- shape ops
    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        """y = x with the same elements in `shape` (ints or one sequence, -1 allowed); dx = g reshaped back."""
        new_shape = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
        x = self
        return Tensor._from_op(x.data.reshape(new_shape), (x,), lambda g: x._accumulate(g.reshape(x.shape)))

    view = reshape  # PyTorch's name; NumPy's reshape is already a view when it can be, and a copy only otherwise

    def unsqueeze(self, dim: int) -> Tensor:
        """x with a new size-1 axis at `dim` (PyTorch's name for np.expand_dims): a reshape."""
        return self.reshape(np.expand_dims(self.data, dim).shape)

    def permute(self, *axes: int | Sequence[int]) -> Tensor:
        """Permute dimensions (no args: reverse them, like ndarray.transpose); dx = g permuted back."""
        order = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None)
        x = self
        y = np.transpose(x.data, order)
        inverse = None if order is None else np.argsort(order)
        return Tensor._from_op(y, (x,), lambda g: x._accumulate(np.transpose(g, inverse)))

    def transpose(self, *axes: int | Sequence[int]) -> Tensor:
        """Two axes: swap them at any rank, as torch.transpose(a, b) does; else `permute(*axes)`, NumPy's meaning
        (the two agree on a matrix's transpose(1, 0))."""
        if len(axes) == 2 and all(isinstance(a, int) for a in axes):
            order = list(range(self.ndim))
            order[axes[0]], order[axes[1]] = order[axes[1]], order[axes[0]]
            axes = (order,)
        return self.permute(*axes)

    @property
    def T(self) -> Tensor:
        return self.transpose()

    def __getitem__(self, index: object) -> Tensor:
        """y = x[index] (slices, integers, integer arrays, masks); dx scatters g back (adding repeats)."""
        x = self
        if isinstance(index, Tensor):
            index = index.data

        def backward(g: np.ndarray) -> None:
            dx = np.zeros_like(x.data)
            np.add.at(dx, index, g)
            x._accumulate(dx)

        return Tensor._from_op(x.data[index], (x,), backward)


# `x.max(dim=d)` as PyTorch returns it: the maxima (on the tape) and where they are (int64, no gradient).
class MaxResult(NamedTuple):
    values: Tensor
    indices: np.ndarray


def zero_grad(params: Iterable[Tensor]) -> None:
    """`p.zero_grad()` for every tensor: buffer views are zeroed in place, other gradients dropped."""
    for p in params:
        p.zero_grad()


# --------------------------------------------------------------------- broadcasting
def unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum g over the dims NumPy broadcast to reach g.shape from `shape` (the adjoint of broadcasting)."""
    if g.shape == shape:
        return g
    leading = g.ndim - len(shape)
    stretched = tuple(i + leading for i, n in enumerate(shape) if n == 1 and g.shape[i + leading] != 1)
    axes = tuple(range(leading)) + stretched
    return np.sum(g, axis=axes, keepdims=True).reshape(shape) if axes else g.reshape(shape)


def _check_broadcast(symbol: str, a: Tensor, b: Tensor, op: Callable) -> np.ndarray:
    try:
        return op(a.data, b.data)
    except ValueError as error:
        raise ValueError(f"{symbol}: shapes {a.shape} and {b.shape} do not broadcast ({error})") from None


def _keep_reduced_dims(g: np.ndarray, ndim: int, axis: int | tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
    """Re-insert the reduced dims of a reduction's output as size-1 dims, so it broadcasts against the input."""
    if keepdims:
        return g
    if axis is None:
        return g.reshape((1,) * ndim)
    axes = (axis,) if isinstance(axis, int) else axis
    return np.expand_dims(g, tuple(a % ndim for a in axes))
