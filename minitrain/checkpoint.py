"""Checkpoints: model files and full training state in one safetensors file, written atomically.

Training state is five state machines, and a resume that misses any one of them silently changes the run:

    model parameters        -> tensors, Hugging Face GPT-2 names, unprefixed
    optimizer state         -> tensors `optimizer.<buffer>.<param>` (AdamW's exp_avg, exp_avg_sq) + JSON (step, lr)
    LR schedule position    -> JSON
    training RNG (dropout)  -> JSON (np.random.Generator bit-generator state; PCG64's 128-bit ints stay exact)
    data RNG + position     -> JSON (the batcher's state_dict)

A safetensors file is `8-byte header length | JSON header | raw tensor bytes`; the header carries a str -> str
`__metadata__` map, where every value except the `format` marker is JSON text. A model file is the same thing
with only the model tensors, so a full checkpoint is also a loadable model file.

Two guarantees beyond the format:
- Same state -> same bytes. The safetensors library writes its metadata map in a random order (a Rust HashMap),
  so the header is re-written with sorted keys; the tensor bytes are left exactly as the library laid them out.
- Corruption that still parses is caught: `sha256` in the metadata covers every other metadata entry and every
  tensor's name, dtype, shape and bytes.

Loading never mutates anything until the whole file has been read and checked, and a failure while restoring
rolls every object back, so a bad file leaves the run as it was. Every problem is one `UserError` naming the file.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.numpy
from safetensors import SafetensorError

from minitrain.errors import UserError
from minitrain.io import atomic_write_bytes, atomic_write_text
from minitrain.quant.qfile import KIND as QUANTIZED_KIND
from minitrain.quant.qfile import dequantized_state
from minitrain.versions import library_versions

FORMAT = "minitrain"
FORMAT_VERSION = 1
OPTIMIZER_PREFIX = "optimizer."
_STEP_FILE = re.compile(r"^step-(\d+)\.safetensors$")
BEST_FILE = "best.safetensors"
LATEST_POINTER = "latest"


# ----------------------------------------------------------------------------------------------- hashing helpers


def canonical_json(obj: Any) -> str:
    """Compact JSON with sorted keys: equal values always give equal text (and equal hashes)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def config_hash(config: Mapping[str, Any]) -> str:
    """sha256 (hex) of the canonical JSON of a config dict: two runs with the same hash trained the same way."""
    return hashlib.sha256(canonical_json(config).encode("utf-8")).hexdigest()


