"""Splitting the rows of one table: by ratios (`data.split`), or into k folds (cross-validation).

Both are deterministic functions of the seed, and both may be stratified by a column (the target): each class is
then spread over the splits (or folds) in the proportions asked, so a rare class is not missing from val by bad
luck.

Ratios. With N rows, val gets round(val·N) rows, test round(test·N), and train the rest. Stratified, class c (n_c
rows, shuffled by the seed) first gives ⌊ratio·n_c⌋ rows to each held-out split; the rows still owed to reach the
global sizes go to the classes with the largest remainders (ties: the class seen first), one each. Every split's
rows come back in file order.

Folds. The rows are shuffled by the seed (unless shuffle is false), then, stratified, laid out class after class
and dealt round-robin: row j of that layout goes to fold j mod k, so each class is spread evenly and fold sizes
differ by at most one. Not stratified, the (shuffled) rows are cut into k nearly equal runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from minitrain.common.errors import UserError

HELD_OUT = ("val", "test")


def _rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def _classes(labels: np.ndarray) -> list[np.ndarray]:
    """The row indices of each class, classes in order of first appearance."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # class ids in order of first appearance
    return [np.flatnonzero(inverse == c) for c in order]


def split_rows(
    num_rows: int, ratios: Mapping[str, float], seed: int, stratify: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """{"train": rows, "val": rows, ("test": rows)}: the row indices of each split, each in file order.

    `ratios` holds train, val and optionally test, summing to 1; `stratify` is one label per row."""
    sizes = {name: round(ratios.get(name, 0.0) * num_rows) for name in HELD_OUT}
    sizes["train"] = num_rows - sizes["val"] - sizes["test"]
    if min(sizes["train"], sizes["val"]) < 1 or (ratios.get("test", 0.0) > 0 and sizes["test"] < 1):
        raise UserError(f"data.split: {num_rows} rows cannot be split into {dict(ratios)}: a split would be empty "
                        f"({sizes})", 2)
    rng = _rng(seed)
    groups = [np.arange(num_rows)] if stratify is None else _classes(np.asarray(stratify))
    groups = [rng.permutation(group) for group in groups]
    room = [len(g) for g in groups]
    owed = {}
    for name in HELD_OUT:  # val first, then test from what val left
        owed[name] = _shares(sizes[name], [ratios.get(name, 0.0) * len(g) for g in groups], room)
        room = [r - c for r, c in zip(room, owed[name], strict=True)]
    taken = {name: [] for name in ("train", *HELD_OUT)}
    for index, group in enumerate(groups):
        start = 0
        for name in HELD_OUT:
            count = owed[name][index]
            taken[name].append(group[start : start + count])
            start += count
        taken["train"].append(group[start:])
    result = {name: np.sort(np.concatenate(parts)) for name, parts in taken.items()}
    return {name: rows for name, rows in result.items() if name != "test" or ratios.get("test", 0.0) > 0}


def _shares(total: int, exact: list[float], room: list[int]) -> list[int]:
    """`total` rows owed by the groups, `exact[i]` being group i's exact share: floors, then one more to the
    largest remainders (largest-remainder apportionment), never more than a group has `room` for."""
    counts = [min(math.floor(x), r) for x, r in zip(exact, room, strict=True)]
    by_remainder = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))
    missing = total - sum(counts)
    for i in by_remainder:
        if missing <= 0:
            break
        if counts[i] < room[i]:
            counts[i] += 1
            missing -= 1
    # Rounding the other way (too many) can only happen by a row; take it back from the smallest remainders.
    for i in reversed(by_remainder):
        if missing >= 0:
            break
        if counts[i] > 0:
            counts[i] -= 1
            missing += 1
    return counts


def fold_rows(
    num_rows: int, folds: int, seed: int, shuffle: bool = True, stratify: np.ndarray | None = None
) -> list[np.ndarray]:
    """The row indices of each of `folds` folds (each in file order); together they cover every row once."""
    if not 2 <= folds <= num_rows:
        raise UserError(f"cross_validation.folds: {folds} folds of {num_rows} rows (need 2 ≤ folds ≤ rows)", 2)
    rng = _rng(seed)
    groups = [np.arange(num_rows)] if stratify is None else _classes(np.asarray(stratify))
    if shuffle:
        groups = [rng.permutation(group) for group in groups]
    layout = np.concatenate(groups)
    if stratify is None:
        return [np.sort(part) for part in np.array_split(layout, folds)]
    return [np.sort(layout[f::folds]) for f in range(folds)]
