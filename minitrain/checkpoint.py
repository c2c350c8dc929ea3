"""Lab 02: a full training checkpoint, the five state machines of theory 00 in one file, saved and restored.

    model parameters        -> tensors, Hugging Face GPT-2 names, unprefixed
    optimizer state         -> tensors `optimizer.<buffer>.<param>` (AdamW's exp_avg, exp_avg_sq) + JSON (step, lr)
    LR schedule position    -> JSON
    training RNG (dropout)  -> JSON (np.random.Generator bit-generator state; PCG64's 128-bit ints stay exact)
    data RNG + position     -> JSON (the batcher's state_dict)

A resume that misses any one of them silently changes the run. The file format (safetensors + JSON metadata, a
checksum, the same bytes for the same state) is `minitrain/runs/model_files.py`; the `checkpoints/` folder of a run
(`step-<N>` files, the `latest` pointer, pruning) is `minitrain/runs/checkpoint_manager.py`. Both call
`save_checkpoint` and `load_checkpoint` from here by name, so a student's own checkpoint.py (the course seam,
`minitrain/seam.py`) is what every run saves and resumes with.

Loading never mutates anything until the whole file has been read and checked, and a failure while restoring
rolls every object back, so a bad file leaves the run as it was. Every problem is one `UserError` naming the file.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.io import atomic_write_bytes
from minitrain.common.versions import library_versions
from minitrain.runs.model_files import FORMAT_VERSION, OPTIMIZER_PREFIX, check_model, encode, read_file, sha256_hex


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

    Tensors: `model.state_dict()` under its own names, plus every array of `optimizer.state_dict()["buffers"]`
    as `optimizer.<name>` (OPTIMIZER_PREFIX). Metadata (JSON values): "format_version" FORMAT_VERSION, "kind"
    "checkpoint", "model_config" dict(model.config), "step", "config_hash", "optimizer" (the optimizer's
    state_dict without its buffers: type, step, lr), "scheduler", "batcher" (their state_dicts), "train_rng"
    (`train_rng.bit_generator.state`), "versions" and "extra". `model_files.encode(tensors, metadata)` gives the
    file's bytes in pieces; write them with `io.atomic_write_bytes` (temp file, fsync, rename), never to `path`.

    `step` is the number of optimizer updates already done (a resumed run continues with step `step`).
    `extra` is any JSON the training loop wants back on resume (best val so far, ...).
    Saving the same state twice must give the same bytes.
    """
    # The live arrays, not copies (1.6 GB for a full fine-tune of 135M): written before anything changes them.
    tensors = dict(model.state_dict(copy=False))
    optimizer_json = dict(optimizer.state_dict(copy=False))
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
    data = encode(tensors, meta)
    atomic_write_bytes(path, data)
    return sha256_hex(data)


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
            raise UserError(f"{path}: optimizer buffer {name!r} has shape {saved[name].shape} {saved[name].dtype}, "
                            f"this run expects {a.shape} {a.dtype}")
    return saved


def _snapshot(model: Any, optimizer: Any, scheduler: Any, batcher: Any, train_rng: np.random.Generator) -> tuple:
    # Deep copies: a state_dict may hand out the live arrays that loading is about to overwrite.
    return copy.deepcopy((model.state_dict(), optimizer.state_dict(), scheduler.state_dict(), batcher.state_dict(),
                          train_rng.bit_generator.state))


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

    `model_files.read_file(path)` reads and verifies the file (format, checksum). Refused with a `UserError`
    naming the file, before anything changes: a model-only file ("kind" is not "checkpoint"), a model of another
    shape (`model_files.check_model`), and, when `config_hash` is given, a checkpoint written under another
    config. Then every object gets its state back through its own `load_state_dict` (the model copies into its
    existing arrays, which the optimizer updates in place), `train_rng.bit_generator.state` included.
    Either everything is restored or nothing is: if one object refuses its state, the ones already restored
    are put back as they were before the call.
    """
    path = Path(path)
    tensors, meta = read_file(path)
    if meta.get("kind") != "checkpoint":
        raise UserError(f"{path}: a model-only file (no optimizer, schedule or RNG state) cannot resume a run")
    model_state = {name: a for name, a in tensors.items() if not name.startswith(OPTIMIZER_PREFIX)}
    check_model(path, model, meta["model_config"], model_state)  # before the hash: it says more precisely why
    if config_hash is not None and meta["config_hash"] != config_hash:
        raise UserError(f"{path}: was written under config hash {meta['config_hash'][:12]}, this run's config hashes "
                        f"to {config_hash[:12]}; resume with the config the run started with")
    optimizer_state = {**meta["optimizer"], "buffers": _optimizer_buffers(path, optimizer, tensors)}
    rng_kind = meta["train_rng"].get("bit_generator")
    if rng_kind != type(train_rng.bit_generator).__name__:
        raise UserError(f"{path}: training RNG is {rng_kind}, this run uses {type(train_rng.bit_generator).__name__}")

    objects = (model, optimizer, scheduler, batcher, train_rng)
    before = _snapshot(*objects)
    try:
        _restore(objects, (model_state, optimizer_state, meta["scheduler"], meta["batcher"], meta["train_rng"]))
    except (UserError, ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError) as e:
        # A crafted file can hold any value the checksum was recomputed over; whatever it breaks, nothing changes.
        _restore(objects, before)
        raise UserError(f"{path}: cannot restore the training state ({e})", BAD_INPUT) from None
    except BaseException:
        _restore(objects, before)
        raise
    return {"step": meta["step"], "extra": meta["extra"], "config_hash": meta["config_hash"], "path": path}
