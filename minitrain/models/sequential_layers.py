"""The layer kinds of `model.type: sequential`: one `SequentialLayer` record each in `LAYERS`, which the schema
(`LayerSpec`), the width filling and checking (`resolve_widths`), the parameter names and the model's build all
read (minitrain/models/sequential.py), so a new kind is one record here.

Each layer sees one example's shape, the batch left out: a table row is (F,) features; `embedding` makes it
(F, E); `reshape: {shape: [1, 8, 8]}` reads the row as an image (C, H, W) for `conv2d` and the 2d pools, or as a
sequence (C, L) for `conv1d` and the 1d pools, or (T, F) steps for `lstm`/`gru` (batch first, the output at every
step, (T, H)); `flatten` folds any shape back into one row for the last linear. None in a shape: not known yet
(the data's number of features will tell).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from minitrain import nn
from minitrain.autograd.conv import output_size
from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import DataError
from minitrain.common.registry import Registry
from minitrain.common.strict import Count, PositiveInt, Ratio, Section
from minitrain.nn import Module

Shape = tuple[int | None, ...]
Key = tuple[Any, ...]
Shapes = list[tuple[str, tuple[int | None, ...]]]
ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU, "sigmoid": nn.Sigmoid}


@dataclass(frozen=True)
class SequentialLayer:
    """One layer kind: `name` (its key in the list), `options` (the schema of its value: a Section or a type),
    `build(options, rng, dtype)` -> the Module, `resolve(options, shape, key)` -> its output shape (a DataError
    naming `key` where the input does not fit), `parameters(options)` -> [(name, shape)] in the module's order,
    `width_in` (the option that is the size of its input's axis `width_axis`, filled in from the layer before when
    left out), `reads_ids` (its input is whole-number ids, not floats: only as the first layer) and `example`
    (options and an input shape that the contract test builds and runs)."""

    name: str
    options: Any
    build: Callable[[Any, np.random.Generator, type], Module]
    example: tuple[Any, Shape]
    resolve: Callable[[Any, Shape, Key], Shape] = lambda options, shape, key: shape
    parameters: Callable[[Any], Shapes] = lambda options: []
    width_in: str | None = None
    width_axis: int = -1
    reads_ids: bool = False


class Flatten(Module):
    """(B, ...) -> (B, F): each example's values in one row."""

    def forward(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], -1)


class Reshape(Module):
    """(B, F) -> (B, *shape): each example's values read in `shape` (row-major, as NumPy's reshape)."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], *self.shape)

    def extra_repr(self) -> str:
        return f"{self.shape}"


class SequenceLSTM(nn.LSTM):
    """An LSTM over (B, T, F) whose output is the last layer's state at every step, (B, T, H): a layer of a stack."""

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x)[0]


class SequenceGRU(nn.GRU):
    """A GRU over (B, T, F) whose output is the last layer's state at every step, (B, T, H): a layer of a stack."""

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x)[0]


# --- the options of each kind ------------------------------------------------------------------------------------


class LinearLayer(Section):
    in_features: PositiveInt | None = Field(None, description="default: the previous layer's width (or the data's)")
    out_features: PositiveInt
    bias: bool = True


class LayerNormLayer(Section):
    dim: PositiveInt | None = Field(None, description="default: the previous layer's width")
    eps: float = Field(1e-5, gt=0)


class EmbeddingLayer(Section):
    num_embeddings: PositiveInt = Field(description="ids 0 .. num_embeddings − 1")
    embedding_dim: PositiveInt


class FlattenLayer(Section):
    """(B, ...) -> (B, F): after an embedding, a convolution or a pooling, before the last linear."""


class ReshapeLayer(Section):
    shape: list[PositiveInt] = Field(min_length=1, description="one example's new shape: [C, H, W], [C, L], [T, F]")


Pair = PositiveInt | Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]  # one number, or (height, width)
Padding = Count | Annotated[list[Count], Field(min_length=2, max_length=2)]


class ConvLayer(Section):
    in_channels: PositiveInt | None = Field(None, description="default: the channels before it (axis 0)")
    out_channels: PositiveInt
    kernel_size: Pair
    stride: Pair = 1
    padding: Padding = Field(0, description="zeros on each side")
    dilation: Pair = 1
    bias: bool = True


class PoolLayer(Section):
    kernel_size: Pair
    stride: Pair | None = Field(None, description="default: the kernel size (windows side by side)")
    padding: Padding = Field(0, description="on each side: at most half the kernel")


class RecurrentLayer(Section):
    input_size: PositiveInt | None = Field(None, description="default: the width before it (the last axis)")
    hidden_size: PositiveInt
    num_layers: PositiveInt = 1
    bias: bool = True


