"""TensorBoard: event files that `tensorboard --logdir DIR` reads (minitrain[tensorboard]).

Written with tensorboardX's SummaryWriter (protobuf event files, no TensorFlow needed) into `DIR/<run name>`,
so the runs of a sweep written under one DIR appear side by side. Scalars keep the run's metric names (`loss`,
`val_ppl`, `lr/...`, `system/cpu_percent`); histograms (gradient_monitor) and text (the config, sample
predictions) go in as TensorBoard's histogram and text summaries, and results.json's numbers as `results/...`
at the last step. A resumed run purges the events after its
checkpoint's step, as its train_log.jsonl drops those rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.extras import require
from minitrain.tracking.tracker import Destination, Tracker, numeric


class TensorBoardTracker(Tracker):
    def __init__(self, to: Destination) -> None:
        tensorboardx = require("tensorboardX", "tensorboard", "monitoring.tracking backend tensorboard")
        self.log_dir = Path(to.uri) / to.run
        self.writer = tensorboardx.SummaryWriter(str(self.log_dir), purge_step=to.resume_step, flush_secs=10)

    def start(self, params: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        lines = [f"    {key}: {json.dumps(value)}" for key, value in {**tags, **params}.items()]
        self.writer.add_text("config", "\n".join(lines), 0)  # indented: TensorBoard shows it as code

    def log_metrics(self, step: int, values: Mapping[str, float]) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)

    def log_histogram(self, tag: str, values: np.ndarray, step: int) -> bool:
        self.writer.add_histogram(tag, np.asarray(values, dtype=np.float64).ravel(), step)
        return True

    def log_text(self, tag: str, text: str, step: int) -> None:
        self.writer.add_text(tag, text, step)

    def finish(self, status: str, results: Mapping[str, Any], files: list[Path]) -> None:
        step = int(results.get("steps", 0))
        for key, value in numeric(results).items():
            self.writer.add_scalar(f"results/{key}", value, step)
        self.writer.add_text("status", status, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
