"""Which Python, minitrain and libraries produced a result: manifest.json, lock files and checkpoints record it."""

from __future__ import annotations

import platform
from collections.abc import Iterable
from importlib import metadata

__version__ = "0.1.0"  # pyproject.toml says the same; minitrain/__init__.py re-exports it


def library_versions(libraries: Iterable[str]) -> dict[str, str]:
    """{"python", "minitrain", then each of `libraries`}: the version of each, "not installed" when absent."""
    versions = {"python": platform.python_version(), "minitrain": __version__}
    for name in libraries:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
