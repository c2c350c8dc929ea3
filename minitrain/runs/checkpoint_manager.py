"""The `checkpoints/` folder of one run: `step-<N>.safetensors` files, a `latest` pointer, pruning, `best`.

    manager = CheckpointManager(run_dir, keep_last=3)
    save_checkpoint(manager.path_for(500), step=500, ...)   # lab 02's writer (minitrain/checkpoint.py)
    manager.point_latest(manager.path_for(500))             # `latest` names it; older files pruned
    manager.latest()          # checkpoints/step-500.safetensors
    CheckpointManager.resolve("runs/lab01")   # what `--resume runs/lab01` continues from

The files are written by the training engine with `minitrain.checkpoint.save_checkpoint` (lab 02); this module
knows the folder, not the file's contents, so runs/ never imports the lab's checkpoint.py, which imports runs/.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_text, read_text, regular_file_problem

_STEP_FILE = re.compile(r"^step-(\d+)\.safetensors$")
BEST_FILE = "best.safetensors"
LATEST_POINTER = "latest"


class CheckpointManager:
    """The `checkpoints/` folder of one run: `step-<N>.safetensors` files, a `latest` pointer, pruning.

    Crash safety comes from the order of the writes, each of them atomic: the checkpoint file is complete
    before `latest` names it, and old files are pruned only after `latest` has moved on. A `kill -9` at any
    moment therefore leaves `latest` naming a complete checkpoint (or no `latest` yet, before the first save).
    """

    def __init__(self, run_dir: str | Path, keep_last: int | None = None) -> None:
        if keep_last is not None and keep_last < 1:
            raise ValueError(f"keep_last must be >= 1 or None (keep all), got {keep_last}")
        self.dir = Path(run_dir) / "checkpoints"
        self.keep_last = keep_last

    def path_for(self, step: int) -> Path:
        return self.dir / f"step-{step}.safetensors"

    def point_latest(self, path: Path) -> None:
        """Once the step file `path` is complete: point `latest` at it, then prune."""
        atomic_write_text(self.dir / LATEST_POINTER, path.name + "\n")
        self.prune()

    def step_files(self) -> list[tuple[int, Path]]:
        """The complete `step-<N>.safetensors` files, oldest first."""
        if not self.dir.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.dir.iterdir() if (m := _STEP_FILE.match(p.name))]
        return sorted(found)

    def latest(self) -> Path | None:
        """The checkpoint `latest` names; without a usable pointer, the newest step file; None if there is none."""
        pointer = self.dir / LATEST_POINTER
        if pointer.is_file():
            name = read_text(pointer, "checkpoint pointer", limit=4096).strip()
            if not _STEP_FILE.match(name):
                shown = repr(name) if len(name) <= 80 else repr(name[:77]) + "..."
                raise UserError(f"{pointer}: expected a file name like step-120.safetensors, found {shown}")
            if os.path.isfile(self.dir / name):  # False too for a name too long to exist
                return self.dir / name
        files = self.step_files()
        return files[-1][1] if files else None

    def prune(self) -> None:
        """Delete all but the newest `keep_last` step files (never the one `latest` names) and stale temp files."""
        # A temp file here is a write that a crash interrupted; the file it was to replace is intact.
        for tmp in self.dir.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
        if self.keep_last is None:
            return
        keep = {self.latest()}
        files = self.step_files()
        for _, path in files[: max(len(files) - self.keep_last, 0)]:
            if path not in keep:
                path.unlink(missing_ok=True)

    @staticmethod
    def resolve(path: str | Path) -> Path:
        """The checkpoint to resume from, given a checkpoint file, a run folder or its `checkpoints/` folder."""
        path = Path(path)
        if path.is_file():
            return path
        if not path.is_dir():
            problem = regular_file_problem(path)
            raise UserError(f"{path}: no such checkpoint file or run folder" if problem == "not found" else
                            f"{path}: {problem}")
        if (path / "checkpoints").is_dir():
            found = CheckpointManager(path).latest()
        elif path.name == "checkpoints":
            found = CheckpointManager(path.parent).latest()
        else:
            found = None
        if found is None:
            raise UserError(f"{path}: no checkpoint found (looked for checkpoints/latest and step-<N>.safetensors)")
        return found
