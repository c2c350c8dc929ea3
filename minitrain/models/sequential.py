"""`model.type: sequential`: a stack of `minitrain.nn` layers written as a list in the config (the spec's §3.2).

    model:
      type: sequential                  (the spec: model.architecture.type: sequential)
      layers:
        - linear: {in_features: 64, out_features: 128}
        - activation: relu
        - dropout: 0.2
        - linear: {out_features: 10}     in_features left out: the previous layer's width
        - activation: softmax            folded into the loss (below)

    x (B, F) ──► layers.0 ──► layers.1 ──► ... ──► outputs (B, K): class scores (logits) or predicted values

Layer kinds: `linear` {in_features, out_features, bias}, `activation` relu | tanh | gelu | sigmoid | softmax,
`dropout` p, `layer_norm` {dim, eps}, `embedding` {num_embeddings, embedding_dim} (reads whole-number ids) and
`flatten` ((B, F, E) -> (B, F·E), after an embedding). Layer i of the list is module `layers.i`, so its
parameters are `layers.0.weight`, `layers.0.bias`, ... as `repr(model)` shows.

A softmax as the last layer is folded into the loss: the model outputs the logits z, and the classification loss,
cross-entropy, applies the softmax inside itself as log Σ exp(z) − z_target, one stable step, instead of taking
the log of a rounded probability (`nn.Softmax`'s docstring). `predict` applies it to report probabilities.

`resolve_widths(layers, in_features)` fills every width left out from the data's number of features; a width
that does not fit the one before it is an error naming the layer. The model's `config` holds the resolved
layers, so a saved model rebuilds exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import DataError
from minitrain.common.strict import OneOf, PositiveInt, Ratio, Section
from minitrain.models.family import FileSchema, ModelFamily
from minitrain.nn import GELU, Dropout, Embedding, LayerNorm, Linear, Module, ReLU, Sequential, Sigmoid, Tanh

ACTIVATIONS = {"relu": ReLU, "tanh": Tanh, "gelu": GELU, "sigmoid": Sigmoid}
KEY = ("model", "layers")
WIDTH_IN = {"linear": "in_features", "layer_norm": "dim"}  # the option that is the width of a layer's input


def _kind(layer: Mapping[str, Any]) -> tuple[str, Any]:
    (kind, options), = layer.items()
    return kind, options


def folds_softmax(layers: Sequence[Mapping[str, Any]]) -> bool:
    """True when the last layer is a softmax activation (the loss applies it)."""
    return bool(layers) and _kind(layers[-1]) == ("activation", "softmax")


def resolve_widths(layers: Sequence[Mapping[str, Any]], in_features: int | None) -> list[dict[str, Any]]:
    """The layers with every width filled in and checked: a linear's in_features (and a layer_norm's dim) is the
    width before it. `in_features` is the data's feature count (None: only check the widths the config gives, and
    leave the first ones unknown).

    Width is tracked as the size of the last axis; an embedding makes it embedding_dim over (B, F) ids, and
    flatten multiplies it by the number of features F it folds in."""
    width, features, resolved = in_features, in_features, []
    for index, layer in enumerate(layers):
        kind, options = _kind(layer)
        options = dict(options) if isinstance(options, Mapping) else options
        key = (*KEY, index, kind)
        if kind == "activation" and options == "softmax" and index != len(layers) - 1:
            raise DataError(key, "softmax can only be the last layer (the loss applies it there)")
        if kind in WIDTH_IN:  # its input width: the one before it, or none yet (None: the data will tell)
            given = options.get(WIDTH_IN[kind])
            if given is not None and width is not None and given != width:
                raise DataError((*key, WIDTH_IN[kind]), f"is {given}, but the {_source(index)} gives {width}")
            options[WIDTH_IN[kind]] = given if given is not None else width
        if kind == "linear":
            options.setdefault("bias", True)
            width = options["out_features"]
        elif kind == "layer_norm":
            options.setdefault("eps", 1e-5)
        elif kind == "embedding":
            width = options["embedding_dim"]
        elif kind == "flatten":
            if index == 0 or _kind(resolved[-1])[0] != "embedding":
                raise DataError(key, "flatten folds an embedding's vectors into one row: put it right after one")
            width = None if features is None else features * width
        resolved.append({kind: options})
    return resolved


def _source(index: int) -> str:
    return "data (its number of features)" if index == 0 else f"layer before it (layers[{index - 1}])"


def output_width(layers: Sequence[Mapping[str, Any]]) -> int | None:
    """The width of the model's output: the last linear's out_features (None without a linear layer)."""
    for layer in reversed(layers):
        kind, options = _kind(layer)
        if kind == "linear":
            return options["out_features"]
    return None


def parameter_shapes(layers: Sequence[Mapping[str, Any]]) -> list[tuple[str, tuple[int | None, ...]]]:
    """Every parameter's name and shape without building the model (a width not yet known is None)."""
    shapes = []
    for index, layer in enumerate(layers):
        kind, options = _kind(layer)
        if kind == "linear":
            shapes.append((f"layers.{index}.weight", (options.get("in_features"), options["out_features"])))
            if options.get("bias", True):
                shapes.append((f"layers.{index}.bias", (options["out_features"],)))
        elif kind == "layer_norm":
            shapes += [(f"layers.{index}.{name}", (options.get("dim"),)) for name in ("weight", "bias")]
        elif kind == "embedding":
            shapes.append((f"layers.{index}.weight", (options["num_embeddings"], options["embedding_dim"])))
    return shapes


