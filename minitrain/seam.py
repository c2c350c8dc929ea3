"""The course seam: a student's files stand in for the library's own pieces of a lab.

Each lab asks for a few names in one or two files (`LAB_PIECES`). With the environment variable

    MINITRAIN_LAB_DIR=DIR

set, importing one of those modules (`minitrain.loop`, `minitrain.checkpoint`, ...) loads `DIR/<its path>`
instead of the library's file, when the workspace holds that file; every other module comes from the library.
The rest of minitrain imports only the listed names from these modules (tests/test_layering.py checks it), so
a student's module needs nothing more, and everything around it (the engine, checkpoints, reports, the CLI)
works with it unchanged:

    .venv/bin/minitrain lab start 01 labs/01              # the lab's files, with TODO stubs
    MINITRAIN_LAB_DIR=labs/01 make train                  # trains with labs/01/minitrain/loop.py
    .venv/bin/minitrain lab check 01 labs/01              # grades it (minitrain/course/)

Scripts the labs ask for (`scripts/train_mini.py`) are run from the workspace directly; only modules under
`minitrain/` are looked up here. `minitrain/__init__.py` installs the seam before any lab module is imported.

An exception raised from a workspace file (a TODO stub's NotImplementedError, a student's bug) is the student's
to fix, not a bug of the library's: `lab_error_line` says it in one line naming the file, function and line,
which the CLI prints instead of a traceback, and a run that failed that way records the file in its manifest.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Collection
from pathlib import Path
from types import TracebackType

LAB_DIR_VARIABLE = "MINITRAIN_LAB_DIR"

# lab -> {path the student writes: the names the rest of minitrain, and the lab's checker, use from it}.
# The lab text lists exactly these names; nothing else may be required of a student.
LAB_PIECES: dict[str, dict[str, tuple[str, ...]]] = {
    "00": {"minitrain/data/batcher.py": ("encode_split", "TrainBatcher", "EvalBatcher")},
    "01": {"minitrain/loop.py": ("train_step", "evaluate"), "scripts/train_mini.py": ("parse_args", "main")},
    "02": {"minitrain/checkpoint.py": ("save_checkpoint", "load_checkpoint")},
    "03": {"minitrain/monitor/curves.py": ("moving_average", "train_val_gap", "overfitting_onset")},
    "04": {"minitrain/monitor/early_stopping.py": ("EarlyStopping", "is_better")},
    "05": {"minitrain/nn/lora.py": ("LoRALinear",),
           "minitrain/quant/grid.py": ("scale_and_zero", "quantize_units", "dequantize_units")},
    "06": {"minitrain/data/bpe.py": ("pretokenize", "bytes_to_unicode", "BPETokenizer")},
    "07": {"minitrain/nn/rms_norm.py": ("RMSNorm",), "minitrain/nn/apply_rotary.py": ("apply_rotary",),
           "minitrain/nn/llama_mlp.py": ("LlamaMLP",), "minitrain/nn/llama_attention.py": ("LlamaAttention",)},
    "08": {"minitrain/data/answer_mask.py": ("answer_mask",),
           "minitrain/evaluation/answers.py": ("answer_scores", "exact_match")},
    "09": {"minitrain/merging/ties.py": ("trim", "elect_and_mean", "ties"),
           "minitrain/merging/dare.py": ("mask_rng", "drop_and_rescale", "dare_deltas", "dare_linear", "dare_ties")},
}


def module_name(path: str) -> str | None:
    """`minitrain/loop.py` -> `minitrain.loop`; None for a file outside the package (a script)."""
    if not path.startswith("minitrain/") or not path.endswith(".py"):
        return None
    return path[: -len(".py")].replace("/", ".")


# module name -> path, for every module a workspace may replace
REPLACEABLE = {
    name: path for pieces in LAB_PIECES.values() for path in pieces if (name := module_name(path)) is not None
}


class _WorkspaceFinder(importlib.abc.MetaPathFinder):
    """Finds the replaceable modules in a workspace folder, before the library's own finder looks."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, fullname: str, path=None, target=None):  # the importlib protocol
        relative = REPLACEABLE.get(fullname)
        if relative is None or not (self.root / relative).is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, self.root / relative)

    def __repr__(self) -> str:
        return f"_WorkspaceFinder({str(self.root)!r})"


def lab_dir() -> Path | None:
    """The workspace named by MINITRAIN_LAB_DIR (an empty value counts as unset)."""
    value = os.environ.get(LAB_DIR_VARIABLE, "")
    return Path(value).resolve() if value else None


def install() -> None:
    """Put the workspace finder first on sys.meta_path when MINITRAIN_LAB_DIR is set; once per process."""
    root = lab_dir()
    if root is None or any(isinstance(f, _WorkspaceFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _WorkspaceFinder(root))


def replaced() -> list[str]:
    """The library files this process takes from the workspace instead (relative paths, sorted)."""
    root = next((f.root for f in sys.meta_path if isinstance(f, _WorkspaceFinder)), None)
    if root is None:
        return []
    return sorted(path for path in REPLACEABLE.values() if (root / path).is_file())


def file_digests(root: Path, paths: Collection[str]) -> dict[str, str]:
    """{path: sha256 of root/path's bytes} for the `paths` that exist: what a run records of the lab files it
    trained with, so a checker can tell a run made with the files as they are now from one made before an edit."""
    return {path: hashlib.sha256((root / path).read_bytes()).hexdigest()
            for path in paths if (root / path).is_file()}


def check_lab_dir() -> str | None:
    """Why MINITRAIN_LAB_DIR cannot be used (it names no folder), or None when it is unset or fine."""
    root = lab_dir()
    if root is not None and not root.is_dir():
        named = os.environ[LAB_DIR_VARIABLE]
        return f"{LAB_DIR_VARIABLE}={named}: no such folder (a workspace is made by `minitrain lab start NN DIR`)"
    return None


def innermost_frame(tb: TracebackType | None, files: Collection[str]) -> tuple[str, int, str] | None:
    """(file, line, function) of the deepest frame of the traceback `tb` that runs one of `files` (absolute,
    resolved paths); None when none does. The function is its qualified name (`EvalBatcher.__iter__`)."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if str(Path(code.co_filename).resolve()) in files:
            found = (code.co_filename, tb.tb_lineno, code.co_qualname)
        tb = tb.tb_next
    return found


def lab_error_line(error: BaseException) -> str | None:
    """`NotImplementedError in save_checkpoint (labs/02/minitrain/checkpoint.py, line 63): TODO lab 02: ...`
    when `error` was raised from a file of the workspace MINITRAIN_LAB_DIR names; None otherwise."""
    root = lab_dir()
    if root is None:
        return None
    files = {str(root / path) for pieces in LAB_PIECES.values() for path in pieces}
    frame = innermost_frame(error.__traceback__, files)
    if frame is None:
        return None
    file, line, function = frame
    shown = os.path.relpath(file) if not os.path.relpath(file).startswith("..") else file
    detail = f": {error}" if str(error) else ""
    return f"{type(error).__name__} in {function} ({shown}, line {line}){detail}"
