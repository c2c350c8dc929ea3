"""Atomic file writes: everything a run writes goes through here.

A file is written to a temporary name in the same folder, flushed and fsync'ed, then moved over the target with
`os.replace`, which is atomic on POSIX. A crash (even `kill -9`) at any moment therefore leaves either the old
file or the new one, never a half-written file.

`sha256_of` is the one way a file's bytes are hashed (corpus manifest, lock files, the n-gram baseline).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from minitrain.errors import UserError


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], None]) -> None:
    """Call `write(f)` on a temporary binary file beside `path`, then rename it over `path`.

    A failure of the file system (no such folder, permission denied, disk full) is a `UserError` naming `path`;
    the previous file, if any, is left as it was.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except FileExistsError as e:  # mkdir met a file where a folder of the path should be
        raise UserError(f"{path}: cannot write ({e.filename} exists and is not a folder)") from None
    except OSError as e:
        raise cannot_write(path, e) from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # mkstemp makes 0600; give the usual file mode
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise cannot_write(path, e) from None
        raise
    _fsync_dir(path.parent)


def cannot_write(path: str | os.PathLike, error: OSError) -> UserError:
    """The one-line error for a file that could not be written: `<path>: cannot write (<reason>)`."""
    return UserError(f"{path}: cannot write ({error.strerror or error})")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(folder: Path) -> None:
    # The rename itself lives in the folder's entry table; syncing the folder makes it durable.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write `obj` as pretty, key-sorted JSON with a trailing newline (stable bytes for stable input)."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def append_line(path: str | os.PathLike, line: str) -> None:
    """Append one line and flush it to disk: logs grow line by line, and a crash loses at most the last line."""
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line.rstrip("\n") + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise cannot_write(path, e) from None


def read_text(path: str | os.PathLike, what: str) -> str:
    """A UTF-8 text file's content; a missing or unreadable file is one `UserError` naming it and `what` it is
    ("{path}: training log not found", "{path}: cannot read the training log (...)")."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the {what} ({exc})") from None


def sha256_of(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks (`UserError` naming the file if it cannot be read)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror})") from None
    return digest.hexdigest()
