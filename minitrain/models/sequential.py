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

Layer kinds, one record each in minitrain/models/sequential_layers.py's `LAYERS`: `linear` {in_features,
out_features, bias}, `activation` relu | tanh | gelu | sigmoid | softmax, `dropout` p, `layer_norm` {dim, eps},
`embedding` {num_embeddings, embedding_dim} (reads whole-number ids), `flatten` (one row per example),
`reshape` {shape} (a row read as an image (C, H, W), a sequence (C, L) or steps (T, F)), `conv1d`/`conv2d`
{in_channels, out_channels, kernel_size, stride, padding, dilation, bias}, `max_pool1d/2d`, `avg_pool1d/2d`
{kernel_size, stride, padding}, `lstm`/`gru` {input_size, hidden_size, num_layers, bias} (batch first, the output
at every step). Layer i of the list is module `layers.i`, so its parameters are `layers.0.weight`,
`layers.0.bias`, ... as `repr(model)` shows. A digits CNN:

    - reshape: {shape: [1, 8, 8]}           64 pixels -> one 8×8 channel
    - conv2d: {out_channels: 16, kernel_size: 3, padding: 1}
    - activation: relu
    - max_pool2d: {kernel_size: 2}           (16, 4, 4)
    - flatten: {}                            256
    - linear: {out_features: 10}

A softmax as the last layer is folded into the loss: the model outputs the logits z, and the classification loss,
cross-entropy, applies the softmax inside itself as log Σ exp(z) − z_target, one stable step, instead of taking
the log of a rounded probability (`nn.Softmax`'s docstring). `predict` applies it to report probabilities.

`resolve_widths(layers, in_features)` follows one example's shape through the layers from the data's number of
features, fills every width left out (a linear's in_features, a conv's in_channels) and checks each layer
against its input: a width that does not fit, a conv after a flat layer or a kernel larger than its input is an
error naming the layer. The model's `config` holds the resolved layers, so a saved model rebuilds exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, create_model

from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import DataError
from minitrain.common.strict import OneOf, Section
from minitrain.models.family import FileSchema, ModelFamily
from minitrain.models.sequential_layers import LAYERS, Shape, shown
from minitrain.nn import Module, Sequential

KEY = ("model", "layers")


def _kind(layer: Mapping[str, Any]) -> tuple[str, Any]:
    (kind, options), = layer.items()
    return kind, options


def reads_ids(layers: Sequence[Mapping[str, Any]]) -> bool:
    """True when the first layer reads whole-number ids (an embedding), not floats."""
    return bool(layers) and LAYERS[_kind(layers[0])[0]].reads_ids


def folds_softmax(layers: Sequence[Mapping[str, Any]]) -> bool:
    """True when the last layer is a softmax activation (the loss applies it)."""
    return bool(layers) and _kind(layers[-1]) == ("activation", "softmax")


def resolve_widths(layers: Sequence[Mapping[str, Any]], in_features: int | None) -> list[dict[str, Any]]:
    """The layers with every width filled in and checked, and every option's default: a layer's `width_in` (a
    linear's in_features, a conv's in_channels) is its input's size on that axis, from the layer before. One
    example's shape is followed from (in_features,) (None: only check what the config gives, the data's size
    unknown); each layer's `resolve` gives its output shape or an error naming the layer, and the last layer must
    give one row (K,) of outputs."""
    shape: Shape = (in_features,)
    resolved = []
    for index, layer in enumerate(layers):
        if _kind(layer) == ("activation", "softmax") and index != len(layers) - 1:
            raise DataError((*KEY, index, "activation"), "softmax can only be the last layer (the loss applies it "
                                                         "there)")
        options, shape = resolve_layer(index, layer, shape)
        resolved.append(options)
    if len(shape) != 1:
        raise DataError((*KEY, len(layers) - 1), f"gives {shown(shape)} per example, but a table model outputs one "
                                                 "row: put a flatten before the last linear")
    return resolved


def resolve_layer(index: int, layer: Mapping[str, Any], shape: Shape) -> tuple[dict[str, Any], Shape]:
    """Layer `index` ({kind: options}) over one example of `shape`: ({kind: options with its width and defaults
    filled in}, its output shape), or a DataError naming the layer (or its option)."""
    kind, options = _kind(layer)
    record = LAYERS.pick(kind, f"model.layers[{index}]")
    options = dict(options) if isinstance(options, Mapping) else options
    key = (*KEY, index, kind)
    if record.width_in:  # its input width: the one before it, or none yet (None: the data will tell)
        given, width = options.get(record.width_in), shape[record.width_axis]
        if given is not None and width is not None and given != width:
            raise DataError((*key, record.width_in), f"is {given}, but the {_source(index)} gives {width}")
        options[record.width_in] = given if given is not None else width
    if isinstance(options, dict):  # each option left out takes its default, so the saved config is complete
        for name, field in record.options.model_fields.items():
            if not field.is_required():
                options.setdefault(name, field.default)
    return {kind: options}, record.resolve(options, shape, key)


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
    return [(f"layers.{index}.{name}", shape) for index, (kind, options) in enumerate(map(_kind, layers))
            for name, shape in LAYERS[kind].parameters(options)]


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
        built = [LAYERS[kind].build(options, rng, dtype)
                 for kind, options in map(_kind, resolved[: -1 if self.softmax_folded else None])]
        self.layers = Sequential(*built)
        self.embeds = reads_ids(resolved)

    def forward(self, x: np.ndarray | Tensor) -> Tensor:
        """x (B, F) floats, or int ids when the first layer is an embedding -> outputs (B, K)."""
        if not self.embeds and not isinstance(x, Tensor):
            x = Tensor(x)
        return self.layers(x)

    def extra_repr(self) -> str:
        return "softmax folded into the loss" if self.softmax_folded else ""


# --- the family record: how configs, model files and run folders name it (minitrain/models/family.py) ---------
# `model.layers`, in the spec's words: each layer a mapping of one key naming its kind.


LayerSpec = create_model(  # one optional field per layer kind, exactly one given (OneOf)
    "LayerSpec", __base__=OneOf, __doc__="One layer of a sequential model (minitrain/models/sequential.py).",
    **{name: (record.options | None, None) for name, record in LAYERS.items()})


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
