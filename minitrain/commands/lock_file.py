"""Lock files: pin a config, its data and its libraries, and refuse a `--strict` run when any of them moved.

`minitrain lock CONFIG` writes `<config stem>.lock.yaml` beside the config (minitrain/commands/lock.py):

    minitrain_lock: 1
    config:   {the resolved config: defaults filled, overrides and templates applied}
    data:     {path of every data file: its sha256}
    versions: {python, minitrain and every library minitrain depends on}

A lock file is itself a loadable config (`minitrain train config.lock.yaml --strict`). `train --strict` compares
the config it is about to run, the data files and the installed versions with the lock and lists every
difference; where the run's files go (`output`) may differ.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_text, sha256_of
from minitrain.common.versions import library_versions
from minitrain.config.loader import LOCK_KEY, is_lock, resolved_dict
from minitrain.config.schema import Config
from minitrain.config.source import dotted
from minitrain.config.yaml_lines import load_yaml_file

LOCK_VERSION = 1
LIBRARIES = ("numpy", "numba", "pydantic", "pyyaml", "safetensors", "matplotlib", "tqdm", "huggingface_hub")


def data_files(cfg: Config) -> list[str]:
    """The data files a run reads: every split and the vocabulary that exists; a table's source files (a Hub
    dataset's as cached)."""
    data = cfg.data
    if cfg.is_table_task:
        from minitrain.data.locate import locate  # reads a source folder, or the Hub's cache

        found = locate(data.source, {"train": data.train_path, "val": data.val_path, "test": data.test_path})
        return sorted(str(path) for files in found.values() for path in files)
    paths = [data.train_path, data.val_path, data.dev_path, data.test_path, data.vocab_path]
    return [p for p in dict.fromkeys(paths) if p is not None and Path(p).is_file()]


def lock_contents(cfg: Config) -> dict[str, Any]:
    return {
        LOCK_KEY: LOCK_VERSION,
        "config": resolved_dict(cfg),
        "data": {path: sha256_of(path) for path in data_files(cfg)},
        "versions": library_versions(LIBRARIES),
    }


def lock_path_for(config_path: str | Path) -> Path:
    """`experiments/x/config.yaml` -> `experiments/x/config.lock.yaml`."""
    path = Path(config_path)
    return path.with_name(f"{path.stem}.lock.yaml")


def lock_text(contents: dict[str, Any]) -> str:
    """A lock file's text, for `lock_contents(cfg)`."""
    head = "# minitrain lock file: `minitrain train <this file> --strict` refuses to run if anything differs.\n"
    return head + yaml.safe_dump(contents, sort_keys=False, allow_unicode=True)


def write_lock(cfg: Config, out: str | Path) -> dict[str, Any]:
    """Write the lock file for `cfg` to `out` (atomically) and return what it holds."""
    contents = lock_contents(cfg)
    atomic_write_text(out, lock_text(contents))
    return contents


def read_lock(path: str | Path) -> dict[str, Any]:
    if not os.path.lexists(path):
        raise UserError(f"--strict needs a lock file and {path} does not exist; run `minitrain lock CONFIG` first", 2)
    data = load_yaml_file(path, "lock file")
    if not is_lock(data) or not all(isinstance(data.get(k), dict) for k in ("config", "data", "versions")):
        raise UserError(f"{path}: not a minitrain lock file (no {LOCK_KEY}, config, data and versions)", 2)
    return data


# Where a run's files go changes nothing it computes: a locked config may run into a new folder (--out-dir).
NOT_LOCKED = ("output",)


def lock_differences(cfg: Config, lock: dict[str, Any]) -> list[str]:
    """Every way the run about to start differs from `lock`: config keys (but where files go, NOT_LOCKED),
    data hashes, library versions."""
    now = lock_contents(cfg)
    found = [f"config {key}: locked {a!r}, now {b!r}" for key, a, b in _diff(lock["config"], now["config"])
             if key.split(".")[0] not in NOT_LOCKED]
    for path, locked, current in sorted(_diff(lock["data"], now["data"])):
        what = "missing now" if current is None else "not in the lock" if locked is None else "content changed"
        found.append(f"data {path}: {what} (sha256 locked {locked}, now {current})")
    return found + [f"version of {name}: locked {locked}, now {current}"
                    for name, locked, current in sorted(_diff(lock["versions"], now["versions"]))]


def _diff(a: Any, b: Any, path: tuple = ()) -> list[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in dict.fromkeys([*a, *b]) for d in _diff(a.get(k), b.get(k), (*path, k))]
    return [] if a == b else [(dotted(path), a, b)]


def check_strict(cfg: Config, lock_file: str | Path) -> None:
    """Raise a UserError (exit code 2) listing every difference between this run and `lock_file`."""
    differences = lock_differences(cfg, read_lock(lock_file))
    if differences:
        listing = "\n".join(f"  {d}" for d in differences)
        raise UserError(f"--strict: this run differs from {lock_file}:\n{listing}", 2)
