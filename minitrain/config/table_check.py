"""A table task's data, read for a config: the splits as arrays and the model's layers with the data's widths.

`load_table(cfg)` is what training builds from (training/run.py) and what `validate` checks (datacheck.py): it reads,
splits and preprocesses the data (minitrain/data/tables.py), fills the model's first width in from the number of
features and checks the output width against the classes (or the regression targets), naming the layer. A
problem is a `DataError` carrying the config key it is about, so `validate` reports it under that key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from minitrain.common.errors import DataError
from minitrain.config.schema import Config
from minitrain.data.tables import CLASSIFICATION, TableData, build_table_data
from minitrain.models.sequential import output_width, reads_ids, resolve_widths

Fold = tuple[int, int, bool, bool]  # (index, folds, shuffle, stratified)


def split_seed(cfg: Config) -> int:
    """data.split.seed, else training.data_seed."""
    split = cfg.data.split
    return split.seed if split is not None and split.seed is not None else cfg.training.data_seed


def fold_of(cfg: Config, index: int) -> Fold:
    cv = cfg.training.cross_validation
    return index, cv.folds, cv.shuffle, cv.stratified


def image_spec(cfg: Config) -> dict[str, Any] | None:
    """{"shape", and "mean", "std" from a normalize augmentation} when data.image_shape is given."""
    if cfg.data.image_shape is None:
        return None
    normalize = [step.options for step in cfg.data.augmentation if step.kind == "normalize"]
    return {"shape": list(cfg.data.image_shape),
            **({"mean": normalize[-1].mean, "std": normalize[-1].std} if normalize else {})}


def load_table(cfg: Config, fold: Fold | None = None) -> tuple[TableData, dict[str, Any]]:
    """The table's splits and pipeline, and the model's architecture with every width known."""
    layers = cfg.model.architecture()["layers"]
    embeds = reads_ids(layers)
    table = build_table_data(cfg.data, cfg.task, split_seed(cfg), np.dtype(cfg.model.dtype).type, fold, ids=embeds,
                             image=image_spec(cfg))
    widths = resolve_widths(layers, len(table.pipeline.features))
    _check_outputs(widths, table)
    return table, {"type": cfg.model.type, "layers": widths}


def _check_outputs(layers: list[Mapping[str, Any]], table: TableData) -> None:
    pipeline = table.pipeline
    wanted = len(pipeline.classes) if pipeline.task == CLASSIFICATION else table.splits["train"].target.shape[1]
    width = output_width(layers)
    if width != wanted:
        last = max(i for i, layer in enumerate(layers) if next(iter(layer)) == "linear")
        what = (f"{wanted} classes of {pipeline.target!r}" if pipeline.task == CLASSIFICATION
                else f"{wanted} regression target")
        raise DataError(("model", "layers", last, "linear", "out_features"), f"is {width}, but the data has {what}")
    if pipeline.task != CLASSIFICATION and layers and next(iter(layers[-1])) == "activation" and \
            layers[-1]["activation"] == "softmax":
        raise DataError(("model", "layers", len(layers) - 1), "softmax turns outputs into class probabilities; a "
                                                              "regression model outputs values (remove it)")
