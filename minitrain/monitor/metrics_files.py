"""The run's metrics table in the format `output.metrics` asks for: metrics.csv always, and metrics.json or
metrics.parquet (pyarrow, minitrain[parquet]) beside it; by default metrics.parquet where pyarrow is installed.

All three hold the same table as report.metrics_table builds it from train_log.jsonl: one row per logged step,
`step` first, then every logged key (or only those `include` names: a name, a glob such as `grad_norm/*`, or the
spec's `train_loss` / `learning_rate` for loss / lr); a value a step did not log is empty (csv), null (json) or
null (parquet, whose columns are int64 `step` and float64 values).

    metrics.json   {"columns": ["step", "loss", ...], "rows": [{"step": 0, "loss": 4.17, ...}, ...]}
"""

from __future__ import annotations

import fnmatch
import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from minitrain.common.extras import installed, require
from minitrain.common.io import atomic_write_bytes, atomic_write_text
from minitrain.config.observing import METRIC_ALIASES, MetricsOutput
from minitrain.monitor.report import metrics_csv, metrics_table


def select_columns(columns: Sequence[str], include: Sequence[str] | None) -> list[str]:
    """`step`, then the columns `include` names or matches, in the table's order (all of them for None)."""
    if include is None:
        return list(columns)
    wanted = [METRIC_ALIASES.get(name, name) for name in include]
    return [c for c in columns if c == "step" or any(fnmatch.fnmatchcase(c, w) for w in wanted)]


def metrics_json(columns: Sequence[str], table: Sequence[Mapping[str, Any]]) -> str:
    rows = [{c: row.get(c) for c in columns} for row in table]
    return json.dumps({"columns": list(columns), "rows": rows}) + "\n"


def metrics_parquet(columns: Sequence[str], table: Sequence[Mapping[str, Any]]) -> bytes:
    pa = require("pyarrow", "parquet", "output.metrics.format parquet")
    pq = require("pyarrow.parquet", "parquet", "output.metrics.format parquet")
    arrays = [pa.array([row.get(c) for row in table], type=pa.int64() if c == "step" else pa.float64())
              for c in columns]
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_arrays(arrays, names=list(columns)), buffer)
    return buffer.getvalue()


def write_metrics(rows: Iterable[Mapping[str, Any]], run_dir: str | os.PathLike, settings: MetricsOutput) -> None:
    """metrics.csv (with `include` applied when the format is csv), and metrics.json or metrics.parquet."""
    run_dir, fmt = Path(run_dir), settings.format or ("parquet" if installed("pyarrow") else "csv")
    columns, table = metrics_table(list(rows))
    chosen = select_columns(columns, settings.include)
    csv_columns = chosen if fmt == "csv" else columns
    atomic_write_text(run_dir / "metrics.csv", metrics_csv([{c: r[c] for c in csv_columns if c in r} for r in table]))
    if fmt == "json":
        atomic_write_text(run_dir / "metrics.json", metrics_json(chosen, table))
    elif fmt == "parquet":
        atomic_write_bytes(run_dir / "metrics.parquet", metrics_parquet(chosen, table))