# --- how each kind maps its input shape to its output shape ---------------------------------------------------------


def _spatial(dims: int, conv: bool) -> Callable[[Any, Shape, Key], Shape]:
    """The resolve of a conv (`conv`: its out_channels) or a pool (the channels it is given) over `dims` axes after
    the channel axis: (C, *sizes) -> (channels, *windows); refused when the input is not (C, L) / (C, H, W), a
    pool's padding is more than half its kernel, or the kernel's span does not fit the padded input."""

    def resolve(options: dict[str, Any], shape: Shape, key: Key) -> Shape:
        if len(shape) != dims + 1:
            wanted = "(channels, length)" if dims == 1 else "(channels, height, width)"
            raise DataError(key, f"reads {wanted} per example, but its input is {shown(shape)}: put a reshape "
                                 f"(e.g. {{shape: [1, 8, 8]}} for an 8×8 image) before it")
        kernel, padding = _per_axis(options["kernel_size"], dims), _per_axis(options["padding"], dims)
        stride = kernel if options.get("stride") is None else _per_axis(options["stride"], dims)
        dilation = _per_axis(options.get("dilation", 1), dims)
        if any(len(v) != dims for v in (kernel, stride, padding, dilation)):
            raise DataError(key, f"takes {dims} number(s) per size option (kernel_size, stride, padding)")
        if not conv and any(2 * p > k for p, k in zip(padding, kernel, strict=True)):
            raise DataError((*key, "padding"), f"{options['padding']} is more than half the kernel "
                                               f"{options['kernel_size']}")
        sizes = []
        for size, k, s, p, d in zip(shape[1:], kernel, stride, padding, dilation, strict=True):
            if size is not None and output_size(size, k, s, p, d) < 1:
                raise DataError((*key, "kernel_size"), f"{options['kernel_size']} (dilation {d}, padding {p}) is "
                                                       f"larger than its input {shown(shape)}")
            sizes.append(None if size is None else output_size(size, k, s, p, d))
        return (options["out_channels"] if conv else shape[0], *sizes)

    return resolve


def _per_axis(value: int | list[int], dims: int) -> tuple[int, ...]:
    return (value,) * dims if isinstance(value, int) else tuple(value)


