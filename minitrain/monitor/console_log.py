"""A run's console output, kept in its run folder: logs/train.log.

    with console_log(run_dir / "logs" / "train.log"):
        ...                          # everything printed to stdout and stderr also goes to the file

A run that shows nothing on the screen writes its plain progress lines there through `log_only()`.

The file gets whole lines only. A progress bar redraws its line with carriage returns; those redraws are dropped
and the line the bar leaves at the end is kept, so the log reads like the plain progress mode. The file is
created at the first line printed, so a run that fails its checks before printing anything writes nothing.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

CONSOLE_LOG = Path("logs") / "train.log"  # in the run folder


class _Tee:
    """A text stream that writes through to `stream` and copies complete lines to the log file."""

    def __init__(self, stream: TextIO, log: _LogFile) -> None:
        self.stream, self.log, self.pending = stream, log, ""

    def write(self, text: str) -> int:
        self.stream.write(text)
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self.log.write(line.rsplit("\r", 1)[-1])  # what a terminal would show after the carriage returns
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def close_pending(self) -> None:
        # A bar's last state, or a message without its newline: keep what a terminal would show.
        if self.pending.rsplit("\r", 1)[-1].strip():
            self.log.write(self.pending.rsplit("\r", 1)[-1])
        self.pending = ""

    def __getattr__(self, name: str):  # isatty, encoding, fileno...: the real stream's
        return getattr(self.stream, name)


class _LogFile:
    def __init__(self, path: Path) -> None:
        self.path, self.file = path, None

    def write(self, line: str) -> None:
        if self.file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by console_log)
        self.file.write(line + "\n")
        self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            os.fsync(self.file.fileno())
            self.file.close()


def log_only() -> TextIO | None:
    """Inside `console_log`: a stream whose lines go to its file only, not to the screen; None outside it."""
    log = getattr(sys.stdout, "log", None)
    return _Tee(io.StringIO(), log) if isinstance(log, _LogFile) else None


@contextmanager
def console_log(path: str | os.PathLike) -> Iterator[None]:
    """Copy stdout and stderr, line by line, to `path` (appended) while the block runs."""
    log = _LogFile(Path(path))
    out, err = _Tee(sys.stdout, log), _Tee(sys.stderr, log)
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out.stream, err.stream
        out.close_pending()
        err.close_pending()
        log.close()
