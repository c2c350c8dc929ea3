"""A run folder as the live dashboard reads it: the files a run appends to, tailed, and the pace seen so far.

    view = RunView("runs/x")            # a UserError (exit code 2) when the folder holds no run
    view.poll()                         # reads what the files gained since the last poll
    view.train, view.val                # train_log.jsonl's train rows and val rows so far
    view.eta_seconds()                  # the time left at the pace seen so far

Each appended file (train_log.jsonl, system_metrics.jsonl, samples.jsonl, logs/train.log) is read from where the
last poll stopped, whole lines only: a last line without its newline is an append still being written, read at
the next poll. A file that got shorter or was replaced (a resume rewrites the log up to its checkpoint) is read
again from its start. A whole line of train_log.jsonl that is not a row the loop writes is a UserError naming
file and line (exit code 2). manifest.json and config.resolved.yaml are written atomically: read whole.

train_log.jsonl holds no times (its bytes are the same for the same seed), so the pace is what the poller sees:
each poll that finds new train rows notes (its clock, the last step), and

    seconds per step = (t_last − t_first) / (step_last − step_first)     over the notes so far
    ETA              = seconds per step × (total_steps − step_last − 1)

A finished run's pace is its manifest's `ms_per_step`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.io import parse_json, read_json_object
from minitrain.config.observing import METRIC_ALIASES, logged_key
from minitrain.config.yaml_lines import load_yaml_file
from minitrain.monitor.console_log import CONSOLE_LOG
from minitrain.monitor.report import log_row_problem
from minitrain.monitor.system import FILE as SYSTEM_FILE
from minitrain.runs.run_dir import LOG_FILE
from minitrain.runs.run_files import MANIFEST, RESOLVED_CONFIG

SAMPLES_FILE = "samples.jsonl"  # a sample_predictions callback's
ALERT_PREFIXES = ("warn: ", "halt: ", "warning: ")  # how the loop prints a fired alert and its warnings
MAX_READ = 64 << 20  # bytes one poll reads from one file: a huge log is caught up over several polls


class Tail:
    """The whole lines appended to one file since the last call, each parsed by `parse(text, "FILE:LINE")`."""

    def __init__(self, path: Path, parse: Callable[[str, str], Any]) -> None:
        self.path, self.parse = path, parse
        self.offset, self.line, self.identity = 0, 0, None

    def new(self) -> tuple[list[Any], bool]:
        """(the new lines parsed, whether the file started over since the last call)."""
        try:
            with open(self.path, "rb") as f:
                stat = os.fstat(f.fileno())
                replaced = self.identity is not None and (stat.st_dev, stat.st_ino) != self.identity
                restarted = replaced or stat.st_size < self.offset
                if restarted:
                    self.offset, self.line = 0, 0
                self.identity = stat.st_dev, stat.st_ino
                f.seek(self.offset)
                data = f.read(min(stat.st_size - self.offset, MAX_READ))
        except FileNotFoundError:  # not written yet, or deleted by --overwrite
            return [], False
        whole = data[: data.rfind(b"\n") + 1]  # empty when no newline came: the line is still being written
        self.offset += len(whole)
        parsed = []
        for raw in whole.decode("utf-8", errors="replace").split("\n")[:-1]:
            self.line += 1
            if raw.strip():
                parsed.append(self.parse(raw, f"{self.path}:{self.line}"))
        return parsed, restarted


def _log_row(text: str, where: str) -> dict[str, Any]:
    row = parse_json(text, where, "log line")
    problem = log_row_problem(row)
    if problem:
        raise UserError(f"{where}: {problem}", BAD_INPUT)
    return row


def _json_object(text: str, where: str) -> dict[str, Any]:
    row = parse_json(text, where, "line")
    if not isinstance(row, dict):
        raise UserError(f"{where}: a line of this file must be a JSON object", BAD_INPUT)
    return row


def is_run_folder(run: Path) -> bool:
    return run.is_dir() and any(os.path.lexists(run / name) for name in (MANIFEST, RESOLVED_CONFIG, LOG_FILE))


class RunView:
    """What the dashboard shows of one run folder, brought up to date by `poll()` (see the module docstring)."""

    def __init__(self, run_dir: str | os.PathLike, clock: Callable[[], float] = time.monotonic) -> None:
        self.run = Path(run_dir)
        if not is_run_folder(self.run):
            raise UserError(f"{self.run}: not a run folder (none of {MANIFEST}, {RESOLVED_CONFIG}, {LOG_FILE} found)",
                            BAD_INPUT)
        self.clock = clock
        self.log = Tail(self.run / LOG_FILE, _log_row)
        self.system_tail = Tail(self.run / SYSTEM_FILE, _json_object)
        self.samples_tail = Tail(self.run / SAMPLES_FILE, _json_object)
        self.console = Tail(self.run / CONSOLE_LOG, lambda text, where: text.rsplit("\r", 1)[-1])
        self.train: list[dict[str, Any]] = []
        self.val: list[dict[str, Any]] = []
        self.system: list[dict[str, Any]] = []
        self.samples: list[dict[str, Any]] = []
        self.alerts: list[str] = []
        self.manifest: dict[str, Any] = {}
        self.config: dict[str, Any] = {}
        self.marks: list[tuple[float, int]] = []  # (clock, last train step) at each poll that found new train rows

    def poll(self) -> None:
        """Read what every file gained since the last poll."""
        rows, restarted = self.log.new()
        if restarted:
            self.train, self.val, self.marks = [], [], []
        self.train += [r for r in rows if "loss" in r]
        self.val += [r for r in rows if "val_loss" in r]
        if any("loss" in r for r in rows):
            self.marks.append((self.clock(), self.train[-1]["step"]))
        for tail, name in ((self.system_tail, "system"), (self.samples_tail, "samples")):
            new, restarted = tail.new()
            setattr(self, name, ([] if restarted else getattr(self, name)) + new)
        lines, restarted = self.console.new()
        self.alerts = ([] if restarted else self.alerts) + [line for line in lines if line.startswith(ALERT_PREFIXES)]
        if (self.run / MANIFEST).is_file():
            self.manifest = read_json_object(self.run / MANIFEST, "manifest")
        if not self.config and (self.run / RESOLVED_CONFIG).is_file():  # written once, before the first step
            self.config = load_yaml_file(self.run / RESOLVED_CONFIG) or {}

    # ------------------------------------------------------------------------------------------- what it shows

    def key_of(self, name: str) -> str:
        """The logged column a dashboard metric's name means (config/observing.py's logged_key), by the rows so
        far; the name itself (learning_rate: lr) while none of its columns has been logged."""
        logged = {k for r in (*self.train[-1:], *self.val[-1:]) for k in r}
        return logged_key(name, logged) or METRIC_ALIASES.get(name, name)

    def rows_of(self, key: str) -> list[dict[str, Any]]:
        """The rows logging `key`, in step order: val rows for a val metric, train rows for the others."""
        return [r for r in (self.val if key.startswith("val_") else self.train) if key in r]

    @property
    def status(self) -> str:
        return self.manifest.get("status", "starting")

    @property
    def total_steps(self) -> int | None:
        total = self.manifest.get("total_steps")
        return total if isinstance(total, int) else None

    @property
    def steps_done(self) -> int:
        return self.train[-1]["step"] + 1 if self.train else 0

    def seconds_per_step(self) -> float | None:
        """The pace seen since the first note, or the finished run's ms_per_step; None before two notes."""
        if self.status not in ("running", "starting") and isinstance(self.manifest.get("ms_per_step"), int | float):
            return self.manifest["ms_per_step"] / 1000
        if len(self.marks) < 2 or self.marks[-1][1] == self.marks[0][1]:
            return None
        (t0, s0), (t1, s1) = self.marks[0], self.marks[-1]
        return (t1 - t0) / (s1 - s0)

    def eta_seconds(self) -> float | None:
        """The time left: 0 once every step is done; None without a pace, or for a run that stopped short."""
        pace, total = self.seconds_per_step(), self.total_steps
        if total is not None and self.steps_done >= total:
            return 0.0
        if self.status not in ("running", "starting"):
            return None
        return None if pace is None or total is None else pace * (total - self.steps_done)

    def examples_per_step(self) -> int | None:
        training = self.config.get("training") or {}
        batch, accumulation = training.get("batch_size"), training.get("grad_accumulation", 1)
        return batch * accumulation if isinstance(batch, int) and isinstance(accumulation, int) else None