def _content_digest(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str]) -> str:
    h = hashlib.sha256(canonical_json(dict(metadata)).encode("utf-8"))
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        h.update(canonical_json([name, a.dtype.str, list(a.shape)]).encode("utf-8"))
        h.update(a.tobytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------------------- bytes <-> safetensors


def _split_header(data: bytes) -> tuple[dict[str, Any], int]:
    """Parse the JSON header; return it and the offset where the tensor bytes start."""
    if len(data) < 8:
        raise ValueError("file is shorter than the 8-byte safetensors header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError("header length points past the end of the file")
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    return header, 8 + n


def _sorted_header(data: bytes) -> bytes:
    """Rewrite the library's header with `__metadata__` keys sorted (its own order is random per process)."""
    header, start = _split_header(data)
    metadata = header.pop("__metadata__", {})
    tensors = sorted(header.items(), key=lambda item: item[1]["data_offsets"])
    text = json.dumps(
        {"__metadata__": dict(sorted(metadata.items())), **dict(tensors)},
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode("utf-8")
    text += b" " * (-len(text) % 8)  # safetensors pads the header so the tensor bytes stay 8-byte aligned
    return struct.pack("<Q", len(text)) + text + data[start:]


def _encode(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, Any]) -> bytes:
    arrays = {name: np.ascontiguousarray(a) for name, a in tensors.items()}
    text = {"format": FORMAT, **{key: canonical_json(value) for key, value in metadata.items()}}
    text["sha256"] = _content_digest(arrays, text)
    return _sorted_header(safetensors.numpy.save(arrays, metadata=text))


def _decode(path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read and verify a minitrain safetensors file: (tensors, metadata with JSON values decoded)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read the file ({e.strerror or e})") from None
    try:
        header, _ = _split_header(data)
        tensors = {name: a.copy() for name, a in safetensors.numpy.load(data).items()}
    except (SafetensorError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{path}: not a readable safetensors file, it may be truncated or corrupted ({e})") from None
    text = header.get("__metadata__") or {}
    if not isinstance(text, dict) or text.get("format") != FORMAT:
        raise UserError(f"{path}: not a minitrain file (its safetensors metadata lacks format={FORMAT!r})")
    stored = text.pop("sha256", None)
    if stored != _content_digest(tensors, text):
        raise UserError(f"{path}: checksum mismatch, the file is corrupted (its content changed after it was saved)")
    try:
        metadata = {key: value if key == "format" else json.loads(value) for key, value in text.items()}
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: a metadata value is not valid JSON ({e})") from None
    if metadata.get("format_version", 0) > FORMAT_VERSION:
        raise UserError(
            f"{path}: written in checkpoint format {metadata['format_version']}, this minitrain reads up to "
            f"{FORMAT_VERSION}; upgrade minitrain"
        )
    if "model_config" not in metadata:
        raise UserError(f"{path}: no model_config in its metadata")
    return tensors, metadata


# ------------------------------------------------------------------------------------------------- model files


def save_model_file(
    path: str | Path,
    state_dict: Mapping[str, np.ndarray],
    model_config: Mapping[str, Any],
    metadata: Mapping[str, Any] | None = None,
    kind: str = "model",
) -> str:
    """Write a model-only file (GPT-2 tensor names, config in the metadata); return the file's sha256 (hex).

    `metadata` values may be any JSON value; they come back unchanged from `load_model_file`. `kind` "quantized"
    marks a file of integer weights (minitrain/quant/qfile.py).
    """
    extra = dict(metadata or {})
    reserved = {"format", "format_version", "kind", "model_config", "sha256"} & extra.keys()
    if reserved:
        raise ValueError(f"metadata keys {sorted(reserved)} are reserved")
    meta = {**extra, "format_version": FORMAT_VERSION, "kind": kind, "model_config": dict(model_config)}
    data = _encode(state_dict, meta)
    atomic_write_bytes(path, data)
    return hashlib.sha256(data).hexdigest()


def load_model_file(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, Any]]:
    """Read a model file or a full checkpoint: (model state_dict, model_config, metadata). A quantized model
    file's state dict holds its dequantized float32 weights."""
    tensors, metadata = _decode(Path(path))
    state = {name: a for name, a in tensors.items() if not name.startswith(OPTIMIZER_PREFIX)}
    if metadata.get("kind") == QUANTIZED_KIND:
        state = dequantized_state(state, metadata, str(path))
    return state, metadata["model_config"], metadata


# ---------------------------------------------------------------------------------------- full checkpoints


def save_checkpoint(
    path: str | Path,
    *,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    batcher: Any,
    train_rng: np.random.Generator,
    step: int,
    config_hash: str,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Write all five state machines to one safetensors file, atomically; return the file's sha256 (hex).

    `step` is the number of optimizer steps already taken (a resumed run continues with step `step`).
    `extra` is any JSON the training loop wants back on resume (best val so far, ...).
    """
    tensors = dict(model.state_dict())
    optimizer_json = dict(optimizer.state_dict())
    for name, buffer in optimizer_json.pop("buffers").items():
        tensors[OPTIMIZER_PREFIX + name] = buffer
    meta = {
        "format_version": FORMAT_VERSION,
        "kind": "checkpoint",
        "model_config": dict(model.config),
        "step": int(step),
        "config_hash": config_hash,
        "optimizer": optimizer_json,  # the scalars (type, step, lr); the buffers are tensors
        "scheduler": scheduler.state_dict(),
        "batcher": batcher.state_dict(),
        "train_rng": train_rng.bit_generator.state,
        "versions": library_versions(("numpy", "safetensors")),
        "extra": dict(extra or {}),
    }
    data = _encode(tensors, meta)
    atomic_write_bytes(path, data)
    return hashlib.sha256(data).hexdigest()


def _check_model(path: Path, model: Any, saved_config: Mapping[str, Any], state: Mapping[str, np.ndarray]) -> None:
    current = dict(model.config)
    differ = [
        f"{k}={saved_config.get(k)!r} (this model: {current.get(k)!r})"
        for k in sorted(current.keys() | saved_config.keys())
        if saved_config.get(k) != current.get(k)
    ]
    if differ:
        raise UserError(f"{path}: holds a model of another shape: " + ", ".join(differ))
    expected = model.state_dict()
    missing = sorted(expected.keys() - state.keys())
    unexpected = sorted(state.keys() - expected.keys())
    if missing or unexpected:
        raise UserError(f"{path}: model tensors missing {missing} / unexpected {unexpected}")
    for name, a in expected.items():
        if state[name].shape != a.shape:
            raise UserError(f"{path}: tensor {name!r} has shape {state[name].shape}, the model expects {a.shape}")


def _optimizer_buffers(path: Path, optimizer: Any, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The `optimizer.<buffer>.<param>` tensors, checked against the buffers this run's optimizer holds."""
    saved = {name[len(OPTIMIZER_PREFIX) :]: a for name, a in tensors.items() if name.startswith(OPTIMIZER_PREFIX)}
    expected = optimizer.state_dict()["buffers"]
    missing = sorted(expected.keys() - saved.keys())
    unexpected = sorted(saved.keys() - expected.keys())
    if missing or unexpected:
        raise UserError(f"{path}: optimizer buffers missing {missing} / unexpected {unexpected}")
    for name, a in expected.items():
        if saved[name].shape != a.shape or saved[name].dtype != a.dtype:
            raise UserError(
                f"{path}: optimizer buffer {name!r} has shape {saved[name].shape} {saved[name].dtype}, "
                f"this run expects {a.shape} {a.dtype}"
            )
    return saved


def _snapshot(model: Any, optimizer: Any, scheduler: Any, batcher: Any, train_rng: np.random.Generator) -> tuple:
    # Deep copies: a state_dict may hand out the live arrays that loading is about to overwrite.
    return copy.deepcopy(
        (
            model.state_dict(),
            optimizer.state_dict(),
            scheduler.state_dict(),
            batcher.state_dict(),
            train_rng.bit_generator.state,
        )
    )


def _restore(objects: tuple, states: tuple) -> None:
    model, optimizer, scheduler, batcher, train_rng = objects
    model_sd, optimizer_sd, scheduler_sd, batcher_sd, rng_state = states
    model.load_state_dict(model_sd)
    optimizer.load_state_dict(optimizer_sd)
    scheduler.load_state_dict(scheduler_sd)
    batcher.load_state_dict(batcher_sd)
    train_rng.bit_generator.state = rng_state


def load_checkpoint(
    path: str | Path,
    *,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    batcher: Any,
    train_rng: np.random.Generator,
    config_hash: str | None = None,
) -> dict[str, Any]:
    """Restore all five state machines in place from `path`; return {"step", "extra", "config_hash", "path"}.

    With `config_hash` given, a checkpoint written under another config is refused. Either everything is
    restored or nothing is: the file is fully checked first, and a failure while restoring rolls back.
    """
    path = Path(path)
    tensors, meta = _decode(path)
    if meta.get("kind") != "checkpoint":
        raise UserError(f"{path}: a model-only file (no optimizer, schedule or RNG state) cannot resume a run")
    model_state = {name: a for name, a in tensors.items() if not name.startswith(OPTIMIZER_PREFIX)}
    _check_model(path, model, meta["model_config"], model_state)  # before the hash: it says more precisely why
    if config_hash is not None and meta["config_hash"] != config_hash:
        raise UserError(
            f"{path}: was written under config hash {meta['config_hash'][:12]}, this run's config hashes to "
            f"{config_hash[:12]}; resume with the config the run started with"
        )
    optimizer_state = {**meta["optimizer"], "buffers": _optimizer_buffers(path, optimizer, tensors)}
    rng_kind = meta["train_rng"].get("bit_generator")
    if rng_kind != type(train_rng.bit_generator).__name__:
        raise UserError(f"{path}: training RNG is {rng_kind}, this run uses {type(train_rng.bit_generator).__name__}")

    objects = (model, optimizer, scheduler, batcher, train_rng)
    before = _snapshot(*objects)
    try:
        _restore(objects, (model_state, optimizer_state, meta["scheduler"], meta["batcher"], meta["train_rng"]))
    except (UserError, ValueError, KeyError, TypeError) as e:
        _restore(objects, before)
        raise UserError(f"{path}: cannot restore the training state ({e})") from None
    except BaseException:
        _restore(objects, before)
        raise
    return {"step": meta["step"], "extra": meta["extra"], "config_hash": meta["config_hash"], "path": path}


# --------------------------------------------------------------------------------------- a run's checkpoints/


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

    def save(self, *, step: int, **state: Any) -> Path:
        """`save_checkpoint` into `step-<step>.safetensors`, point `latest` at it, then prune; return its path."""
        path = self.path_for(step)
        save_checkpoint(path, step=step, **state)
        atomic_write_text(self.dir / LATEST_POINTER, path.name + "\n")
        self.prune()
        return path

    def save_best(self, *, step: int, **state: Any) -> Path:
        """Write `best.safetensors` (never pruned); the pointer `latest` is left alone."""
        path = self.dir / BEST_FILE
        save_checkpoint(path, step=step, **state)
        return path

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
            try:
                name = pointer.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as e:
                raise UserError(f"{pointer}: cannot read the pointer ({e})") from None
            if not _STEP_FILE.match(name):
                raise UserError(f"{pointer}: expected a file name like step-120.safetensors, found {name!r}")
            if (self.dir / name).is_file():
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
            raise UserError(f"{path}: no such checkpoint file or run folder")
        if (path / "checkpoints").is_dir():
            found = CheckpointManager(path).latest()
        elif path.name == "checkpoints":
            found = CheckpointManager(path.parent).latest()
        else:
            found = None
        if found is None:
            raise UserError(f"{path}: no checkpoint found (looked for checkpoints/latest and step-<N>.safetensors)")
        return found
