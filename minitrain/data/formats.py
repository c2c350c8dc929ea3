"""Reading a data file into a table (a `pyarrow.Table`): jsonl, json, csv, parquet, arrow, or plain text.

    format     what the file holds                                      read by
    jsonl      one JSON object per line (a row)                         pyarrow.json
    json       one JSON array of objects (rows)                         json, then pyarrow.Table.from_pylist
    csv        a header line, then one row per line                     pyarrow.csv
    parquet    Apache Parquet                                           pyarrow.parquet
    arrow      Arrow IPC, file or stream (.arrow, .feather)             pyarrow.ipc
    text       one row per non-empty line, in a column named "text"     Python

The format is the one given, or detected from the file's extension (`detect_format`). pyarrow is an optional
dependency (`pip install 'minitrain[data]'`), imported only here and only when a table is read. A file that
cannot be read is one `UserError` naming the file and, where the reader says, the row and column.

The verb corpus (lab 00's JSONL records) is not read here but by `minitrain.data.corpus`, which checks its own
record shape; this module serves every other table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minitrain.common.errors import UserError
from minitrain.common.extras import require
from minitrain.common.io import read_text
from minitrain.common.registry import Registry

TEXT_COLUMN = "text"


def pyarrow_module() -> Any:
    """`pyarrow`, or a UserError saying how to install it."""
    return require("pyarrow", "data", "reading tables (csv, json, parquet, arrow)")


def detect_format(path: str | Path) -> str:
    """The format a file's extension says (`data.csv` -> csv); UserError when it says none."""
    found = EXTENSIONS.get(Path(path).suffix.lower())
    if found is None:
        known = ", ".join(sorted(EXTENSIONS))
        raise UserError(f"{path}: cannot tell its format from the extension (known: {known}); set data.format", 2)
    return found


def read_table(path: str | Path, fmt: str | None = None) -> Any:
    """The file at `path` as a pyarrow Table, in format `fmt` (detected from the extension when None)."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    read = TABLE_FORMATS.pick(fmt, f"{path}: data.format").read
    if not path.is_file():
        raise UserError(f"{path}: file not found", 2)
    pa = pyarrow_module()
    try:
        table = read(path, pa)
    except UserError:
        raise
    except (pa.ArrowException, OSError, ValueError) as e:
        raise UserError(f"{path}: cannot read it as {fmt}: {_reader_message(e)}", 2) from None
    if table.num_rows == 0:
        raise UserError(f"{path}: holds no rows", 2)
    return table


def _reader_message(error: Exception) -> str:
    # pyarrow's messages carry the row ("Row #5: Expected 3 columns, got 2") and sometimes a C++ source location.
    text = " ".join(str(error).split())
    return re.sub(r"\s*\(?/\S+\.cc:\d+\)?", "", text)


def _read_csv(path: Path, pa: Any) -> Any:
    import pyarrow.csv

    try:
        return pyarrow.csv.read_csv(path)
    except pa.ArrowInvalid:
        # Read again on one thread, which counts rows: its message names the bad row ("Row #3: ...").
        return pyarrow.csv.read_csv(path, read_options=pyarrow.csv.ReadOptions(use_threads=False))


def _read_jsonl(path: Path, pa: Any) -> Any:
    import pyarrow.json

    return pyarrow.json.read_json(path)


def _read_json(path: Path, pa: Any) -> Any:
    try:
        rows = json.loads(read_text(path, "data file"))
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: not valid JSON ({e.msg})", 2) from None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise UserError(f"{path}: a json data file must hold one array of objects (rows); for one object per "
                        "line use format jsonl", 2)
    return table_from_rows(rows, str(path), pa)


def table_from_rows(rows: list[dict[str, Any]], where: str, pa: Any) -> Any:
    """A Table from a list of row dicts; a column whose values do not share one type names its first odd row."""
    names = list(dict.fromkeys(key for row in rows for key in row))
    columns = {}
    for name in names:
        values = [row.get(name) for row in rows]
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            first = next(type(v) for v in values if v is not None)
            odd = next(i for i, v in enumerate(values) if v is not None and not isinstance(v, first))
            odd_type = type(values[odd]).__name__
            raise UserError(f"{where}: row {odd + 1}, column {name!r}: {values[odd]!r} is a {odd_type} where earlier "
                            f"rows hold {first.__name__} values", 2) from None
    return pa.table(columns)


def _read_parquet(path: Path, pa: Any) -> Any:
    import pyarrow.parquet

    return pyarrow.parquet.read_table(path)


def _read_arrow(path: Path, pa: Any) -> Any:
    import pyarrow.ipc

    try:
        with pyarrow.ipc.open_file(path) as reader:
            return reader.read_all()
    except pa.ArrowInvalid:
        with pyarrow.ipc.open_stream(path) as reader:  # the streaming format has no footer
            return reader.read_all()


def _read_text(path: Path, pa: Any) -> Any:
    lines = [line for line in read_text(path, "data file").splitlines() if line.strip()]
    return pa.table({TEXT_COLUMN: pa.array(lines, pa.string())})


@dataclass(frozen=True)
class TableFormat:
    """A `data.format`: `read(path, pyarrow) -> Table`, and the extensions that say it (detect_format)."""

    name: str
    read: Callable[[Path, Any], Any]
    extensions: tuple[str, ...]


TABLE_FORMATS: Registry[TableFormat] = Registry("table format", [
    TableFormat("jsonl", _read_jsonl, (".jsonl", ".ndjson")),
    TableFormat("json", _read_json, (".json",)),
    TableFormat("csv", _read_csv, (".csv",)),
    TableFormat("parquet", _read_parquet, (".parquet", ".pq")),
    TableFormat("arrow", _read_arrow, (".arrow", ".feather", ".ipc")),
    TableFormat("text", _read_text, (".txt", ".text")),
])
EXTENSIONS = {extension: f.name for f in TABLE_FORMATS.values() for extension in f.extensions}
