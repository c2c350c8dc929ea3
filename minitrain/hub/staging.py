"""An export folder written whole or not at all: files go into a temporary sibling of OUT_DIR, which replaces
OUT_DIR only once it is complete (minitrain/hub/export_hf.py, hub/export_text.py). An interrupted or failed export
never leaves a half-written file, nor a mix of two exports; an OUT_DIR holding other files is refused.

    check_target(out, EXPORT_FILES)
    with staged(out) as staging:   # write every file under staging/; it becomes OUT_DIR when the block ends well
        ...
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from minitrain.common.errors import UserError
from minitrain.common.io import cannot_write
from minitrain.runs.run_dir import process_exists


def check_target(out: Path, allowed: tuple[str, ...]) -> None:
    """OUT_DIR must be new, empty, or hold only files an export writes (`allowed`)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise UserError(f"{out}: exists and is not a folder", 2)
    foreign = sorted(p.name for p in out.iterdir() if p.name not in allowed) if out.is_dir() else []
    if foreign:
        shown = ", ".join(foreign[:4]) + (f" and {len(foreign) - 4} more" if len(foreign) > 4 else "")
        raise UserError(f"{out}: holds files an export does not write ({shown}); export into a new or empty folder, "
                        "or into an earlier export", 2)


@contextmanager
def staged(out: Path) -> Iterator[Path]:
    """A new staging folder beside `out` (its parents made, the leftovers of killed exports removed) that replaces
    `out` when the block ends without an error; removed in any case."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise cannot_write(out, e) from None
    remove_stale_siblings(out)
    staging = sibling(out, "export")
    try:
        yield staging
        swap_in(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already when the swap succeeded


def sibling(out: Path, role: str) -> Path:
    return out.parent / f".{out.name}.{role}-{os.getpid()}.tmp"


def swap_in(staging: Path, out: Path) -> None:
    """Put `staging` where `out` is: one rename when `out` does not exist yet, else two, the old export moved
    aside first (only a crash between the two renames leaves it there, under `.<name>.old-<pid>.tmp`)."""
    try:
        if out.exists():
            old = sibling(out, "old")
            os.rename(out, old)
            os.rename(staging, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(staging, out)
    except OSError as e:
        raise cannot_write(out, e) from None


def remove_stale_siblings(out: Path) -> None:
    """Staging and set-aside folders that an export killed before it finished left beside `out`."""
    pattern = re.compile(rf"^\.{re.escape(out.name)}\.(export|old)-(?P<pid>\d+)\.tmp$")
    for path in out.parent.iterdir():
        match = pattern.match(path.name)
        if match and path.is_dir() and not path.is_symlink() and not process_exists(int(match["pid"])):
            shutil.rmtree(path, ignore_errors=True)
