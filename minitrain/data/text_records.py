"""Text data as people have it: a file, a folder of files or a Hugging Face dataset, read into records of one shape.

A record's shape is told by its keys, and read as one of three kinds (`record_shapes.py` has the table): text
(`{"text"}`), prompt_completion (`{"prompt", "completion"}` strings) or chat (`{"messages"}`, also from ShareGPT's
`conversations`, Alpaca's `instruction`/`input`/`output` and TRL's conversational prompt/completion); preference
rows (`chosen`/`rejected`) are refused. Every record of every file read together must be of one shape.

Files, by extension:

    .jsonl .ndjson              one JSON object per line, blank lines skipped; errors name the line: `a.jsonl:12: ...`
    .json                       a JSON array of objects (errors name the row), or one object (one record); else
                                JSON Lines (many Hub datasets name their JSON Lines files .json)
    .parquet .arrow .feather    a table, read by `formats.read_table`, one record per row; errors name the row:
    .csv                        `a.parquet: row 5: ...`. A null cell is an absent key: a table has every column in
                                every row, so a text column beside a messages column is null where unused
    .txt .text .md .markdown    a document: the WHOLE file is one `text` record, newlines and blank lines kept (a
                                leading byte-order mark dropped). Not one record per line (as `data.format: text`
                                reads tables) nor per blank-line paragraph: a document's paragraphs belong together,
                                and many short documents are what JSONL is for

A folder is every file under it (any depth, path order) with one of these extensions, skipping hidden files and
README.md (on the Hub it describes the dataset; give its own path to read it as a document). When its table files
are named after splits (`train.jsonl`, `validation-00000-of-00001.parquet`, `test.csv`, see `locate.split_of`),
`locate_text` groups the files by split, and then every data file in the folder must be named after one.

`hf://datasets/user/name[/path]` is downloaded into the Hugging Face cache by `locate.download_dataset`, then read as
the file or folder it is. Compressed files (.jsonl.gz, .zst) are not read: decompress them first.

Reading never writes: nothing is created or changed in a data folder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.io import decode_utf8, json_type, read_bytes
from minitrain.data.formats import EXTENSIONS, read_table
from minitrain.data.locate import data_files, download_dataset, is_hub_source, split_of
from minitrain.data.record_shapes import Malformed, parse_record

# A table format's extensions name it here too, but a text file is one document (not one record per line).
RECORD_FORMATS = {**{ext: fmt for ext, fmt in EXTENSIONS.items() if fmt != "text"},
                  **dict.fromkeys((".txt", ".text", ".md", ".markdown"), "documents")}
TABLES = ("parquet", "arrow", "csv")  # read through formats.read_table
BOM = "\ufeff"
SPLITS = ("train", "val", "test")  # locate.split_of's names, in the order splits are read


class TextRecord(NamedTuple):
    """One record: `where` it came from (`data/a.jsonl:12`, `data/a.parquet: row 5`, `notes/b.md`), its `kind`
    (text, prompt_completion or chat), and `data`, only that kind's keys: {"text"}, {"prompt", "completion"} or
    {"messages": [{"role", "content"}, ...]} (and "completion_from", the first message the loss learns, for a
    chat_prompt_completion record); `shape`, the `record_shapes.SHAPES` record it was read from."""

    where: str
    kind: str
    data: dict[str, Any]
    shape: str = ""


def format_of(path: Path) -> str:
    """The format a file's extension names (jsonl, json, parquet, arrow, csv, documents); UserError for others."""
    found = RECORD_FORMATS.get(path.suffix.lower())
    if found is None:
        known = ", ".join(sorted(RECORD_FORMATS))
        raise UserError(f"{path}: not a text data file (known extensions: {known})", BAD_INPUT)
    return found


