"""From a text data source to the packed arrays of each split: read, split, tokenize, pack.

    source ──read_text_splits──► {split: [TextRecord]} ──split_rows (unsplit sources)──► train / val (/ test)
           ──encode_records──► {split: [Example]} ──pack──► {split: PackedBatch}

A source whose files are named after splits keeps them (`text_records.locate_text`); a single file or a folder of
unsplit files is split by `ratios` ({"train": 0.9, "val": 0.1}, optionally "test"), seeded, each split in file
order (`row_split.split_rows`). Every step is deterministic: the same source, tokenizer and settings give the
same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.data.packing import PackedBatch, pack
from minitrain.data.row_split import split_rows
from minitrain.data.text_examples import TextTokenizer, encode_records
from minitrain.data.text_records import TextRecord, read_text_splits


def split_records(
    source: str | Path, ratios: Mapping[str, float] | None = None, seed: int = 0
) -> dict[str, list[TextRecord]]:
    """{"train": [...], "val": [...], ("test": [...])}: the source's own splits, or its records split by `ratios`
    with `seed`. A UserError when there is no val split and no ratios to make one."""
    splits = read_text_splits(source)
    if "all" in splits:
        if ratios is None:
            raise UserError(f"{source}: its files are not named after splits (train, validation, test), so give "
                            "ratios to split it (data.split)", BAD_INPUT)
        records = splits["all"]
        return {name: [records[i] for i in rows] for name, rows in split_rows(len(records), ratios, seed).items()}
    if "val" not in splits:
        raise UserError(f"{source}: has {', '.join(splits)} files but no validation file", BAD_INPUT)
    return splits


def pad_id_of(tokenizer: TextTokenizer) -> int:
    """The id that fills padding: the tokenizer's PAD, else its EOS, else 0 (padding is never attended to nor
    counted, so any id in the vocabulary will do)."""
    return next((i for i in (tokenizer.pad_id, tokenizer.eos_id) if i is not None), 0)


def packed_splits(
    source: str | Path,
    tokenizer: TextTokenizer,
    max_seq_len: int,
    mode: str = "pack",
    loss_on: str = "all",
    overflow: str = "error",
    ratios: Mapping[str, float] | None = None,
    seed: int = 0,
) -> dict[str, PackedBatch]:
    """{split: PackedBatch of rows of `max_seq_len` positions} for `source` (see the module docstring)."""
    pad_id = pad_id_of(tokenizer)
    return {name: pack(encode_records(records, tokenizer, loss_on), max_seq_len, mode, pad_id, overflow)
            for name, records in split_records(source, ratios, seed).items()}
