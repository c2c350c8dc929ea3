"""Which Python, minitrain and libraries produced a result: manifest.json, lock files and checkpoints record it."""

from __future__ import annotations

import platform
from collections.abc import Iterable
from importlib import metadata

import minitrain


def library_versions(libraries: Iterable[str]) -> dict[str, str]:
    """{"python", "minitrain", then each of `libraries`}: the version of each, "not installed" when absent."""
    versions = {"python": platform.python_version(), "minitrain": minitrain.__version__}
    for name in libraries:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
