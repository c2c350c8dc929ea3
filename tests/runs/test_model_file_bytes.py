"""model_files.encode: the bytes the safetensors library and a sorted header give, in pieces that are the tensors'
own memory (a checkpoint is never copied whole: issue 46's memory round)."""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np
import safetensors.numpy

from minitrain.common.io import atomic_write_bytes
from minitrain.runs import model_files

RNG = np.random.default_rng(0)
TENSORS = {  # every dtype a minitrain file holds, and the shapes that are easy to get wrong
    "w": RNG.standard_normal((3, 4)).astype(np.float32), "scalar": np.ones((), np.float64),
    "empty": np.zeros((0, 3), np.float32), "codes": RNG.integers(0, 255, 7).astype(np.uint8),
    "ids": np.arange(3), "ñame": np.ones(2, np.float32), "transposed": RNG.standard_normal((4, 3)).T,
}
META = {"kind": "model", "model_config": {"a": 'ñ"x'}, "extra": {"z": 1, "a": [1.5]}}


def library_bytes(tensors, metadata) -> bytes:
    """The oracle: safetensors' own bytes, the header re-written with its metadata keys sorted (JSON, 8-aligned)."""
    arrays = {n: np.ascontiguousarray(a) for n, a in tensors.items()}
    text = {"format": model_files.FORMAT, **{k: model_files.canonical_json(v) for k, v in metadata.items()}}
    text["sha256"] = model_files._content_digest(arrays, text)
    data = safetensors.numpy.save(arrays, metadata=text)
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    meta = header.pop("__metadata__")
    entries = sorted(header.items(), key=lambda item: item[1]["data_offsets"])
    head = json.dumps({"__metadata__": dict(sorted(meta.items())), **dict(entries)}, separators=(",", ":"),
                      ensure_ascii=False).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + data[8 + size:]


def test_encode_gives_the_librarys_bytes_and_their_sha256(tmp_path):
    pieces = model_files.encode(TENSORS, META)
    atomic_write_bytes(tmp_path / "f.safetensors", pieces)
    want = library_bytes(TENSORS, META)
    assert (tmp_path / "f.safetensors").read_bytes() == want
    assert model_files.sha256_hex(pieces) == hashlib.sha256(want).hexdigest()


def test_encode_copies_no_contiguous_tensor():
    """Each tensor's piece is its own memory: writing a 1.6 GB checkpoint holds no second 1.6 GB."""
    pieces = model_files.encode(TENSORS, META)
    assert isinstance(pieces[0], bytes) and len(pieces) == 1 + len(TENSORS)
    for name, a in TENSORS.items():
        if a.flags.c_contiguous and a.size:
            assert sum(np.shares_memory(piece, a) for piece in pieces[1:]) == 1, name


def test_a_checkpoint_copies_neither_weights_nor_optimizer_state(tmp_path):
    """save_checkpoint writes the parameters' and AdamW's own arrays (state_dict(copy=False)): the memory it
    allocates (tracemalloc counts NumPy's buffers) stays far below the 12 MB it writes, where a copy of the state
    would take 12 MB more; the file still loads back into a fresh model."""
    import tracemalloc

    from minitrain.checkpoint import load_checkpoint, save_checkpoint
    from minitrain.nn import Linear
    from minitrain.optim.adamw import AdamW

    def state(seed):
        model = Linear(1000, 1000, rng=np.random.default_rng(seed))
        model.config = {"n_layer": 1, "n_head": 2, "d_model": 8, "d_ff": 16, "vocab_size": 11, "max_seq_len": 6}
        optimizer = AdamW(list(model.named_parameters()), lr=0.1)
        for _, p in model.named_parameters():
            p.grad = np.ones_like(p.data)
        optimizer.step()
        return {"model": model, "optimizer": optimizer, "scheduler": _Json(), "batcher": _Json(),
                "train_rng": np.random.default_rng(seed)}

    saved = state(0)
    tracemalloc.start()
    save_checkpoint(tmp_path / "c.safetensors", step=1, config_hash="h", **saved)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    size = (tmp_path / "c.safetensors").stat().st_size
    assert size > 12_000_000 and peak < size / 10
    fresh = state(1)
    load_checkpoint(tmp_path / "c.safetensors", **fresh)
    assert np.array_equal(fresh["model"].weight.data, saved["model"].weight.data)


class _Json:
    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass
