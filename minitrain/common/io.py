"""Atomic file writes: everything a run writes goes through here.

A file is written to a temporary name in the same folder, flushed and fsync'ed, then moved over the target with
`os.replace`, which is atomic on POSIX. A crash (even `kill -9`) at any moment therefore leaves either the old
file or the new one, never a half-written file.

Reading is the other half: every file a run or a user hands back to minitrain (manifest, results, logs, configs,
vocabularies, checkpoints, data) is read through `read_bytes` / `read_text` / `read_json`, which open only regular
files (a folder, a FIFO, a device or a symbolic-link loop is named as what it is, and never blocks), cap the size
where the caller gives one, and turn every kind of damage (bytes that are not UTF-8, JSON that does not parse,
nests too deep, or holds an integer of thousands of digits) into one `UserError` naming the file.

`sha256_of` is the one way a file's bytes are hashed (corpus manifest, lock files, the n-gram baseline).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from minitrain.common.errors import BAD_INPUT, UserError


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], None],
                 check: Callable[[Path], None] | None = None) -> None:
    """Call `write(f)` on a temporary binary file beside `path`, then `check(temporary path)` (it raises to refuse
    what was written), then rename it over `path`.

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
        if check is not None:
            check(Path(tmp))
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


def atomic_write_bytes(path: str | os.PathLike, data: bytes | list) -> None:
    """`data`: bytes, or a list of pieces (`model_files.encode`'s arrays), each written from its own memory."""
    atomic_write(path, lambda f: f.writelines([data] if isinstance(data, bytes) else data))


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


# ------------------------------------------------------------------------------------------------------ reading

