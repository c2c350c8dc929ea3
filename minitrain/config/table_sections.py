"""The config sections of table tasks: `data.split`, `data.preprocessing`, `data.augmentation`, `model.layers` and
`training.cross_validation` (docs/yaml-mode.md documents each key).

A preprocessing step, an augmentation or a layer is written as the spec writes it, a mapping with one key that
names its kind: `- normalize: {method: minmax}`, `- dropout: 0.2`, `- activation: relu`. Each is a `OneOf`
section: exactly one of its keys is given, and only that one is dumped back (config.resolved.yaml).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_serializer, model_validator

from minitrain.config.section import PositiveInt, Section

Ratio = Annotated[float, Field(ge=0.0, lt=1.0)]
Probability = Annotated[float, Field(ge=0.0, le=1.0)]
ColumnList = list[Annotated[str, Field(min_length=1)]]


class OneOf(Section):
    """A mapping of exactly one key, naming the kind of the entry; the others stay None and are not dumped."""

    @model_validator(mode="after")
    def _exactly_one(self) -> OneOf:
        given = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(given) != 1:
            kinds = ", ".join(type(self).model_fields)
            raise ValueError(f"write one of {kinds} per entry (got {', '.join(given) or 'none'})")
        return self

    @model_serializer(mode="wrap")
    def _only_the_given_one(self, handler: Any) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}

    @property
    def kind(self) -> str:
        return next(name for name in type(self).model_fields if getattr(self, name) is not None)

    @property
    def options(self) -> Any:
        return getattr(self, self.kind)


# --- data.split ------------------------------------------------------------------------------------------------


class SplitConfig(Section):
    """Split the rows of data.source by ratios (train + val + test = 1), stratified by a column if named."""

    train: float = Field(gt=0.0, lt=1.0)
    val: float = Field(gt=0.0, lt=1.0)
    test: Ratio = 0.0
    stratify: str | None = Field(None, min_length=1, description="column whose classes each split keeps in "
                                                                 "proportion (usually the target)")
    seed: int | None = Field(None, ge=0, lt=2**63, description="default: training.data_seed")


# --- data.preprocessing ------------------------------------------------------------------------------------------


class NormalizeStep(Section):
    columns: ColumnList | None = Field(None, description="default: every numeric feature column")
    method: Literal["minmax", "zscore", "robust"] = "zscore"


class EncodeStep(Section):
    columns: ColumnList = Field(min_length=1)
    method: Literal["onehot", "label", "ordinal"] = "onehot"
    categories: list[str | int | float] | None = Field(None, description="ordinal: the categories in order")


class DropStep(Section):
    columns: ColumnList = Field(min_length=1)


class FillnaStep(Section):
    columns: ColumnList | None = Field(None, description="default: every column with a missing value")
    strategy: Literal["mean", "median", "mode", "constant"] = "mean"
    value: str | int | float | None = Field(None, description="strategy constant: the value")


class PreprocessingStep(OneOf):
    """One step of data.preprocessing (minitrain/data/preprocessing.py)."""

    normalize: NormalizeStep | None = None
    encode: EncodeStep | None = None
    drop: DropStep | None = None
    fillna: FillnaStep | None = None


# --- data.augmentation -------------------------------------------------------------------------------------------


class SwapOrDelete(Section):
    probability: Probability = 0.1


class RandomCrop(Section):
    size: list[PositiveInt] = Field(min_length=2, max_length=2, description="[height, width] of the crop")
    padding: int = Field(0, ge=0, description="zeros added on every side before cropping")


class HorizontalFlip(Section):
    probability: Probability = 0.5


class ImageNormalize(Section):
    mean: list[float] = Field(min_length=1, description="one per channel")
    std: list[Annotated[float, Field(gt=0)]] = Field(min_length=1, description="one per channel")


class AugmentationStep(OneOf):
    """One entry of data.augmentation (minitrain/data/augmentation.py)."""

    random_swap: SwapOrDelete | None = None
    random_delete: SwapOrDelete | None = None
    random_crop: RandomCrop | None = None
    horizontal_flip: HorizontalFlip | None = None
    normalize: ImageNormalize | None = None


TEXT_AUGMENTATIONS = ("random_swap", "random_delete")
IMAGE_AUGMENTATIONS = ("random_crop", "horizontal_flip", "normalize")


# --- model.layers --------------------------------------------------------------------------------------------------


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


# --- training.cross_validation -----------------------------------------------------------------------------------


class CrossValidationConfig(Section):
    """Train `folds` models, each validated on one fold of train + val and trained on the others."""

    folds: int = Field(5, ge=2)
    stratified: bool = Field(True, description="each fold keeps the classes' proportions")
    shuffle: bool = Field(True, description="shuffle the rows (by the split seed) before cutting folds")