class Flatten(Module):
    """(B, F, E) -> (B, F·E): each row's vectors side by side."""

    def forward(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], -1)


class SequentialModel(Module):
    """The layers of `layers` (resolved widths, see `resolve_widths`) applied in order: `outputs = model(x)`."""

    def __init__(
        self, layers: Sequence[Mapping[str, Any]], rng: np.random.Generator | int = 0, dtype: type = np.float32
    ) -> None:
        super().__init__()
        self.rng = rng = np.random.default_rng(rng)
        resolved = resolve_widths(layers, None)
        if any(None in shape for _, shape in parameter_shapes(resolved)):
            raise ValueError("SequentialModel: every width must be known; fill them in with resolve_widths(layers, "
                             "in_features)")
        self.config = {"type": "sequential", "layers": resolved}
        self.softmax_folded = folds_softmax(resolved)
        built = [self._build(_kind(layer), rng, dtype) for layer in resolved[: -1 if self.softmax_folded else None]]
        self.layers = Sequential(*built)
        self.embeds = bool(resolved) and _kind(resolved[0])[0] == "embedding"

    @staticmethod
    def _build(kind_options: tuple[str, Any], rng: np.random.Generator, dtype: type) -> Module:
        kind, options = kind_options
        if kind == "linear":
            return Linear(options["in_features"], options["out_features"], options.get("bias", True), rng=rng,
                          dtype=dtype)
        if kind == "activation":
            return ACTIVATIONS[options]()
        if kind == "dropout":
            return Dropout(options, rng=rng)
        if kind == "layer_norm":
            return LayerNorm(options["dim"], options.get("eps", 1e-5), dtype=dtype)
        if kind == "embedding":
            return Embedding(options["num_embeddings"], options["embedding_dim"], rng=rng, dtype=dtype)
        if kind == "flatten":
            return Flatten()
        raise ValueError(f"SequentialModel: unknown layer kind {kind!r}")

    def forward(self, x: np.ndarray | Tensor) -> Tensor:
        """x (B, F) floats, or int ids when the first layer is an embedding -> outputs (B, K)."""
        if not self.embeds and not isinstance(x, Tensor):
            x = Tensor(x)
        return self.layers(x)

    def extra_repr(self) -> str:
        return "softmax folded into the loss" if self.softmax_folded else ""


# --- the family record: how configs, model files and run folders name it (minitrain/models/family.py) ---------
# `model.layers`, in the spec's words: each layer a mapping of one key naming its kind.


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
    """(B, F, E) -> (B, F·E), after an embedding."""


ActivationName = Literal["relu", "tanh", "gelu", "sigmoid", "softmax"]


class LayerSpec(OneOf):
    """One layer of a sequential model (minitrain/models/sequential.py), in the spec's words."""

    linear: LinearLayer | None = None
    activation: ActivationName | None = None
    dropout: Ratio | None = None
    layer_norm: LayerNormLayer | None = None
    embedding: EmbeddingLayer | None = None
    flatten: FlattenLayer | None = None


class SequentialKeys(Section):
    """`model:` keys of `type: sequential`."""

    layers: list[LayerSpec] | None = Field(None, min_length=1, description="sequential: the layers, in order")


class SequentialFile(FileSchema):
    """A sequential model file's `model_config`: its resolved layer list, each layer a one-key mapping."""

    type: Literal["sequential"]
    layers: list[Annotated[dict[str, Any], Field(min_length=1, max_length=1)]] = Field(min_length=1)


def _width(config: Mapping[str, Any]) -> int:
    widths = [options["out_features"] for kind, options in map(_kind, config["layers"]) if kind == "linear"]
    return max(widths, default=1)


FAMILY = ModelFamily(name="sequential", model=SequentialModel, keys=SequentialKeys, file_schema=SequentialFile,
                     file_prefix="sequential", reads="table",
                     parameter_shapes=lambda config: parameter_shapes(config["layers"]), width=_width,
                     example={"type": "sequential", "layers": [{"linear": {"out_features": 16}}, {"activation": "relu"},
                                                               {"linear": {"out_features": 10}},
                                                               {"activation": "softmax"}]})