MAX_JSON_DEPTH = 64  # no file minitrain writes nests deeper than a handful of levels
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def file_kind(mode: int) -> str | None:
    """What a non-regular file is ("a folder", "a FIFO (named pipe)", ...), from its st_mode; None if regular."""
    return None if stat.S_ISREG(mode) else next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def _reason(error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "a symbolic link loop"
    return error.strerror or str(error)


def regular_file_problem(path: str | os.PathLike) -> str | None:
    """Why `path` cannot be read as a regular file ("not found", "is a folder", "is a symbolic link loop", ...),
    or None when it can; nothing is opened, so a FIFO never blocks."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "not found"
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
        return f"cannot be read ({_reason(e) if isinstance(e, OSError) else e})"
    kind = file_kind(mode)
    return None if kind is None else f"is {kind}, not a regular file"


def path_exists(path: str | os.PathLike) -> bool:
    """`Path.exists()`, except that a path no file can have (a NUL byte, a name too long for the file system)
    is simply not there, instead of an exception."""
    try:
        return Path(path).exists()
    except (OSError, ValueError):
        return False


def read_bytes(path: str | os.PathLike, what: str, limit: int | None = None) -> bytes:
    """A regular file's bytes, at most `limit` of them; anything else is one `UserError` naming the file:
    "{path}: {what} not found", "{path}: the {what} is a FIFO (named pipe), not a regular file", ..."""
    try:
        # O_NONBLOCK: opening a FIFO would otherwise wait for a writer; on a regular file it changes nothing.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UserError(f"{path}: the {what} is a symbolic link to a file that does not exist", BAD_INPUT) \
                from None
        raise UserError(f"{path}: {what} not found", BAD_INPUT) from None
    except (OSError, ValueError) as e:
        raise _unreadable(path, what, e) from None
    info = os.fstat(fd)
    kind = file_kind(info.st_mode)
    if kind is not None or (limit is not None and info.st_size > limit):
        os.close(fd)
        if kind is not None:
            raise UserError(f"{path}: the {what} is {kind}, not a regular file", BAD_INPUT)
        raise _too_big(path, what, limit)
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read() if limit is None else _read_at_most(f, limit + 1)
        except OSError as e:
            raise _unreadable(path, what, e) from None
    if limit is not None and len(data) > limit:  # it grew while being read
        raise _too_big(path, what, limit)
    return data


def _read_at_most(f: IO[bytes], size: int) -> bytes:
    """Up to `size` bytes of `f`, read in 1 MiB pieces: `f.read(size)` allocates all `size` bytes up front, which
    for a 1 GiB limit fails under a memory limit (`lab check`'s) though the file is small."""
    chunks: list[bytes] = []
    while size > 0 and (chunk := f.read(min(size, 1 << 20))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _unreadable(path: str | os.PathLike, what: str, error: Exception) -> UserError:
    reason = _reason(error) if isinstance(error, OSError) else str(error)  # ValueError: a NUL byte in the path
    return UserError(f"{path}: cannot read the {what} ({reason})", BAD_INPUT)


def _too_big(path: str | os.PathLike, what: str, limit: int) -> UserError:
    return UserError(f"{path}: the {what} is larger than the {limit:,} bytes it may hold", BAD_INPUT)


def decode_utf8(data: bytes, where: str, what: str) -> str:
    """`data` as text; bytes that are not UTF-8 are one `UserError` saying where."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{where}: the {what} is not UTF-8 text (byte {e.start} is {data[e.start]:#04x}; a binary "
                        "file?)", BAD_INPUT) from None


def read_text(path: str | os.PathLike, what: str, limit: int | None = None) -> str:
    """A UTF-8 text file's content (see `read_bytes`); bytes that are not UTF-8 are a `UserError` naming it."""
    return decode_utf8(read_bytes(path, what, limit), str(path), what)


def parse_json(text: str, where: str, what: str) -> Any:
    """`json.loads(text)`, with every way it can fail (bad syntax, an integer past Python's 4,300-digit limit,
    nesting deeper than `MAX_JSON_DEPTH`) one `UserError` saying where."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        problem = f"is not valid JSON ({e.msg}, line {e.lineno} column {e.colno})"
    except ValueError:  # int() refuses very long digit strings
        problem = f"holds an integer of more than {sys.get_int_max_str_digits():,} digits"
    except RecursionError:
        problem = f"nests deeper than {MAX_JSON_DEPTH} levels"
    else:
        if _depth(value) <= MAX_JSON_DEPTH:
            return value
        problem = f"nests deeper than {MAX_JSON_DEPTH} levels"
    raise UserError(f"{where}: the {what} {problem}", BAD_INPUT)


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in a parsed JSON value (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            level += 1
            deepest = max(deepest, level)
            if level <= MAX_JSON_DEPTH:  # past the limit the answer is known: stop descending
                stack.extend((child, level) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def read_json(path: str | os.PathLike, what: str, limit: int | None = 16 << 20) -> Any:
    """The JSON value in a file (see `read_text` and `parse_json`)."""
    return parse_json(read_text(path, what, limit), str(path), what)


def read_json_object(path: str | os.PathLike, what: str, limit: int | None = 16 << 20) -> dict[str, Any]:
    """`read_json`, and the value must be a JSON object."""
    value = read_json(path, what, limit)
    if not isinstance(value, dict):
        raise UserError(f"{path}: the {what} must be a JSON object, not {json_type(value)}", BAD_INPUT)
    return value


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages ("a list", "a string", "null", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number"}
    return next((name for kind, name in names.items() if isinstance(value, kind)), type(value).__name__)


def sha256_of(path: str | os.PathLike) -> str:
    """Hex sha256 of a regular file's bytes, read in chunks (`UserError` naming the file if it cannot be read, or
    is a FIFO, a folder, ...)."""
    problem = regular_file_problem(path)
    if problem is not None:
        raise UserError(f"{path}: {problem}", BAD_INPUT)
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror})", BAD_INPUT) from None


# ------------------------------------------------------------------------------------------------------ outputs

def check_output(out: str | os.PathLike, inputs: Iterable[str | os.PathLike | None] = (), *, force: bool,
                 flag: str, suffix: str | None = None, folder: bool = False,
                 ours: Callable[[Path], bool] | None = None) -> None:
    """The one rule for what a command writes (docs/yaml-mode.md): a file of a format is named with its
    `suffix`; never over one of its `inputs` (the same file by any path, a symbolic or hard link, or a file inside
    an input folder), even with --force; never a file over a folder; over anything else that exists (an empty file
    or folder aside) only with `force`, or when `ours(out)` says this command wrote it. A refusal is one
    `UserError` (exit 2) naming `flag`, `out` and why."""
    out = Path(out)
    for given in filter(None, inputs):
        if _holds(Path(given), out) or (out.is_dir() and _holds(out, Path(given))):
            raise UserError(f"{flag} {out}: is (or holds) the input {given}; write the output elsewhere (--force "
                            "never writes over an input)", BAD_INPUT)
    if out.is_dir() and not folder:
        raise UserError(f"{flag} {out}: is a folder; give a file name", BAD_INPUT)
    if suffix is not None and out.suffix != suffix:
        raise UserError(f"{flag} {out}: this output is a {suffix} file; give a name ending in {suffix}", BAD_INPUT)
    if not os.path.lexists(out):
        return
    empty = not any(out.iterdir()) if out.is_dir() else out.is_file() and out.stat().st_size == 0
    if not (force or empty or (ours is not None and ours(out))):
        kind = "a folder" if out.is_dir() else "a file"
        raise UserError(f"{flag} {out}: exists and is not {kind} this command wrote; pass --force to replace it",
                        BAD_INPUT)


def _holds(given: Path, out: Path) -> bool:
    """Whether `out` is `given` by any path (a symbolic or hard link: `os.path.samefile`) or lies inside the folder
    `given` (one of its parents, as written or resolved, is `given`), or one of `given`'s entries reaches it by a
    name outside the folder: a symbolic link (to `out` or to a folder above it), or, when `out` has other hard
    links, a hard link."""
    if not path_exists(given) or not path_exists(out):
        return False
    above = (out, *out.absolute().parents, *out.resolve().parents)
    if any(os.path.samefile(p, given) for p in above):
        return True
    if not given.is_dir() or out.is_dir():
        return False
    linked = os.stat(out).st_nlink > 1
    entries = (Path(top, name) for top, dirs, names in os.walk(given) for name in (*dirs, *names))
    return any((linked or entry.is_symlink()) and path_exists(entry) and any(os.path.samefile(entry, p) for p in above)
               for entry in entries)