def _json_value(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{where}: invalid JSON ({e.msg} at line {e.lineno} column {e.colno})", BAD_INPUT) from None
    except (ValueError, RecursionError):  # an integer of thousands of digits, nesting past the stack
        raise UserError(f"{where}: invalid JSON (a number too long or nesting too deep)", BAD_INPUT) from None


def _record(obj: Any, where: str, tabular: bool = False) -> TextRecord:
    try:
        shape, data = parse_record(obj, tabular)
    except Malformed as e:
        raise UserError(f"{where}: {e}", BAD_INPUT) from None
    return TextRecord(where, shape.kind, data, shape.name)


def _json_lines(path: Path, raw: bytes) -> list[TextRecord]:
    records = []
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        where = f"{path}:{lineno}"
        text = decode_utf8(line, where, "line")
        if lineno == 1:
            text = text.removeprefix(BOM)
        if text.strip():
            obj = _json_value(text, where)
            if isinstance(obj, dict):
                records.append(_record(obj, where))
            else:  # the message names the line's JSON rather than "a JSON object" in general
                raise UserError(f"{where}: expected one JSON object per line, got {json_type(obj)}", BAD_INPUT)
    return records


def _json_array(path: Path, raw: bytes) -> list[TextRecord]:
    text = decode_utf8(raw, str(path), "data file").removeprefix(BOM)
    if not text.lstrip().startswith("["):
        try:
            one = json.loads(text)  # one (pretty-printed) object is one record; else the lines are
        except (ValueError, RecursionError):
            return _json_lines(path, raw)
        return [_record(one, str(path))]
    rows = _json_value(text, str(path))
    return [_record(row, f"{path}: row {i}") for i, row in enumerate(rows, start=1)]


def _table(path: Path, fmt: str) -> list[TextRecord]:
    rows = read_table(path, fmt).to_pylist()
    return [_record(row, f"{path}: row {i}", tabular=True) for i, row in enumerate(rows, start=1)]


def _document(path: Path, raw: bytes) -> list[TextRecord]:
    text = decode_utf8(raw, str(path), "document").removeprefix(BOM)
    if not text.strip():
        raise UserError(f"{path}: the document is empty", BAD_INPUT)
    return [TextRecord(str(path), "text", {"text": text}, "text")]


def read_file(path: str | Path) -> list[TextRecord]:
    """The records of one file, in file order, all of one kind; UserError naming the file (and line or row) for a
    file that cannot be read, a malformed record, records of two kinds, or a file with no record."""
    path = Path(path)
    fmt = format_of(path)
    if fmt in TABLES:
        records = _table(path, fmt)
    else:
        raw = read_bytes(path, "data file")
        records = {"jsonl": _json_lines, "json": _json_array, "documents": _document}[fmt](path, raw)
    if not records:
        raise UserError(f"{path}: holds no records", BAD_INPUT)
    return check_one_kind(records)


def read_files(files: Sequence[str | Path]) -> list[TextRecord]:
    """The records of several files, one after the other, all of one kind (see `read_file`)."""
    if not files:
        raise UserError("no text data files to read", BAD_INPUT)
    return check_one_kind([record for file in files for record in read_file(file)])


def check_one_kind(records: list[TextRecord]) -> list[TextRecord]:
    """`records`, when all are of one shape; else a UserError naming the first record of another shape."""
    first = records[0]
    for record in records:
        if record.shape != first.shape:
            raise UserError(f"{record.where}: a {record.shape} record, but {first.where} is a {first.shape} record: "
                            "all records must be of one shape", BAD_INPUT)
    return records


def locate_text(source: str | Path) -> dict[str, list[Path]]:
    """{split: files}: {"all": [...]} for a file or a folder of unsplit files, else {"train": [...], "val": [...],
    "test": [...]} for a folder whose files (records or documents) are named after splits (only the splits present)."""
    path = download_dataset(str(source)) if is_hub_source(str(source)) else Path(source)
    if path.is_file():
        return {"all": [path]}
    if not path.is_dir():
        raise UserError(f"{source}: no such file or folder", BAD_INPUT)
    files = data_files(path, RECORD_FORMATS)
    if not files:
        raise UserError(f"{source}: holds no text data file (known extensions: {', '.join(sorted(RECORD_FORMATS))})",
                        BAD_INPUT)
    named = {file: split_of(file) for file in files}
    if not any(named.values()):
        return {"all": files}
    stray = [file for file, split in named.items() if split is None]
    if stray:
        raise UserError(f"{source}: some files are named after a split (train, validation, test) but {stray[0]} is "
                        "not: name every file after its split, or point at one file", BAD_INPUT)
    if "train" not in named.values():
        raise UserError(f"{source}: has {', '.join(sorted(set(named.values())))} files but no train file", BAD_INPUT)
    return {split: [file for file in files if named[file] == split] for split in SPLITS if split in named.values()}


def describe_text_data(source: str | Path) -> dict[str, Any]:
    """What `minitrain init` says of a data source, reading it and writing nothing: {"kind": text,
    prompt_completion or chat, "shape": the records' shape (of record_shapes.SHAPES),
    "format": the files' formats joined by "+" ("jsonl", "documents", "jsonl+parquet"), "samples": records in
    all, "files": [paths as strings], "splits": {split: records}} ("all" when the files are not split)."""
    located = locate_text(source)
    splits = {split: read_files(files) for split, files in located.items()}
    first = check_one_kind([records[0] for records in splits.values()])[0]
    files = [file for group in located.values() for file in group]
    return {
        "kind": first.kind,
        "shape": first.shape,
        "format": "+".join(sorted({format_of(file) for file in files})),
        "samples": sum(len(records) for records in splits.values()),
        "files": [str(file) for file in files],
        "splits": {split: len(records) for split, records in splits.items()},
    }
