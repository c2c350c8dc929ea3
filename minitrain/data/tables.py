"""A table as training data: features and a target, split, preprocessed, as arrays the batchers serve.

    files (data/locate.py) → tables (data/formats.py, pyarrow) → split (data/row_split.py, or the split files)
      → target column out: classes encoded (classification) or float (regression)
      → preprocessing fitted on train, applied to every split (data/preprocessing.py)
      → TableBatch(input (N, F) floats, target (N,) class ids or (N, 1) floats) per split

The target is the column `data.target` names (default `label`); every other column is a feature unless a `drop`
step removes it. After preprocessing every feature must be a number with no missing value; a text column left
unencoded, or a gap left unfilled, is an error naming the column and row.

`TablePipeline` is everything that turns raw rows into model inputs and outputs back into labels (the task, the
target, its classes, the columns expected, the fitted preprocessing, the final feature names); it is saved, as
JSON, in the model file and the run folder, so `minitrain predict` applies exactly what training did.

The task is `classification` or `regression` when given; inferred, a target of text, booleans or whole numbers
means classification and one of other numbers regression.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from minitrain.common.errors import DataError
from minitrain.common.io import sha256_of
from minitrain.data.augmentation import image_normalize
from minitrain.data.formats import pyarrow_module, read_table
from minitrain.data.locate import locate
from minitrain.data.preprocessing import (
    Columns,
    Preprocessing,
    category_codes,
    first_text,
    is_numeric,
    missing,
    plain_value,
    sorted_categories,
)
from minitrain.data.row_split import fold_rows, split_rows

CLASSIFICATION, REGRESSION = "classification", "regression"
TARGET_KEY = ("data", "target")


class TableBatch(NamedTuple):
    """`input` (B, F) features (floats; int64 ids when the model starts with an embedding), `target` (B,) int64
    class ids or (B, 1) floats."""

    input: np.ndarray
    target: np.ndarray


def columns_of(table: Any, where: str = "the table") -> Columns:
    """A pyarrow Table as {name: NumPy column}: numbers (and booleans) as float64 with NaN for missing values,
    anything else as Python objects with None.

    Refused with a DataError naming `where` (the file), the row and the column: a column name or a cell that is
    not UTF-8 text (pyarrow's CSV reader keeps such cells as bytes), and an infinite number, which no
    preprocessing step can turn into a feature (NaN is a missing value: fillna fills it)."""
    pa = pyarrow_module()
    columns = {}
    names = [_column_name(table.schema, index, where) for index in range(table.num_columns)]
    for name, column in zip(names, table.columns, strict=True):
        kind = column.type
        if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
            values = column.to_numpy(zero_copy_only=False).astype(np.float64)
            infinite = np.flatnonzero(np.isinf(values))
            if infinite.size:
                raise DataError(("data",), f"{where}, row {infinite[0] + 1}, column {name!r}: "
                                           f"{values[infinite[0]]} is not a finite number")
            columns[name] = values
        elif pa.types.is_null(kind):
            columns[name] = np.full(len(column), np.nan)
        else:
            values = column.to_pylist()
            row = next((i for i, v in enumerate(values) if isinstance(v, bytes) and not _is_utf8(v)), None)
            if row is not None:
                raise DataError(("data",), f"{where}, row {row + 1}, column {name!r}: {values[row]!r} is not UTF-8 "
                                           "text")
            columns[name] = np.array(values, dtype=object)
    return columns


def _column_name(schema: Any, index: int, where: str) -> str:
    try:
        return schema.field(index).name
    except UnicodeDecodeError:  # pyarrow keeps a header's bytes as they are and decodes them when asked
        raise DataError(("data",), f"{where}, the header: the name of column {index + 1} is not UTF-8 "
                                   "text") from None


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def columns_sha256(columns: Columns) -> str:
    """sha256 of a split's rows, column by column (name, then float64 bytes or the values' reprs)."""
    digest = hashlib.sha256()
    for name, column in columns.items():
        digest.update(name.encode("utf-8") + b"\0")
        if is_numeric(column):
            digest.update(np.ascontiguousarray(column, dtype="<f8").tobytes())
        else:
            digest.update("\x1f".join(repr(v) for v in column).encode("utf-8"))
    return digest.hexdigest()


def take_rows(columns: Columns, rows: np.ndarray) -> Columns:
    return {name: column[rows] for name, column in columns.items()}


@dataclass
class TablePipeline:
    """Raw rows -> model inputs, and model outputs -> labels (see the module docstring). JSON via to_dict."""

    task: str
    target: str
    columns: list[str]  # the raw feature columns the preprocessing expects
    preprocessing: Preprocessing
    features: list[str]  # the model's inputs, in order, after preprocessing
    classes: list[Any] | None = None  # classification: class id i is classes[i]
    image: dict[str, Any] | None = None  # {"shape", and "mean", "std" to normalize}: rows read as images

    def __post_init__(self) -> None:
        if self.image is not None and math.prod(self.image["shape"]) != len(self.features):
            raise DataError(("data", "image_shape"), f"{self.image['shape']} holds {math.prod(self.image['shape'])} "
                                                     f"pixels, but the rows have {len(self.features)} features")

    def features_of(self, columns: Columns, where: str) -> np.ndarray:
        """(N, F) float64 features of raw `columns` (a split, or predict input), preprocessed."""
        absent = [name for name in self.columns if name not in columns]
        if absent:
            raise DataError(("data",), f"{where} has no column {absent[0]!r} (the model reads "
                                       f"{', '.join(self.columns[:6])}{', ...' if len(self.columns) > 6 else ''})")
        done = self.preprocessing.transform({name: columns[name] for name in self.columns}, where)
        x = feature_matrix(done, where)
        if self.image is not None and "mean" in self.image:
            x = image_normalize(x, self.image["shape"], self.image["mean"], self.image["std"])
        return x

    def targets_of(self, column: np.ndarray, where: str) -> np.ndarray:
        """Class ids (N,) int64, or values (N, 1) float64, of a raw target column."""
        gaps = missing(column)
        if gaps.any():
            raise DataError(TARGET_KEY, f"{where}, row {int(np.flatnonzero(gaps)[0]) + 1}: the target "
                                        f"{self.target!r} is missing")
        if self.task == REGRESSION:
            if not is_numeric(column):
                raise DataError(TARGET_KEY, f"{where}: a regression target must be numbers; {self.target!r} holds text")
            return column.astype(np.float64).reshape(-1, 1)
        ids, row = category_codes(column, self.classes)
        if row is not None:
            raise DataError(TARGET_KEY, f"{where}, row {row + 1}: class {plain_value(column[row])!r} of "
                                        f"{self.target!r} never occurs in the training split (classes: "
                                        f"{self.classes[:10]})")
        return ids

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "target": self.target, "columns": list(self.columns),
                "preprocessing": self.preprocessing.to_dict(), "features": list(self.features),
                "classes": self.classes, "image": self.image}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TablePipeline:
        return cls(data["task"], data["target"], list(data["columns"]), Preprocessing.from_dict(data["preprocessing"]),
                   list(data["features"]), data.get("classes"), data.get("image"))


def feature_matrix(columns: Columns, where: str) -> np.ndarray:
    """(N, F) float64 from preprocessed columns; a text column or a missing value is an error naming it."""
    for name, column in columns.items():
        if not is_numeric(column):
            row = first_text(column)
            raise DataError(("data", "preprocessing"), f"{where}, row {row + 1}, column {name!r}: {column[row]!r} is "
                                                       "not a number; encode the column (onehot, label, ordinal) or "
                                                       "drop it")
        gaps = np.isnan(column)
        if gaps.any():
            raise DataError(("data", "preprocessing"), f"{where}, row {int(np.flatnonzero(gaps)[0]) + 1}, column "
                                                       f"{name!r}: missing value; add a fillna step or drop it")
    if not columns:
        raise DataError(("data", "preprocessing"), f"{where}: no feature column is left")
    return np.stack([np.asarray(c, dtype=np.float64) for c in columns.values()], axis=1)


def infer_task(column: np.ndarray) -> str:
    """classification for text, booleans or whole numbers; regression for other numbers."""
    if not is_numeric(column):
        return CLASSIFICATION
    values = column[~np.isnan(column)]
    return CLASSIFICATION if np.all(values == np.round(values)) else REGRESSION


@dataclass
class TableData:
    """The splits as arrays, the pipeline that made them, and what the manifest records about them."""

    pipeline: TablePipeline
    splits: dict[str, TableBatch]
    info: dict[str, Any] = field(default_factory=dict)


def read_splits(data: Any, seed: int, fold: tuple[int, int, bool, bool] | None = None) -> tuple[dict[str, Columns],
                                                                                                   dict[str, Any]]:
    """{split: raw columns} and the manifest's record of them (files with sha256, each split's rows and sha256).

    `data` is the config's data section; `seed` the split seed. `fold` = (index, folds, shuffle, stratified):
    the rows of train and val are pooled, and fold `index` of `folds` becomes val (cross-validation)."""
    files = locate(data.source, {"train": data.train_path, "val": data.val_path, "test": data.test_path})
    # A format not written is each file's extension's (lab 01's default, jsonl, is about the verb corpus).
    fmt = data.format if "format" in data.model_fields_set and data.format != "auto" else None
    raw = {split: _concat([columns_of(read_table(p, fmt), str(p)) for p in paths], paths)
           for split, paths in files.items()}
    target = data.target
    for split, columns in raw.items():
        if target not in columns:
            names = ", ".join(list(columns)[:8])
            where = "the data" if split == "all" else f"the {split} data"
            raise DataError(TARGET_KEY, f"column {target!r} is not in {where} ({names}...); name the target column "
                                        "with data.target")
    if "all" in raw:
        if data.split is None:
            raise DataError(("data", "split"), f"{files['all'][0]} holds every row: say how to split it, e.g. "
                                               "data.split: {train: 0.8, val: 0.1, test: 0.1}")
        everything = raw.pop("all")
        labels = _stratify_labels(everything, data.split.stratify)
        ratios = {"train": data.split.train, "val": data.split.val, "test": data.split.test}
        raw = {name: take_rows(everything, rows) for name, rows in
               split_rows(len(labels if labels is not None else everything[target]), ratios, seed, labels).items()}
    elif "val" not in raw:
        raise DataError(("data", "source"), "no val split: name a validation file, or give one file and data.split")
    if fold is not None:
        raw = _fold(raw, fold, seed, target)
    info = {"files": [{"path": str(p), "sha256": sha256_of(p)} for paths in files.values() for p in paths],
            "splits": {split: {"rows": len(next(iter(c.values()))), "sha256": columns_sha256(c)}
                       for split, c in raw.items()}}
    return raw, info


def _concat(parts: Sequence[Columns], paths: Sequence[Path]) -> Columns:
    names = list(parts[0])
    for part, path in zip(parts[1:], paths[1:], strict=True):
        if list(part) != names:
            raise DataError(("data", "source"), f"{path}: its columns differ from {paths[0]}'s")
    return {n: np.concatenate([p[n] for p in parts]) for n in names}


def _stratify_labels(columns: Columns, name: str | None) -> np.ndarray | None:
    if name is None:
        return None
    if name not in columns:
        raise DataError(("data", "split", "stratify"), f"column {name!r} is not in the data")
    return np.array([str(plain_value(v)) for v in columns[name]])  # 3.0 and 3 are one class


def _fold(raw: dict[str, Columns], fold: tuple[int, int, bool, bool], seed: int, target: str) -> dict[str, Columns]:
    index, folds, shuffle, stratified = fold
    pooled = _concat([raw["train"], raw["val"]], [Path("train"), Path("val")])
    labels = _stratify_labels(pooled, target) if stratified else None
    parts = fold_rows(len(pooled[target]), folds, seed, shuffle, labels)
    val_rows = parts[index]
    train_rows = np.sort(np.concatenate([p for i, p in enumerate(parts) if i != index]))
    return {"train": take_rows(pooled, train_rows), "val": take_rows(pooled, val_rows),
            **({"test": raw["test"]} if "test" in raw else {})}


def build_table_data(data: Any, task: str | None, seed: int, dtype: type = np.float32,
                     fold: tuple[int, int, bool, bool] | None = None, ids: bool = False,
                     image: dict[str, Any] | None = None) -> TableData:
    """Read, split and preprocess the table the config's `data` section describes (see the module docstring).

    `task`: classification, regression, or None to infer it. `ids`: the model starts with an embedding, so
    features are int64 ids (each must be a whole number ≥ 0). `image`: {"shape", "mean", "std"} when the rows
    are images (data.image_shape; the normalize augmentation), checked against the number of features."""
    raw, info = read_splits(data, seed, fold)
    target_column = raw["train"][data.target]
    task = task or infer_task(target_column)
    features = {name: c for name, c in raw["train"].items() if name != data.target}
    steps = [step.model_dump(exclude_none=True) if hasattr(step, "model_dump") else step
             for step in (data.preprocessing or [])]
    preprocessing, done = Preprocessing.fit(steps, features)
    classes = None
    if task == CLASSIFICATION:
        gaps = missing(target_column)
        present = target_column[~gaps]
        classes = sorted_categories(present)
        if len(classes) < 2:
            raise DataError(TARGET_KEY, f"the training split has only {len(classes)} class of {data.target!r}; a "
                                        "classifier needs two or more")
    pipeline = TablePipeline(task, data.target, list(features), preprocessing, list(done), classes, image)
    splits = {}
    for split, columns in raw.items():
        where = f"the {split} split"
        x = pipeline.features_of(columns, where)
        splits[split] = TableBatch(as_model_input(x, dtype, ids, pipeline.features, where),
                                   pipeline.targets_of(columns[data.target], where)
                                   .astype(np.int64 if task == CLASSIFICATION else dtype))
    info.update(task=task, target=data.target, features=len(pipeline.features),
                **({"classes": len(classes)} if classes else {}))
    return TableData(pipeline, splits, info)


def as_model_input(x: np.ndarray, dtype: type, ids: bool, features: Sequence[str], where: str) -> np.ndarray:
    """Preprocessed features `x` as the model reads them: int64 ids after an embedding, else floats of its
    `dtype`. A value past that dtype's range (1e308 in float32 is inf, and the model's output NaN) is a DataError
    naming the row and the feature."""
    if not ids:
        with np.errstate(over="ignore"):  # checked just below, with the row and column
            out = np.ascontiguousarray(x, dtype=dtype)
        if not np.isfinite(out).all():
            row, col = np.argwhere(~np.isfinite(out))[0]
            raise DataError(("data",), f"{where}, row {row + 1}, column {features[col]!r}: {x[row, col]:g} (after "
                                       f"preprocessing) is past the largest {np.dtype(dtype).name} the model reads "
                                       f"({np.finfo(dtype).max:.3g})")
        return out
    bad = (x < 0) | (x != np.round(x))
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise DataError(("model", "layers", 0), f"{where}, row {row + 1}: an embedding reads whole numbers ≥ 0, got "
                                                f"{x[row, col]} (label-encode the column)")
    return x.astype(np.int64)
