"""Where minitrain's own checkout is, and how a path is written into a file or shown to a user.

    REPO_ROOT / "experiments" / ...       the reference runs a lab or a default reads
    recorded_path("/home/ana/mt/runs/base/models/x.safetensors")  ->  "runs/base/models/x.safetensors"
                                                                       (run from /home/ana/mt)
    shown_path("/tmp/base")  ->  "base"   (what a model card or an exported adapter names: never this machine's path)
"""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def recorded_path(path: str | os.PathLike) -> str:
    """A path as a user would type it here: relative to the current folder when inside it, else absolute.

    Run folders record where their weights came from this way, so a committed run folder names its sources
    relative to the checkout it was made in, never one machine's absolute path."""
    if "://" in str(path):  # a URL or hf:// id is no file path; abspath would fold its "//"
        return str(path)
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute)
    return absolute if relative.startswith("..") else relative


def shown_path(path: str | os.PathLike) -> str:
    """A path as a file meant for other machines names it (a model card, an exported adapter): `recorded_path`
    when that is relative (or a URL or Hub id), else just the file or folder's name."""
    recorded = recorded_path(path)
    return Path(recorded).name if os.path.isabs(recorded) else recorded
