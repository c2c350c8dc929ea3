"""A tracker that writes one CSV row per value: `run,step,metric,value`, a long table that a spreadsheet or
`pandas.read_csv(path).pivot_table(index="step", columns="metric")` reads. Rows are appended whole, so the runs of
a sweep can share one file; the params and files stay in the run folder. Save as minitrain/tracking/csv_tracker.py
and add to TRACKER_BACKENDS in minitrain/config/observing.py the line
    TrackerBackend("csv", "minitrain.tracking.csv_tracker.CsvTracker", "{run_dir}/tracking.csv"),
then `monitoring: {tracking: {backend: csv}}` works from YAML.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from minitrain.common.io import append_line
from minitrain.tracking.tracker import Destination, Tracker, numeric


class CsvTracker(Tracker):
    def __init__(self, to: Destination) -> None:
        self.path, self.run = Path(to.uri), to.run
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _row(self, *cells: Any) -> None:
        line = io.StringIO()
        csv.writer(line).writerow(cells)  # quotes a name holding a comma
        append_line(self.path, line.getvalue())

    def start(self, params: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        if not self.path.exists():
            self._row("run", "step", "metric", "value")

    def log_metrics(self, step: int, values: Mapping[str, float]) -> None:
        for metric, value in values.items():
            self._row(self.run, step, metric, repr(float(value)))

    def finish(self, status: str, results: Mapping[str, Any], files: list[Path]) -> None:
        self.log_metrics(int(results.get("steps", 0)), {f"results/{k}": v for k, v in numeric(results).items()})
