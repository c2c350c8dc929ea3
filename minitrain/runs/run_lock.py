"""One writer per run folder: an exclusive OS lock on `RUN/.run.lock`, held for the whole run.

    with RunLock(out_dir):          # a second `train` or `--resume` on the same folder stops here:
        ...train...                 #   error: runs/x is in use by another minitrain process (PID 4242) ...

The lock is `flock(2)` on the file, so the kernel releases it when the process ends, however it ends: `kill -9`
never leaves a stale lock, and no one has to delete anything. The file itself stays (deleting a lock file
while another process may be opening it is how two processes end up holding "the" lock); it holds the PID and
host of the last writer, which is what the error and `minitrain info` show.

`writer_of(run_dir)` answers "is a process writing this folder now, and which?" without disturbing it, so
`info` can tell a live "running" manifest from one a killed process left behind.

A run that stops before writing anything leaves nothing: if the lock created the folder and the folder still
holds only the lock file at release, both are removed again.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path

from minitrain.common.errors import UserError
from minitrain.common.io import cannot_write, file_kind, parse_json

LOCK_FILE = ".run.lock"
_RETRIES = 5  # `info` peeks with a shared lock for a moment: a writer starting right then retries, not fails


class RunLock:
    """The exclusive writer lock of one run folder (a context manager); creates the folder if needed."""

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.dir = Path(run_dir)
        self.path = self.dir / LOCK_FILE
        self._fd: int | None = None
        self._created: list[Path] = []  # folders this lock created, outermost first

    def acquire(self) -> RunLock:
        self._created = [p for p in (self.dir, *self.dir.parents) if not p.exists()][::-1]
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise cannot_write(self.dir, e) from None
        blocked = 0
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                blocked += 1
                if blocked == _RETRIES:
                    raise UserError(f"{self.dir} is in use by another minitrain process ({describe_writer(self.dir)});"
                                    " one run folder has one writer: wait for it to finish, or choose another "
                                    "--out-dir", 2) from None
                time.sleep(0.05)
                continue
            if self._still_linked(fd):
                break
            os.close(fd)  # the previous holder removed the file between our open and our lock: start again
        self._fd = fd
        record = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n"
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, record.encode("utf-8"), 0)
        except OSError as e:
            self.release()
            raise cannot_write(self.path, e) from None
        return self

    def _open(self) -> int:
        try:
            # O_NOFOLLOW: never write through a link planted in the folder; O_NONBLOCK: a FIFO must not block.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.EISDIR):
                what = "a symbolic link" if e.errno == errno.ELOOP else "a folder"
                raise UserError(f"{self.path}: the run lock is {what}, not a regular file; remove it", 2) from None
            raise cannot_write(self.path, e) from None
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            os.close(fd)
            raise UserError(f"{self.path}: the run lock is {kind}, not a regular file; remove it", 2)
        return fd

    def _still_linked(self, fd: int) -> bool:
        try:
            return os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        if self._fd is None:
            return
        if self._created and [p.name for p in self.dir.iterdir()] == [LOCK_FILE]:
            self.path.unlink()  # nothing was written: leave no folder behind either
            for folder in reversed(self._created):
                try:
                    folder.rmdir()
                except OSError:
                    break
        os.close(self._fd)  # closing the file releases the flock
        self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def writer_of(run_dir: str | os.PathLike) -> str | None:
    """"PID 4242 on host h" when a process holds `run_dir`'s writer lock now; None when none does."""
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None  # no lock file (never written by this minitrain), or one nobody could have locked
    try:
        if file_kind(os.fstat(fd).st_mode) is not None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return describe_writer(run_dir)
        return None
    finally:
        os.close(fd)  # also drops the shared lock, if it was taken


def describe_writer(run_dir: str | os.PathLike) -> str:
    """What the lock file says about its writer ("PID 4242 on host h"), or that it cannot say."""
    path = Path(run_dir) / LOCK_FILE
    try:
        with open(path, "rb") as f:  # the writer holds it open: it is a regular file, not a FIFO
            text = f.read(4096).decode("utf-8")
        record = parse_json(text, str(path), "run lock")
        pid, host = record["pid"], record["host"]
        if type(pid) is not int or not isinstance(host, str):
            raise TypeError
    except (OSError, UnicodeDecodeError, UserError, KeyError, TypeError):
        return f"PID unknown: {path} does not say"
    return f"PID {pid}" + ("" if host == socket.gethostname() else f" on host {host}")
