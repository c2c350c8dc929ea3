"""Preprocessing of a table's feature columns (`data.preprocessing`): fitted on the training split only, then
applied unchanged to val, test and anything `minitrain predict` reads.

A step is `{kind: {options}}`, run in the order listed; each is fitted on the training columns as the earlier
steps left them:

    drop      {columns}                          remove columns
    fillna    {columns?, strategy, value?}       missing values (null, NaN) of each column become its training
                                                 mean, median or mode (most frequent; ties: the smallest), or
                                                 `value` (strategy constant). Default columns: every column
                                                 with a missing value in training
    encode    {columns, method, categories?}     text (or other category) columns to numbers, categories being
                                                 the training values, sorted:
                                                   label    one column of codes 0..K-1
                                                   ordinal  the same, in the order `categories` gives
                                                   onehot   K columns `name=value`, 1 for the row's category
    normalize {columns?, method}                 y = (x − center) / scale per column, from training:
                                                   minmax   center min, scale max − min      -> [0, 1]
                                                   zscore   center mean, scale std (ddof 0)   -> mean 0, std 1
                                                   robust   center median, scale IQR (q75 − q25)
                                                 a scale of 0 (a constant column) counts as 1. Default columns:
                                                 every numeric feature column

A value never seen in training (a category, in val or predict input) is an error naming the column and row, as
is a column a step names that the table lacks. `columns` may abbreviate a run of numbered names as the spec
writes them: `[pixel_0, pixel_1, ..., pixel_63]`.

The fitted steps are plain JSON (`Preprocessing.to_dict`), saved in the model file and run folder, so
evaluation and `predict` apply exactly the transform training used. Columns are NumPy arrays: numbers as
float64 (NaN for missing), anything else as objects (None for missing).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from minitrain.common.errors import DataError

Columns = dict[str, np.ndarray]
KEY = ("data", "preprocessing")
_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def is_numeric(column: np.ndarray) -> bool:
    return column.dtype.kind in "fiub"


def first_text(column: np.ndarray) -> int:
    """The index of the first value of a non-numeric column that does not read as a number: one text cell makes
    a reader keep the whole column as text, `'0.27'` included (when every value reads as one, the first value)."""
    present = [i for i, v in enumerate(column) if v is not None]
    for i in present:
        try:
            float(column[i])
        except (TypeError, ValueError):
            return i
    return present[0]


def missing(column: np.ndarray) -> np.ndarray:
    """True where a value is missing (NaN in a numeric column, None in any other)."""
    if is_numeric(column):
        return np.isnan(column.astype(np.float64))
    return np.array([v is None or (isinstance(v, float) and np.isnan(v)) for v in column], dtype=bool)


def expand_columns(names: Sequence[str], available: Sequence[str], key: tuple) -> list[str]:
    """`names` with every `a, ..., b` run of numbered names filled in (pixel_0, ..., pixel_3 -> pixel_0..pixel_3),
    each checked to be in `available`."""
    expanded: list[str] = []
    for i, name in enumerate(names):
        if name != "...":
            expanded.append(str(name))
            continue
        before = _NUMBERED.match(str(names[i - 1])) if i > 0 else None
        after = _NUMBERED.match(str(names[i + 1])) if i + 1 < len(names) else None
        if not (before and after and before.group(1) == after.group(1) and int(before.group(2)) < int(after.group(2))):
            raise DataError(key, "'...' must stand between two names that differ only by a growing number "
                                 "(pixel_0, ..., pixel_63)")
        expanded += [f"{before.group(1)}{n}" for n in range(int(before.group(2)) + 1, int(after.group(2)))]
    unknown = [n for n in expanded if n not in available]
    if unknown:
        shown = ", ".join(list(available)[:8]) + (", ..." if len(available) > 8 else "")
        raise DataError(key, f"column {unknown[0]!r} is not in the table (columns: {shown})")
    return list(dict.fromkeys(expanded))


@dataclass
class Preprocessing:
    """The fitted steps; `transform(columns)` applies them. Build with `Preprocessing.fit(specs, train_columns)`."""

    steps: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def fit(cls, specs: Sequence[Mapping[str, Any]], columns: Columns) -> tuple[Preprocessing, Columns]:
        """Fit each step on the training `columns` (as the earlier steps left them); returns the fitted steps and
        the transformed training columns."""
        fitted = cls()
        for index, spec in enumerate(specs):
            (kind, options), = spec.items()
            step = {"kind": kind, **_FITTERS[kind](dict(options or {}), columns, (*KEY, index, kind))}
            fitted.steps.append(step)
            columns = _apply(step, columns, "the training split")
        return fitted, columns

    def transform(self, columns: Columns, where: str) -> Columns:
        """Apply the fitted steps to `columns` (a split or predict input; `where` names it in errors)."""
        for step in self.steps:
            columns = _apply(step, columns, where)
        return columns

    def to_dict(self) -> list[dict[str, Any]]:
        return [dict(step) for step in self.steps]

    @classmethod
    def from_dict(cls, steps: Sequence[Mapping[str, Any]]) -> Preprocessing:
        return cls([dict(step) for step in steps])


# --- fitting: options + training columns -> the step's parameters (JSON) -------------------------------------------


def _fit_drop(options: dict, columns: Columns, key: tuple) -> dict:
    return {"columns": expand_columns(options["columns"], list(columns), key)}


def _fit_fillna(options: dict, columns: Columns, key: tuple) -> dict:
    names = options.get("columns")
    names = expand_columns(names, list(columns), key) if names else [n for n, c in columns.items() if missing(c).any()]
    strategy, values = options.get("strategy", "mean"), {}
    for name in names:
        column, gaps = columns[name], missing(columns[name])
        present = column[~gaps]
        if strategy == "constant":
            values[name] = options.get("value")
        elif not present.size:
            raise DataError(key, f"column {name!r} has no value in the training split to take the {strategy} of")
        elif strategy == "mode":
            kept, counts = np.unique(present.astype(np.float64) if is_numeric(column) else present.astype(str),
                                     return_counts=True)
            values[name] = plain_value(kept[np.argmax(counts)])  # np.unique sorts: ties go to the smallest
        elif not is_numeric(column):
            raise DataError(key, f"column {name!r} holds text, which has no {strategy}; use strategy mode or constant")
        else:
            values[name] = float(np.mean(present) if strategy == "mean" else np.median(present))
    return {"strategy": strategy, "values": values}


def _fit_encode(options: dict, columns: Columns, key: tuple) -> dict:
    method, categories = options.get("method", "onehot"), {}
    names = expand_columns(options["columns"], list(columns), key)
    for name in names:
        column = columns[name]
        gaps = missing(column)
        if gaps.any():
            row = int(np.flatnonzero(gaps)[0])
            raise DataError(key, f"column {name!r}, row {row + 1} of the training split: missing value; add a "
                                 "fillna step before encoding")
        seen = sorted_categories(column)
        given = options.get("categories")
        if method == "ordinal" and given:
            unknown = [v for v in seen if v not in given and str(v) not in map(str, given)]
            if unknown:
                raise DataError(key, f"column {name!r}: value {unknown[0]!r} is not in categories {list(given)}")
            seen = list(given)
        categories[name] = seen
    return {"method": method, "categories": categories}


def _fit_normalize(options: dict, columns: Columns, key: tuple) -> dict:
    names = options.get("columns")
    names = expand_columns(names, list(columns), key) if names else [n for n, c in columns.items() if is_numeric(c)]
    method, scales = options.get("method", "zscore"), {}
    for name in names:
        column = columns[name]
        if not is_numeric(column):
            row = first_text(column)
            raise DataError(key, f"column {name!r} holds text; encode it before normalizing (row {row + 1} of the "
                                 f"training split: {column[row]!r})")
        x = column.astype(np.float64)
        if np.isnan(x).any():
            raise DataError(key, f"column {name!r} has missing values in the training split (row "
                                 f"{int(np.flatnonzero(np.isnan(x))[0]) + 1}); add a fillna step before it")
        if method == "minmax":
            center, scale = float(x.min()), float(x.max() - x.min())
        elif method == "zscore":
            center, scale = float(x.mean()), float(x.std())
        else:
            q25, center, q75 = (float(v) for v in np.percentile(x, [25, 50, 75]))
            scale = q75 - q25
        scales[name] = [center, scale if scale > 0 else 1.0]
    return {"method": method, "columns": scales}


_FITTERS = {"drop": _fit_drop, "fillna": _fit_fillna, "encode": _fit_encode, "normalize": _fit_normalize}


def sorted_categories(values: Any) -> list[Any]:
    """The distinct values, as plain scalars, in order: numbers first, then text."""
    return sorted({plain_value(v) for v in values}, key=lambda v: (isinstance(v, str), v))


def category_codes(values: Any, categories: Sequence[Any]) -> tuple[np.ndarray, int | None]:
    """(N,) int64: each value's index in `categories` (plain values, as `sorted_categories` gives), compared as
    text, a value as `plain_value` makes it (3.0 is 3); and the first row whose value (None included) is not one
    of them, or None when every value is."""
    code_of = {str(c): i for i, c in enumerate(categories)}
    codes = np.array([-1 if v is None else code_of.get(str(plain_value(v)), -1) for v in values], dtype=np.int64)
    unseen = np.flatnonzero(codes < 0)
    return codes, int(unseen[0]) if unseen.size else None


def plain_value(value: Any) -> Any:
    """A JSON-ready scalar: NumPy numbers to int/float (whole floats to int, so 3.0 and 3 are one category)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# --- applying a fitted step ----------------------------------------------------------------------------------------


