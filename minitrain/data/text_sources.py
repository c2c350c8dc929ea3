"""A run's text records from one `data.source` (a file, a folder, or hf://datasets/user/name[/path]): its splits.

    source ──locate_text──► {split: [files]} ──read_files──► {split: [TextRecord]}

A folder whose files are named after splits (train.jsonl, validation-00000-of-00001.parquet, test.txt) keeps
them. Without a validation split (a single file, a folder of unsplit files, or only a train file) the records are
split by `ratios` (data.split: train + val (+ test) = 1), seeded, each split in file order
(`row_split.split_rows`): a test file the source has is kept, so the ratios may give a test split only when it has
none. The same source, ratios and seed give the same records in the same order.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.data.row_split import split_rows
from minitrain.data.text_records import TextRecord, check_one_kind, locate_text, read_files


def source_files(source: str | Path) -> list[Path]:
    """Every file the source's records come from, in reading order (what a run fingerprints)."""
    return [file for files in locate_text(source).values() for file in files]


def source_records(
    source: str | Path, ratios: Mapping[str, float] | None, seed: int
) -> dict[str, list[TextRecord]]:
    """{"train": [...], "val": [...], ("test": [...])} of the source (module docstring); a UserError naming the
    source when it has no validation split and no ratios make one."""
    splits = {split: read_files(files) for split, files in locate_text(source).items()}
    check_one_kind([records[0] for records in splits.values()])
    if "val" in splits:
        return splits
    pool = splits.pop("all", None) or splits.pop("train")
    if ratios is None:
        found = "its files are not named after splits" if not splits else f"it has {', '.join(['train', *splits])} "\
                                                                           "files but no validation file"
        raise UserError(f"data.source {source}: {found}; give data.split (e.g. {{train: 0.9, val: 0.1}}) to hold "
                        "some of its records out", BAD_INPUT)
    if "test" in splits and ratios.get("test", 0.0) > 0:
        raise UserError(f"data.source {source}: it has a test file; leave data.split.test out", BAD_INPUT)
    rows = split_rows(len(pool), ratios, seed)
    return {**{name: [pool[i] for i in index] for name, index in rows.items() if len(index)}, **splits}
