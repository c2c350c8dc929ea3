"""The dependency-free tracker: one JSON line per event, appended to a file that many runs may share.

    {"event": "start", "run": "lr-3e-4-s42", "experiment": "sweep-lr", "project": "verbs", "tags": {...},
     "params": {"optimizer.lr_max": 0.0003, ...}}
    {"event": "metrics", "run": "lr-3e-4-s42", "step": 50, "values": {"val_loss": 1.02, "val_ppl": 2.77}}
    {"event": "end", "run": "lr-3e-4-s42", "status": "completed", "results": {...}, "files": [...]}

train_log.jsonl already holds one run's rows; this file gathers the runs of an experiment (every trial of a
sweep) in one place, each line naming its run, so `pandas.read_json(path, lines=True)` compares them.
Lines are appended whole (one write each), so runs in parallel processes can share the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from minitrain.common.io import append_line
from minitrain.tracking.tracker import Destination, Tracker


class JsonlTracker(Tracker):
    def __init__(self, to: Destination) -> None:
        self.path, self.run, self.experiment, self.project = Path(to.uri), to.run, to.experiment, to.project
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _write(self, event: str, **fields: Any) -> None:
        append_line(self.path, json.dumps({"event": event, "run": self.run, **fields}, default=str))

    def start(self, params: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        self._write("start", experiment=self.experiment, project=self.project, tags=dict(tags), params=dict(params))

    def log_metrics(self, step: int, values: Mapping[str, float]) -> None:
        if values:
            self._write("metrics", step=step, values=dict(values))

    def log_text(self, tag: str, text: str, step: int) -> None:
        self._write("text", step=step, tag=tag, text=text)

    def finish(self, status: str, results: Mapping[str, Any], files: list[Path]) -> None:
        self._write("end", status=status, results=dict(results), files=[str(f) for f in files])