def shown(shape: Shape) -> str:
    return "(" + ", ".join("?" if n is None else str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _flatten(options: Any, shape: Shape, key: Key) -> Shape:
    if len(shape) < 2:
        raise DataError(key, f"flatten folds several axes into one, but its input {shown(shape)} is already one row")
    return (None if None in shape else math.prod(shape),)


def _reshape(options: dict[str, Any], shape: Shape, key: Key) -> Shape:
    if None not in shape and math.prod(shape) != math.prod(options["shape"]):
        raise DataError((*key, "shape"), f"{options['shape']} holds {math.prod(options['shape'])} values, but its "
                                         f"input {shown(shape)} has {math.prod(shape)}")
    return tuple(options["shape"])


def _sequence(options: dict[str, Any], shape: Shape, key: Key) -> Shape:
    if len(shape) != 2:
        raise DataError(key, f"reads (steps, features) per example, but its input is {shown(shape)}: put a reshape "
                             "(e.g. {shape: [8, 8]}) or an embedding before it")
    return shape[0], options["hidden_size"]


def _conv(options: dict[str, Any], rng: np.random.Generator, dtype: type, layer: type) -> Module:
    return layer(options["in_channels"], options["out_channels"], options["kernel_size"], options["stride"],
                 options["padding"], options["dilation"], options["bias"], rng=rng, dtype=dtype)


def _conv_shapes(options: dict[str, Any], dims: int) -> Shapes:
    kernel = options["kernel_size"]
    kernel = (kernel,) * dims if isinstance(kernel, int) else tuple(kernel)
    shapes = [("weight", (options["out_channels"], options.get("in_channels"), *kernel))]
    return shapes + [("bias", (options["out_channels"],))] * options.get("bias", True)


def _recurrent_shapes(options: dict[str, Any], gates: int) -> Shapes:
    rows, hidden, shapes = gates * options["hidden_size"], options["hidden_size"], []
    for layer in range(options.get("num_layers", 1)):
        width = options.get("input_size") if layer == 0 else hidden
        shapes += [(f"weight_ih_l{layer}", (rows, width)), (f"weight_hh_l{layer}", (rows, hidden))]
        shapes += [(f"bias_ih_l{layer}", (rows,)), (f"bias_hh_l{layer}", (rows,))] * options.get("bias", True)
    return shapes


def _recurrent(layer: type) -> Callable[[Any, np.random.Generator, type], Module]:
    return lambda o, rng, dtype: layer(o["input_size"], o["hidden_size"], o["num_layers"], o["bias"],
                                       batch_first=True, rng=rng, dtype=dtype)


def _pool(layer: type) -> Callable[[Any, np.random.Generator, type], Module]:
    return lambda o, rng, dtype: layer(o["kernel_size"], o["stride"], o["padding"])


CONV = {"out_channels": 2, "kernel_size": 2}
LAYERS: Registry[SequentialLayer] = Registry("sequential layer", [
    SequentialLayer("linear", LinearLayer, example=({"out_features": 3}, (4,)),
                    build=lambda o, rng, dtype: nn.Linear(o["in_features"], o["out_features"], o["bias"], rng=rng,
                                                       dtype=dtype),
                    resolve=lambda o, shape, key: (*shape[:-1], o["out_features"]),
                    parameters=lambda o: [("weight", (o.get("in_features"), o["out_features"]))] +
                                         [("bias", (o["out_features"],))] * o.get("bias", True),
                    width_in="in_features"),
    SequentialLayer("activation", Literal["relu", "tanh", "gelu", "sigmoid", "softmax"], example=("tanh", (2, 3)),
                    build=lambda o, rng, dtype: ACTIVATIONS[o]()),
    SequentialLayer("dropout", Ratio, example=(0.5, (4,)), build=lambda o, rng, dtype: nn.Dropout(o, rng=rng)),
    SequentialLayer("layer_norm", LayerNormLayer, example=({}, (2, 4)),
                    build=lambda o, rng, dtype: nn.LayerNorm(o["dim"], o["eps"], dtype=dtype),
                    parameters=lambda o: [("weight", (o.get("dim"),)), ("bias", (o.get("dim"),))], width_in="dim"),
    SequentialLayer("embedding", EmbeddingLayer, example=({"num_embeddings": 5, "embedding_dim": 3}, (4,)),
                    build=lambda o, rng, dtype: nn.Embedding(o["num_embeddings"], o["embedding_dim"], rng=rng,
                                                          dtype=dtype),
                    resolve=lambda o, shape, key: (*shape, o["embedding_dim"]),
                    parameters=lambda o: [("weight", (o["num_embeddings"], o["embedding_dim"]))], reads_ids=True),
    SequentialLayer("flatten", FlattenLayer, example=({}, (2, 3, 2)), build=lambda o, rng, dtype: Flatten(),
                    resolve=_flatten),
    SequentialLayer("reshape", ReshapeLayer, example=({"shape": [2, 3]}, (6,)),
                    build=lambda o, rng, dtype: Reshape(o["shape"]), resolve=_reshape),
    SequentialLayer("conv1d", ConvLayer, example=(CONV, (3, 5)),
                    build=lambda o, rng, dtype: _conv(o, rng, dtype, nn.Conv1d),
                    resolve=_spatial(1, conv=True),
                    parameters=lambda o: _conv_shapes(o, 1), width_in="in_channels", width_axis=0),
    SequentialLayer("conv2d", ConvLayer, example=({**CONV, "padding": 1, "stride": [1, 2]}, (3, 4, 5)),
                    build=lambda o, rng, dtype: _conv(o, rng, dtype, nn.Conv2d),
                    resolve=_spatial(2, conv=True),
                    parameters=lambda o: _conv_shapes(o, 2), width_in="in_channels", width_axis=0),
    SequentialLayer("max_pool1d", PoolLayer, example=({"kernel_size": 2}, (3, 5)), build=_pool(nn.MaxPool1d),
                    resolve=_spatial(1, conv=False)),
    SequentialLayer("max_pool2d", PoolLayer, example=({"kernel_size": 2}, (2, 4, 5)), build=_pool(nn.MaxPool2d),
                    resolve=_spatial(2, conv=False)),
    SequentialLayer("avg_pool1d", PoolLayer, example=({"kernel_size": 3, "stride": 1}, (3, 5)),
                    build=_pool(nn.AvgPool1d), resolve=_spatial(1, conv=False)),
    SequentialLayer("avg_pool2d", PoolLayer, example=({"kernel_size": [2, 3], "padding": 1}, (2, 4, 5)),
                    build=_pool(nn.AvgPool2d), resolve=_spatial(2, conv=False)),
    SequentialLayer("lstm", RecurrentLayer, example=({"hidden_size": 3, "num_layers": 2}, (4, 2)),
                    build=_recurrent(SequenceLSTM), resolve=_sequence,
                    parameters=lambda o: _recurrent_shapes(o, 4), width_in="input_size"),
    SequentialLayer("gru", RecurrentLayer, example=({"hidden_size": 3}, (4, 2)), build=_recurrent(SequenceGRU),
                    resolve=_sequence, parameters=lambda o: _recurrent_shapes(o, 3), width_in="input_size"),
])
