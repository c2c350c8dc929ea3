"""minitrain's file format: safetensors with JSON metadata, for model files and (checkpoint.py) full checkpoints.

A safetensors file is `8-byte header length | JSON header | raw tensor bytes`; the header carries a str -> str
`__metadata__` map, where every value except the `format` marker is JSON text. A model file holds the model's
tensors under their Hugging Face GPT-2 names and `model_config` in the metadata; a checkpoint is the same thing
with more tensors (`optimizer.<buffer>.<param>`) and more metadata, so it is also a loadable model file.

    data = encode(tensors, {"kind": "model", "model_config": {...}})   # the bytes in pieces, then an atomic write
    tensors, metadata = read_file(path)                                     # checked, JSON values decoded

Two guarantees beyond the format:
- Same state -> same bytes. The safetensors library writes its metadata map in a random order (a Rust HashMap),
  so the header is re-written with sorted keys; the tensor bytes are left exactly as the library laid them out.
- Corruption that still parses is caught: `sha256` in the metadata covers every other metadata entry and every
  tensor's name, dtype, shape and bytes.

Every problem reading a file is one `UserError` naming the file. Weights are float32 (float64 for a model.dtype
float64 run) and finite, a quantized file's codes and zero points uint8: a tensor of another dtype (int8, bool,
float16, which loading would cast silently) or holding NaN or inf is refused, naming it, before anything
samples, quantizes or predicts with it.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.numpy
from safetensors import SafetensorError

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.io import atomic_write_bytes, parse_json, read_bytes
from minitrain.formats.safetensors_folder import split_header
from minitrain.quant.qfile import KIND as QUANTIZED_KIND
from minitrain.quant.qfile import dequantized_state
from minitrain.runs.run_files import check_model_file_meta

FORMAT = "minitrain"
FORMAT_VERSION = 1
OPTIMIZER_PREFIX = "optimizer."
WEIGHT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))  # float64: a model.dtype float64 run's weights
CODE_SUFFIXES = (".codes", ".zero_point")  # a quantized file's integers (minitrain/quant/qfile.py): uint8


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
        h.update(a)  # its bytes, read in place
    return h.hexdigest()


# ----------------------------------------------------------------------------------------- bytes <-> safetensors


def encode(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, Any]) -> list:
    """The bytes of a minitrain safetensors file in pieces, the header then each tensor's own memory (never a copy
    of the file): `tensors`, the format marker, every `metadata` value as canonical JSON, and the sha256 over all of
    it. Same arguments, same bytes: the tensors in the safetensors library's order (by dtype, then name: its file of
    one-element stand-ins says), the header's `__metadata__` keys sorted (the library's order is random)."""
    arrays = {name: np.ascontiguousarray(a) for name, a in tensors.items()}
    text = {"format": FORMAT, **{key: canonical_json(value) for key, value in metadata.items()}}
    text["sha256"] = _content_digest(arrays, text)
    layout, _ = split_header(safetensors.numpy.save({name: np.zeros(1, a.dtype) for name, a in arrays.items()}))
    order = sorted(arrays, key=lambda name: layout[name]["data_offsets"])
    header, offset = {"__metadata__": dict(sorted(text.items()))}, 0
    for name in order:
        end = offset + arrays[name].nbytes
        header[name] = {"dtype": layout[name]["dtype"], "shape": list(arrays[name].shape),
                        "data_offsets": [offset, end]}
        offset = end
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    head += b" " * (-len(head) % 8)  # safetensors pads the header so the tensor bytes stay 8-byte aligned
    return [struct.pack("<Q", len(head)) + head, *(arrays[name] for name in order)]


def sha256_hex(pieces: list) -> str:
    """sha256 (hex) of the file `encode` gave in `pieces`."""
    digest = hashlib.sha256()
    for piece in pieces:
        digest.update(piece)
    return digest.hexdigest()


def read_file(path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read and verify a minitrain safetensors file: (tensors, metadata with JSON values decoded and checked
    against its schema, minitrain/runs/run_files.py)."""
    data = read_bytes(path, "model file")
    try:
        header, _ = split_header(data)
        tensors = {name: a.copy() for name, a in safetensors.numpy.load(data).items()}
    except (SafetensorError, ValueError, KeyError, TypeError, RecursionError) as e:
        raise UserError(f"{path}: not a readable safetensors file, it may be truncated or corrupted ({e})",
                        BAD_INPUT) from None
    text = header.get("__metadata__") or {}
    if not isinstance(text, dict) or text.get("format") != FORMAT:
        raise UserError(f"{path}: not a minitrain file (its safetensors metadata lacks format={FORMAT!r})", BAD_INPUT)
    stored = text.pop("sha256", None)
    if stored != _content_digest(tensors, text):
        raise UserError(f"{path}: checksum mismatch, the file is corrupted (its content changed after it was saved)",
                        BAD_INPUT)
    metadata = {key: value if key == "format" else parse_json(value, f"{path}: metadata {key!r}", "value")
                for key, value in text.items()}
    version = metadata.get("format_version", 0)
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise UserError(f"{path}: written in checkpoint format {metadata['format_version']}, this minitrain reads "
                        f"up to {FORMAT_VERSION}; upgrade minitrain", BAD_INPUT)
    if "model_config" not in metadata:
        raise UserError(f"{path}: no model_config in its metadata", BAD_INPUT)
    check_tensors(tensors, str(path), quantized=metadata.get("kind") == QUANTIZED_KIND)
    return tensors, check_model_file_meta(metadata, f"{path}: metadata")