def _apply(step: Mapping[str, Any], columns: Columns, where: str) -> Columns:
    kind = step["kind"]
    out = dict(columns)
    if kind == "drop":
        for name in step["columns"]:
            out.pop(name, None)
        return out
    names = step["values"] if kind == "fillna" else step["categories"] if kind == "encode" else step["columns"]
    absent = [name for name in names if name not in columns]
    if absent:
        raise DataError(KEY, f"{where} has no column {absent[0]!r}, which the {kind} step was fitted on")
    if kind == "fillna":
        for name, value in step["values"].items():
            column = columns[name].copy()
            if is_numeric(column) and value is not None and not isinstance(value, str):
                column = column.astype(np.float64)
                column[np.isnan(column)] = value
            else:
                column = column.astype(object)
                column[missing(column)] = value
            out[name] = column
    elif kind == "normalize":
        for name, (center, scale) in step["columns"].items():
            if not is_numeric(columns[name]):  # numbers in training, text here (or the other way round)
                row = first_text(columns[name])
                raise DataError(KEY, f"{where}, row {row + 1}, column {name!r}: {columns[name][row]!r} is not a "
                                     "number, and the normalize step was fitted on numbers")
            with np.errstate(over="ignore", invalid="ignore"):  # a huge value: the model input check names it
                out[name] = (columns[name].astype(np.float64) - center) / scale
    else:
        out = _encode(step, columns, out, where)
    return out


def _encode(step: Mapping[str, Any], columns: Columns, out: Columns, where: str) -> Columns:
    for name, categories in step["categories"].items():
        codes, row = category_codes(columns[name], categories)
        if row is not None:
            raise DataError(KEY, f"{where}, row {row + 1}, column {name!r}: value {plain_value(columns[name][row])!r} "
                                 f"was not seen in training (categories: {categories[:10]})")
        if step["method"] == "onehot":
            position = list(out).index(name)
            items = list(out.items())
            onehot = {f"{name}={c}": (codes == i).astype(np.float64) for i, c in enumerate(categories)}
            out = dict(items[:position] + list(onehot.items()) + items[position + 1 :])
        else:
            out[name] = codes.astype(np.float64)
    return out
