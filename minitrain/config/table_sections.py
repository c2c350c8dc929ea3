"""The config sections of table tasks: `data.split`, `data.preprocessing`, `data.augmentation` and
`training.cross_validation` (docs/yaml-mode.md documents each key; `model.layers` is the sequential family's own,
minitrain/models/sequential.py).

A preprocessing step or an augmentation is written as the spec writes it, a mapping with one key that names its
kind: `- normalize: {method: minmax}`, `- random_crop: {...}`. Each is a `OneOf` section: exactly one of its keys
is given, and only that one is dumped back (config.resolved.yaml).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from minitrain.common.strict import MAX_COUNT, Count, OneOf, PositiveInt, Ratio, Section

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
ColumnList = list[Annotated[str, Field(min_length=1)]]


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
    padding: Count = Field(0, description="zeros added on every side before cropping")


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


# --- training.cross_validation -----------------------------------------------------------------------------------


class CrossValidationConfig(Section):
    """Train `folds` models, each validated on one fold of train + val and trained on the others."""

    folds: int = Field(5, ge=2, le=MAX_COUNT)
    stratified: bool = Field(True, description="each fold keeps the classes' proportions")
    shuffle: bool = Field(True, description="shuffle the rows (by the split seed) before cutting folds")
