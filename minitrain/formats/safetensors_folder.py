"""The weights of a Hugging Face model folder, as float32 NumPy arrays, read straight from the safetensors bytes.

A Hub model's weights are `model.safetensors`, or for a big model several shards listed by
`model.safetensors.index.json` (`{"weight_map": {tensor name: shard file}}`). Most are stored in BF16 or F16;
minitrain computes in float32, so every floating tensor is widened on load. NumPy has no bfloat16, and
`safetensors.numpy` refuses BF16, so the file is read by hand; the format is small:

    8 bytes           N, the header length (little-endian u64)
    N bytes           JSON: {name: {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__"}
    the rest          the tensors' bytes, little-endian, row-major, at data_offsets from here

BF16 is the top half of a float32 (same sign and 8-bit exponent, 7 of the 23 mantissa bits), so widening it is
exact: put its 16 bits in the high half of a u32 and view that as float32. F16 widens exactly through NumPy.
The file is memory-mapped, so a shard costs only the float32 copies it produces.
"""

from __future__ import annotations

import itertools
import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_bytes, read_json_object

WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64}
MAX_HEADER = 100 << 20  # the safetensors library's own limit


def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    """uint16 BF16 bit patterns -> float32 values (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def split_header(data: Any) -> tuple[dict[str, Any], int]:
    """The JSON header of a safetensors file's bytes (or a memory map of them) and the offset where the tensor bytes
    start; ValueError saying what is wrong."""
    if len(data) < 8:
        raise ValueError("shorter than its header")
    (size,) = struct.unpack_from("<Q", data)
    if size > min(MAX_HEADER, len(data) - 8):
        raise ValueError(f"header length {size}")
    try:
        header = json.loads(bytes(data[8:8 + size]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"its header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError("its header is not a JSON object")
    return header, 8 + size


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of one safetensors file as float32 (F32, F16, BF16, F64), in the file's order."""
    path = Path(path)
    try:
        data = np.memmap(path, dtype=np.uint8, mode="r")
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: cannot read the weights file ({e})", 2) from None
    try:
        header, start = split_header(data)
    except ValueError as e:
        raise UserError(f"{path}: not a safetensors file ({e})", 2) from None
    body = data[start:]
    entries = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            kind, shape, (begin, end) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{path}: tensor {name}: malformed header entry {info!r:.200}", 2) from None
        if not all(type(n) is int and n >= 0 for n in (*shape, begin, end)):
            raise UserError(f"{path}: tensor {name}: shape {list(shape)!r:.100} and data_offsets {[begin, end]!r:.100} "
                            "must be integers >= 0", 2)
        if not isinstance(kind, str) or kind not in _DTYPES:
            raise UserError(f"{path}: tensor {name} is {kind}; minitrain reads F32, F16, BF16 and F64 weights", 2)
        dtype = np.dtype(_DTYPES[kind]).newbyteorder("<")
        if not 0 <= begin <= end <= len(body) or end - begin != math.prod(shape) * dtype.itemsize:
            raise UserError(f"{path}: tensor {name}: data_offsets {[begin, end]} do not hold {kind} {list(shape)}", 2)
        entries.append((begin, end, name, kind, dtype, shape))
    spans = sorted(entries, key=lambda e: e[:2])
    for (_, end, name, *_), (begin, _, other, *_) in itertools.pairwise(spans):
        if begin < end:  # the safetensors library refuses this too
            raise UserError(f"{path}: tensors {name} and {other}: their data_offsets overlap", 2)
    out = {}
    for begin, _, name, kind, dtype, shape in entries:  # read, not mapped: a map's pages count in RSS
        raw = np.fromfile(path, dtype, math.prod(shape), offset=start + begin).reshape(shape)
        out[name] = bf16_to_float32(raw) if kind == "BF16" else raw.astype(np.float32, copy=False)
    return out


def write_weights(folder: str | Path, state: dict[str, np.ndarray]) -> None:
    """FOLDER/model.safetensors as transformers reads it: float32 tensors, metadata {"format": "pt"}."""
    import safetensors.numpy  # here: a reader of folders does not need the library

    tensors = {name: np.ascontiguousarray(a, dtype=np.float32) for name, a in state.items()}
    atomic_write_bytes(Path(folder) / WEIGHTS_FILE, safetensors.numpy.save(tensors, metadata={"format": "pt"}))


def read_folder_weights(folder: str | Path) -> tuple[dict[str, np.ndarray], list[Path]]:
    """The state dict of a model folder (one file or shards) and the files it came from."""
    folder = Path(folder)
    if (folder / WEIGHTS_FILE).is_file():
        return read_safetensors(folder / WEIGHTS_FILE), [folder / WEIGHTS_FILE]
    index_path = folder / INDEX_FILE
    if not index_path.is_file():
        raise UserError(f"{folder}: no {WEIGHTS_FILE} or {INDEX_FILE} (minitrain reads safetensors weights; a "
                        "pytorch_model.bin is a pickle, which it never opens)", 2)
    weight_map = read_json_object(index_path, "weights index").get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise UserError(f"{index_path}: weight_map must map tensor names to shard files", 2)
    names = list(dict.fromkeys(weight_map.values()))
    for name in names:  # a shard is a file name in the folder, never a path out of it
        if "/" in name or "\\" in name or name in ("", ".", "..") or not (folder / name).is_file():
            raise UserError(f"{index_path}: shard {name!r} is not a file in {folder}", 2)
    shards = [folder / name for name in names]
    state: dict[str, np.ndarray] = {}
    for shard in shards:
        state.update(read_safetensors(shard))
    missing = sorted(set(weight_map) - set(state))
    if missing:
        raise UserError(f"{index_path}: {len(missing)} tensors the index lists are in no shard ({missing[0]}, ...)", 2)
    return state, shards
