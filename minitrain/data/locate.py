"""Where a table's files are: `data.source` (a file, a folder or a Hugging Face dataset) or explicit split files.

    data.source: data/digits/digits.csv             one file: every row, split by data.split
    data.source: data/mnist/                        a folder: files named after their split (train.parquet,
                                                    validation.csv, test-00000-of-00001.parquet...), or one
                                                    data file split by data.split
    data.source: hf://datasets/user/name[/path]     a dataset repo on the Hugging Face Hub (hf://user/name too),
                                                    downloaded into the standard Hugging Face cache (HF_HOME) with
                                                    huggingface_hub; a second run, or one with HF_HUB_OFFLINE=1,
                                                    reads the cached copy. `path` picks a file or folder in it
    data.train / data.val / data.test               one file per split

`locate` returns {split: [files]}: "train", "val" and optionally "test", or "all" for rows still to be split. A
split in several files (shards) is their rows in name order. "validation" and "dev" name the val split.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from minitrain.common.errors import HUB_FAILED, DataError
from minitrain.common.hub_id import hub_id_problem
from minitrain.data.formats import EXTENSIONS

HF_PREFIX = "hf://"
SPLIT_NAMES = {"train": "train", "training": "train", "val": "val", "valid": "val", "validation": "val",
               "dev": "val", "test": "test", "testing": "test"}
KEY = ("data", "source")


def is_hub_source(source: str) -> bool:
    return source.startswith(HF_PREFIX)


def hub_parts(source: str) -> tuple[str, str]:
    """hf://datasets/user/name/sub/path -> ("user/name", "sub/path"); the `datasets/` part may be left out."""
    parts = source.removeprefix(HF_PREFIX).strip("/").split("/")
    if parts[0] == "datasets":
        parts = parts[1:]
    if len(parts) < 2 or not all(parts[:2]):
        raise DataError(KEY, f"{source!r} is not a Hub dataset; write hf://datasets/user/name[/path]")
    repo_id, inner = "/".join(parts[:2]), parts[2:]
    if problem := hub_id_problem(repo_id):  # a revision (@main), a split (:train), a query: not part of an id
        raise DataError(KEY, f"{source}: {problem} (hf://datasets/user/name[/path])")
    if any(part in ("", ".", "..") for part in inner):  # the path stays inside the dataset's snapshot
        raise DataError(KEY, f"{source}: the path inside the dataset may not hold '.', '..' or '//'")
    return repo_id, "/".join(inner)


def _hub_failed(message: str) -> DataError:
    """A failed dataset download: about data.source, with the exit code of a failed Hub request."""
    error = DataError(KEY, message)
    error.exit_code = HUB_FAILED
    return error


def download_dataset(source: str) -> Path:
    """The local copy of a Hub dataset (its snapshot folder, or the file `path` names), downloaded if needed."""
    import httpx2  # huggingface_hub's HTTP library: its errors are what a failed download raises
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError

    repo_id, inner = hub_parts(source)
    patterns = None if not inner else [inner, f"{inner}/*", f"{inner}/**"]
    try:
        folder = Path(snapshot_download(repo_id, repo_type="dataset", allow_patterns=patterns))
    except LocalEntryNotFoundError:
        raise _hub_failed(f"{source}: not in the local Hugging Face cache ({constants.HF_HUB_CACHE}) and the Hub "
                          f"at {constants.ENDPOINT} cannot be reached (offline mode or no network)") from None
    except RepositoryNotFoundError:
        raise _hub_failed(f"{source}: no such dataset repo on {constants.ENDPOINT} (or it is private and no "
                          "token with access is set)") from None
    except httpx2.HTTPError as e:
        raise _hub_failed(f"{source}: download from {constants.ENDPOINT} failed ({type(e).__name__}: {e})") from None
    found = folder / inner if inner else folder
    if not found.exists():
        raise DataError(KEY, f"{source}: the dataset has no {inner!r}")
    return found


def data_files(folder: Path, extensions: Collection[str] = EXTENSIONS) -> list[Path]:
    """The files under `folder` (any depth, path order) with one of `extensions` (the table formats'), without
    hidden files and README.md (on the Hub it describes the dataset)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in extensions
                  and p.name.lower() != "readme.md"
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def split_of(path: Path) -> str | None:
    """The split a file's name says: train.csv, validation-00000-of-00002.parquet, test_x.json; None otherwise."""
    stem = path.name.split(".")[0].lower()
    for cut in ("-", "_"):
        stem = stem.split(cut)[0]
    return SPLIT_NAMES.get(stem)


def locate_source(source: str) -> dict[str, list[Path]]:
    """{split: files} for `data.source` (see the module docstring)."""
    path = download_dataset(source) if is_hub_source(source) else Path(source)
    if path.is_file():
        return {"all": [path]}
    if not path.is_dir():
        raise DataError(KEY, f"{source}: no such file or folder")
    files = data_files(path)
    if not files:
        raise DataError(KEY, f"{source}: holds no data file (known extensions: {', '.join(sorted(EXTENSIONS))})")
    by_split: dict[str, list[Path]] = {}
    for file in files:
        split = split_of(file)
        if split is not None:
            by_split.setdefault(split, []).append(file)
    if not by_split:
        if len(files) > 1:
            raise DataError(KEY, f"{source}: {len(files)} data files and none named after a split (train, "
                                 f"validation, test): point data.source at one of them")
        return {"all": files}
    if "train" not in by_split:
        raise DataError(KEY, f"{source}: has {', '.join(sorted(by_split))} files but no train file")
    return by_split


def locate(source: str | None, paths: dict[str, str | None]) -> dict[str, list[Path]]:
    """The files of each split: from `source` when given, else the explicit `paths` {split: path or None}."""
    if source is not None:
        return locate_source(source)
    found = {split: [Path(path)] for split, path in paths.items() if path is not None}
    for split, files in found.items():
        if not files[0].is_file():
            raise DataError(("data", f"{split}_path"), f"file not found: {files[0]}")
    return found
