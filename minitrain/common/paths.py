"""Where the course's files are, and how a path is written into a file or shown to a user.

    course_file("data/processed/vocab.json")  the corpus, lab texts, configs and reference runs, by their path in
    course_file("minitrain/loop.py")           the checkout: package data (minitrain/_course/ links to the
                                               checkout's folders, and a wheel holds copies), the library's own
                                               modules in the package itself. Never the checkout's root.
    recorded_path("/home/ana/mt/runs/base/models/x.safetensors")  ->  "runs/base/models/x.safetensors"
                                                                       (run from /home/ana/mt)
    shown_path("/tmp/base")  ->  "base"   (what a model card names: never this machine's path)
"""

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # minitrain/, in a checkout or in site-packages
COURSE = PACKAGE / "_course"


def course_file(path: str) -> Path:
    """The course's file the labs name `path` (relative to a checkout's root), wherever minitrain is installed."""
    return PACKAGE.parent / path if path.startswith("minitrain/") else COURSE / path


def recorded_path(path: str | os.PathLike) -> str:
    """A path as a run records it: relative to the current folder when inside it, else absolute. The run's
    manifest.json names that folder (`working_dir`), so runs/run_dir.locate finds the path from any working
    directory, and a committed run names its sources within its checkout, never a machine's path."""
    if "://" in str(path):  # a URL or hf:// id is no file path; abspath would fold its "//"
        return str(path)
    relative = os.path.relpath(absolute := os.path.abspath(path))
    return absolute if relative.startswith("..") else relative


def shown_path(path: str | os.PathLike) -> str:
    """A path as a file meant for other machines names it (a model card): `recorded_path` when that is relative
    (or a URL or Hub id), else just the file or folder's name."""
    recorded = recorded_path(path)
    return Path(recorded).name if os.path.isabs(recorded) else recorded