def check_tensors(tensors: Mapping[str, np.ndarray], where: str, quantized: bool = False) -> None:
    """Refuse, naming `where` and the tensor, one whose dtype minitrain does not write (float32 or float64; uint8
    for the codes and zero points of a `quantized` file) or whose values are not all finite."""
    for name, a in tensors.items():
        code = quantized and name.endswith(CODE_SUFFIXES)
        expected = (np.dtype(np.uint8),) if code else WEIGHT_DTYPES
        if a.dtype not in expected:
            raise UserError(f"{where}: tensor {name!r} is stored as {a.dtype}; minitrain files hold "
                            f"{' or '.join(map(str, expected))} there", BAD_INPUT)
        if not code and not np.isfinite(a).all():
            raise UserError(f"{where}: tensor {name!r} holds NaN or infinite values; a model cannot be used "
                            "(or trained further) from it", BAD_INPUT)


# ------------------------------------------------------------------------------------------------- model files


def save_model_file(path: str | Path, state_dict: Mapping[str, np.ndarray], model_config: Mapping[str, Any],
                    metadata: Mapping[str, Any] | None = None, kind: str = "model") -> str:
    """Write a model-only file (GPT-2 tensor names, config in the metadata); return the file's sha256 (hex).

    `metadata` values may be any JSON value; they come back unchanged from `load_model_file`. `kind` "quantized"
    marks a file of integer weights (minitrain/quant/qfile.py).
    """
    extra = dict(metadata or {})
    reserved = {"format", "format_version", "kind", "model_config", "sha256"} & extra.keys()
    if reserved:
        raise ValueError(f"metadata keys {sorted(reserved)} are reserved")
    meta = {**extra, "format_version": FORMAT_VERSION, "kind": kind, "model_config": dict(model_config)}
    data = encode(state_dict, meta)
    atomic_write_bytes(path, data)
    return sha256_hex(data)


def load_model_file(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, Any]]:
    """Read a model file or a full checkpoint: (model state_dict, model_config, metadata). A quantized model
    file's state dict holds its dequantized float32 weights."""
    tensors, metadata = read_file(Path(path))
    state = {name: a for name, a in tensors.items() if not name.startswith(OPTIMIZER_PREFIX)}
    if metadata.get("kind") == QUANTIZED_KIND:
        state = dequantized_state(state, metadata, str(path))
    return state, metadata["model_config"], metadata


def check_model(path: Path, model: Any, saved_config: Mapping[str, Any], state: Mapping[str, np.ndarray]) -> None:
    """Refuse a state whose model config or tensors do not fit `model`: one UserError naming `path` and why."""
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
