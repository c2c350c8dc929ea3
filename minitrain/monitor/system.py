"""System metrics: this process's CPU, memory and disk use, sampled beside training (minitrain[system]).

    monitoring:
      system: {interval: 1000, metrics: [cpu_percent, memory_mb, disk_io]}

A background thread samples psutil every `interval` ms and appends a row to system_metrics.jsonl:

    {"time": 12.004, "step": 350, "cpu_percent": 98.7, "memory_mb": 142.3, "disk_read_mb": 0.0, "disk_write_mb": 4.1}

`time` is seconds since training started, `step` the last step finished; cpu_percent is this process's share of
one core since the previous sample (above 100 when several threads compute), memory_mb its resident memory,
disk_*_mb the bytes it read and wrote since the run started. The same values go to the tracker as
`system/<name>`. The rows depend on the clock and the machine, so they live apart from train_log.jsonl, which
stays byte-identical for the same seed.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from minitrain.callbacks.callback import Callback, Context
from minitrain.common.extras import require
from minitrain.common.io import append_line, atomic_write_text

FILE = "system_metrics.jsonl"
MB = 2**20


class SystemMonitor(Callback):
    """Samples on its own thread from `start()` to `close()`; hears the steps to stamp each sample."""

    def __init__(self, path: str | Path, interval_ms: int, metrics: list[str], tracker: Any = None,
                 fresh: bool = True) -> None:
        psutil = require("psutil", "system", "monitoring.system")
        self.path, self.interval, self.metrics, self.tracker = Path(path), interval_ms / 1000, metrics, tracker
        self.process = psutil.Process()
        self.step = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="minitrain-system-metrics", daemon=True)
        if fresh:
            atomic_write_text(self.path, "")

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self.process.cpu_percent(None)  # the first call only starts psutil's clock
        self._io0 = self._io()
        self._thread.start()

    def _io(self) -> tuple[float, float] | None:
        counters = getattr(self.process, "io_counters", None)  # not on macOS
        if counters is None:
            return None
        io = counters()
        return io.read_bytes / MB, io.write_bytes / MB

    def sample(self) -> dict[str, float]:
        """One row: time, step and the chosen metrics."""
        row: dict[str, float] = {"time": round(time.perf_counter() - self._t0, 3), "step": self.step}
        if "cpu_percent" in self.metrics:
            row["cpu_percent"] = self.process.cpu_percent(None)
        if "memory_mb" in self.metrics:
            row["memory_mb"] = round(self.process.memory_info().rss / MB, 2)
        io = self._io() if "disk_io" in self.metrics else None
        if io is not None and self._io0 is not None:
            row["disk_read_mb"] = round(io[0] - self._io0[0], 3)
            row["disk_write_mb"] = round(io[1] - self._io0[1], 3)
        return row

    def _record(self) -> None:
        row = self.sample()
        append_line(self.path, json.dumps(row))
        if self.tracker is not None:
            self.tracker.log_metrics(int(row["step"]), {f"system/{k}": v for k, v in row.items()
                                                        if k not in ("time", "step")})

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._record()

    def on_step_end(self, ctx: Context) -> None:
        self.step = ctx.step

    def on_train_end(self, ctx: Context) -> None:
        self.close()  # before the tracker files the run away

    def close(self) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
            self._record()  # the last state, so even a run shorter than the interval has a row
