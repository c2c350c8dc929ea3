"""Checkpoint files: round trips, byte-stable saves, every way a file can be bad, the checkpoints/ folder."""

from __future__ import annotations

import copy
import hashlib
import json
import struct
import subprocess
import sys
from copy import deepcopy
from pathlib import Path

import numpy as np
import pytest

from minitrain.checkpoint import load_checkpoint, save_checkpoint
from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_bytes
from minitrain.runs import model_files
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.model_files import config_hash, load_model_file, save_model_file

CONFIG = {"n_layer": 1, "n_head": 2, "d_model": 8, "d_ff": 16, "vocab_size": 11, "max_seq_len": 6, "dropout": 0.0}


def gpt2_state(cfg: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Random arrays with Hugging Face GPT-2 names and shapes for `cfg`."""
    rng = np.random.default_rng(seed)
    d, f = cfg["d_model"], cfg["d_ff"]
    shapes = {"transformer.wte.weight": (cfg["vocab_size"], d), "transformer.wpe.weight": (cfg["max_seq_len"], d)}
    for i in range(cfg["n_layer"]):
        h = f"transformer.h.{i}"
        shapes |= {
            f"{h}.ln_1.weight": (d,), f"{h}.ln_1.bias": (d,),
            f"{h}.attn.c_attn.weight": (d, 3 * d), f"{h}.attn.c_attn.bias": (3 * d,),
            f"{h}.attn.c_proj.weight": (d, d), f"{h}.attn.c_proj.bias": (d,),
            f"{h}.ln_2.weight": (d,), f"{h}.ln_2.bias": (d,),
            f"{h}.mlp.c_fc.weight": (d, f), f"{h}.mlp.c_fc.bias": (f,),
            f"{h}.mlp.c_proj.weight": (f, d), f"{h}.mlp.c_proj.bias": (d,),
        }  # fmt: skip
    shapes |= {"transformer.ln_f.weight": (d,), "transformer.ln_f.bias": (d,)}
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


# Small stand-ins with the state_dict interfaces of contracts.md, so these tests exercise checkpoint.py alone.
class Model:
    def __init__(self, cfg: dict = CONFIG, seed: int = 0) -> None:
        self.config = dict(cfg)
        self.params = gpt2_state(cfg, seed)

    def state_dict(self, copy: bool = True) -> dict[str, np.ndarray]:
        return self.params  # live arrays, as a model with flat parameter buffers hands out views

    def load_state_dict(self, sd: dict[str, np.ndarray]) -> None:
        for name, a in sd.items():
            self.params[name][...] = a


class Optimizer:
    def __init__(self, model: Model, step: int = 0) -> None:
        self.step, self.lr = step, 1e-3
        self.buffers = {f"{key}.{n}": np.full_like(a, value + step) for n, a in model.params.items()
                        for key, value in (("exp_avg", 0.5), ("exp_avg_sq", 0.25))}  # fmt: skip

    def state_dict(self, copy: bool = True) -> dict:
        return {"type": "adamw", "step": self.step, "lr": self.lr, "buffers": deepcopy(self.buffers)}

    def load_state_dict(self, sd: dict) -> None:
        if set(sd) != {"type", "step", "lr", "buffers"}:
            raise KeyError(f"optimizer state keys {sorted(sd)}")
        self.step, self.lr, self.buffers = sd["step"], sd["lr"], copy.deepcopy(sd["buffers"])


class JsonState:
    """A scheduler or batcher: its whole state is JSON."""

    def __init__(self, **state) -> None:
        self.state = state

    def state_dict(self) -> dict:
        return copy.deepcopy(self.state)

    def load_state_dict(self, sd: dict) -> None:
        self.state = copy.deepcopy(sd)


def training_state(step: int = 3, seed: int = 0) -> dict:
    model = Model(seed=seed)
    data_rng = np.random.default_rng(7 + seed)
    data_rng.random(step)
    train_rng = np.random.default_rng(42 + seed)
    train_rng.random(step)
    return {
        "model": model,
        "optimizer": Optimizer(model, step),
        "scheduler": JsonState(step=step),
        "batcher": JsonState(epoch=1, position=step, rng=data_rng.bit_generator.state),
        "train_rng": train_rng,
    }


def as_plain(state: dict) -> str:
    """Everything a state holds, as comparable text (arrays by their bytes)."""

    def conv(x):
        if isinstance(x, np.ndarray):
            return [x.dtype.str, list(x.shape), x.tobytes().hex()]
        if isinstance(x, dict):
            return {k: conv(v) for k, v in x.items()}
        return x

    return json.dumps(
        {
            "model": conv(state["model"].state_dict()),
            "config": state["model"].config,
            "optimizer": conv(state["optimizer"].state_dict()),
            "scheduler": state["scheduler"].state_dict(),
            "batcher": state["batcher"].state_dict(),
            "rng": state["train_rng"].bit_generator.state,
        },
        sort_keys=True,
    )


HASH = config_hash({"model": CONFIG, "lr": 1e-3})


# ------------------------------------------------------------------------------------------------- model files


@pytest.mark.lab02
def test_model_file_round_trip(tmp_path):
    sd = gpt2_state(CONFIG)
    path = tmp_path / "m.safetensors"
    digest = save_model_file(path, sd, CONFIG, metadata={"val_ppl": 1.25, "note": "x", "nested": {"a": [1, 2]}})
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    loaded, cfg, meta = load_model_file(path)
    assert cfg == CONFIG
    assert sorted(loaded) == sorted(sd)
    for name in sd:
        assert loaded[name].dtype == np.float32
        np.testing.assert_array_equal(loaded[name], sd[name])
    assert meta["val_ppl"] == 1.25 and meta["note"] == "x" and meta["nested"] == {"a": [1, 2]}
    assert meta["format"] == "minitrain" and meta["kind"] == "model"


def test_model_file_is_plain_safetensors_with_gpt2_names(tmp_path):
    from safetensors import safe_open

    path = tmp_path / "m.safetensors"
    save_model_file(path, gpt2_state(CONFIG), CONFIG)
    with safe_open(path, framework="numpy") as f:
        assert "transformer.h.0.attn.c_attn.weight" in f.keys()  # noqa: SIM118 (safe_open is not a Mapping)
        assert f.get_tensor("transformer.h.0.attn.c_attn.weight").shape == (8, 24)
        meta = f.metadata()
    assert meta["format"] == "minitrain"
    assert json.loads(meta["model_config"]) == CONFIG


@pytest.mark.lab02
def test_save_load_save_gives_identical_bytes(tmp_path):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    save_model_file(a, gpt2_state(CONFIG), CONFIG, metadata={"k1": 1, "k2": "two", "k3": [3]})
    sd, cfg, meta = load_model_file(a)
    extra = {k: v for k, v in meta.items() if k in ("k1", "k2", "k3")}
    save_model_file(b, sd, cfg, metadata=extra)
    assert a.read_bytes() == b.read_bytes()

    c, d = tmp_path / "c.safetensors", tmp_path / "d.safetensors"
    save_checkpoint(c, step=3, config_hash=HASH, extra={"best": 2.5}, **training_state())
    fresh = training_state(step=0, seed=1)
    info = load_checkpoint(c, config_hash=HASH, **fresh)
    save_checkpoint(d, step=info["step"], config_hash=HASH, extra=info["extra"], **fresh)
    assert c.read_bytes() == d.read_bytes()


SAVE_IN_SUBPROCESS = """
import sys
import time
sys.path.insert(0, {tests!r})
from test_checkpoint import HASH, save_checkpoint, training_state
save_checkpoint({path!r}, step=3, config_hash=HASH, **training_state())
"""


def test_same_state_gives_same_bytes_across_processes(tmp_path):
    # The safetensors library orders its metadata map randomly per process; checkpoint.py must sort it.
    paths = [tmp_path / f"{i}.safetensors" for i in range(2)]
    for p in paths:
        code = SAVE_IN_SUBPROCESS.format(tests=str(Path(__file__).parent), path=str(p))
        subprocess.run([sys.executable, "-c", code], check=True)
    assert paths[0].read_bytes() == paths[1].read_bytes()


# ----------------------------------------------------------------------------------------- full checkpoints


@pytest.mark.lab02
def test_checkpoint_restores_all_five_states(tmp_path):
    path = tmp_path / "c.safetensors"
    saved = training_state(step=5)
    save_checkpoint(path, step=5, config_hash=HASH, extra={"best_val_ppl": 3.0}, **saved)
    fresh = training_state(step=0, seed=1)
    assert as_plain(fresh) != as_plain(saved)
    info = load_checkpoint(path, config_hash=HASH, **fresh)
    assert info["step"] == 5 and info["extra"] == {"best_val_ppl": 3.0} and info["config_hash"] == HASH
    assert as_plain(fresh) == as_plain(saved)
    # The RNG continues the same stream: PCG64's 128-bit state survived JSON exactly.
    assert fresh["train_rng"].random() == saved["train_rng"].random()


def test_checkpoint_is_also_a_model_file(tmp_path):
    path = tmp_path / "c.safetensors"
    state = training_state()
    save_checkpoint(path, step=3, config_hash=HASH, **state)
    sd, cfg, meta = load_model_file(path)
    assert cfg == CONFIG and meta["kind"] == "checkpoint" and meta["step"] == 3
    assert sorted(sd) == sorted(state["model"].state_dict())
    save_model_file(tmp_path / "m.safetensors", sd, cfg)
    with pytest.raises(UserError, match=r"m\.safetensors: a model-only file"):
        load_checkpoint(tmp_path / "m.safetensors", config_hash=HASH, **training_state())


def test_optimizer_buffers_are_prefixed_tensors(tmp_path):
    from safetensors import safe_open

    path = tmp_path / "c.safetensors"
    save_checkpoint(path, step=3, config_hash=HASH, **training_state())
    with safe_open(path, framework="numpy") as f:
        names = set(f.keys())
        meta = f.metadata()
    assert "optimizer.exp_avg.transformer.wte.weight" in names
    assert "optimizer.exp_avg_sq.transformer.h.0.ln_1.bias" in names
    for key in ("step", "train_rng", "scheduler", "batcher", "optimizer", "config_hash", "versions", "sha256"):
        assert key in meta, key
    assert json.loads(meta["optimizer"])["step"] == 3


# ------------------------------------------------------------------------------------------------- bad files


@pytest.fixture
def saved(tmp_path) -> Path:
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, step=3, config_hash=HASH, **training_state())
    return path


def assert_refused(path: Path, match: str, config_hash: str | None = HASH) -> None:
    """Loading fails with one UserError naming the file, and the run's state is left exactly as it was."""
    state = training_state(step=0, seed=1)
    before = as_plain(state)
    file_before = path.read_bytes() if path.is_file() else None
    with pytest.raises(UserError, match=match) as err:
        load_checkpoint(path, config_hash=config_hash, **state)
    assert str(path) in str(err.value)
    assert as_plain(state) == before
    assert (path.read_bytes() if path.is_file() else None) == file_before


@pytest.mark.lab02
@pytest.mark.parametrize("keep", [0.5, 0.9, 0.999])
def test_truncated_file_is_refused(saved, keep):
    data = saved.read_bytes()
    saved.write_bytes(data[: int(len(data) * keep)])
    assert_refused(saved, "truncated or corrupted")


@pytest.mark.lab02
@pytest.mark.parametrize("where", ["tensor bytes", "metadata value"])
def test_corruption_that_still_parses_is_caught(saved, where):
    data = bytearray(saved.read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    if where == "tensor bytes":
        data[-5] ^= 0x01  # one bit of one float
    else:
        at = data.index(b'"step":"3"', 8, 8 + n) + len(b'"step":"')
        data[at] = ord("4")  # step 3 -> 4: still valid JSON, still a valid file
    saved.write_bytes(bytes(data))
    assert_refused(saved, "checksum mismatch")


@pytest.mark.parametrize(
    ("content", "match"),
    [(b"", "truncated or corrupted"), (b"hello, this is a text file\n" * 3, "truncated or corrupted")],
)
def test_not_a_safetensors_file_is_refused(tmp_path, content, match):
    path = tmp_path / "c.safetensors"
    path.write_bytes(content)
    assert_refused(path, match)


def test_foreign_safetensors_file_is_refused(tmp_path):
    import safetensors.numpy

    path = tmp_path / "c.safetensors"
    safetensors.numpy.save_file(gpt2_state(CONFIG), path, metadata={"format": "pt"})
    assert_refused(path, "not a minitrain file")
    with pytest.raises(UserError, match="not a minitrain file"):
        load_model_file(path)


def test_metadata_value_that_is_not_json_is_refused(tmp_path):
    import safetensors.numpy

    path = tmp_path / "c.safetensors"
    tensors = gpt2_state(CONFIG)
    text = {"format": "minitrain", "model_config": "{not json"}
    text["sha256"] = model_files._content_digest(tensors, text)  # a consistent file whose content is wrong
    safetensors.numpy.save_file(tensors, path, metadata=text)
    assert_refused(path, "the value is not valid JSON")


def test_missing_file_is_refused(tmp_path):
    assert_refused(tmp_path / "nope.safetensors", "model file not found")


@pytest.mark.lab02
def test_checkpoint_of_another_model_shape_is_refused(tmp_path):
    path = tmp_path / "c.safetensors"
    other = training_state()
    other["model"] = Model({**CONFIG, "d_model": 4, "d_ff": 8})
    other["optimizer"] = Optimizer(other["model"], 3)
    # Its config hash differs too; the error names the shape, the more useful of the two reasons.
    save_checkpoint(path, step=3, config_hash=config_hash({"model": "smaller"}), **other)
    assert_refused(path, r"another shape: d_ff=8 \(this model: 16\), d_model=4 \(this model: 8\)")


@pytest.mark.lab02
def test_config_hash_mismatch_is_refused(saved):
    assert_refused(saved, "config hash", config_hash=config_hash({"lr": 2e-3}))
    load_checkpoint(saved, config_hash=None, **training_state(seed=1))  # no hash given: not checked


def save_raw(path: Path, tensors: dict, meta: dict) -> None:
    """Write a file exactly as checkpoint.py would, from hand-edited contents (a valid checksum included)."""
    atomic_write_bytes(path, model_files.encode(tensors, meta))


def read_raw(path: Path) -> tuple[dict, dict]:
    tensors, meta = model_files.read_file(path)
    meta.pop("format")
    return tensors, meta


def test_missing_optimizer_buffer_is_refused(saved):
    tensors, meta = read_raw(saved)
    del tensors["optimizer.exp_avg.transformer.wpe.weight"]
    save_raw(saved, tensors, meta)
    assert_refused(saved, r"optimizer buffers missing \['exp_avg.transformer.wpe.weight'\] / unexpected \[\]")


def test_misshaped_optimizer_buffer_is_refused(saved):
    tensors, meta = read_raw(saved)
    tensors["optimizer.exp_avg_sq.transformer.ln_f.bias"] = np.zeros(3, np.float32)
    save_raw(saved, tensors, meta)
    assert_refused(saved, r"optimizer buffer 'exp_avg_sq.transformer.ln_f.bias' has shape \(3,\)")


def test_misshaped_model_tensor_is_refused(saved):
    tensors, meta = read_raw(saved)
    tensors["transformer.ln_f.bias"] = np.zeros(3, np.float32)
    save_raw(saved, tensors, meta)
    assert_refused(saved, r"'transformer.ln_f.bias' has shape \(3,\)")


def test_failure_while_restoring_rolls_everything_back(saved):
    tensors, meta = read_raw(saved)
    meta["optimizer"]["surprise"] = 1  # the stand-in optimizer refuses unknown keys, after the model has loaded
    save_raw(saved, tensors, meta)
    assert_refused(saved, "cannot restore the training state")


def test_newer_format_is_refused(saved):
    tensors, meta = read_raw(saved)
    meta["format_version"] = model_files.FORMAT_VERSION + 1
    save_raw(saved, tensors, meta)
    assert_refused(saved, "upgrade minitrain")


# ---------------------------------------------------------------------------------------- checkpoints/ folder


def save_steps(manager: CheckpointManager, steps) -> None:
    """What the engine does at each save: the step file, then `latest` names it."""
    for step in steps:
        save_checkpoint(manager.path_for(step), step=step, config_hash=HASH, **training_state(step))
        manager.point_latest(manager.path_for(step))


def test_latest_pointer_and_pruning(tmp_path):
    manager = CheckpointManager(tmp_path, keep_last=2)
    assert manager.latest() is None
    save_steps(manager, [10, 20, 30, 40])
    assert [s for s, _ in manager.step_files()] == [30, 40]
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step-40.safetensors\n"
    assert manager.latest() == tmp_path / "checkpoints" / "step-40.safetensors"
    assert load_model_file(manager.latest())[2]["step"] == 40


@pytest.mark.parametrize(("content", "match"), [
    (b"../../etc/passwd\n", r"expected a file name like step-120\.safetensors, found '\.\./\.\./etc/passwd'"),
    (b"\xff\xfe\x00", r"the checkpoint pointer is not UTF-8 text \(byte 0 is 0xff; a binary file\?\)"),
])
def test_a_damaged_latest_pointer_is_a_user_error_naming_it(tmp_path, content, match):
    manager = CheckpointManager(tmp_path)
    save_steps(manager, [10])
    (tmp_path / "checkpoints" / "latest").write_bytes(content)
    with pytest.raises(UserError, match=rf"checkpoints/latest: {match}"):
        manager.latest()
    with pytest.raises(UserError, match=rf"checkpoints/latest: {match}"):
        CheckpointManager.resolve(tmp_path)


def test_pruning_keeps_best_and_the_latest_target(tmp_path):
    manager = CheckpointManager(tmp_path, keep_last=1)
    save_steps(manager, [1, 2])
    save_checkpoint(tmp_path / "checkpoints" / "best.safetensors", step=2, config_hash=HASH, **training_state(2))
    save_steps(manager, [3])
    assert (tmp_path / "checkpoints" / "best.safetensors").is_file()
    # A pointer left on an older file (a crash between writing step 4 and moving `latest`) protects that file.
    (tmp_path / "checkpoints" / "latest").write_text("step-3.safetensors\n")
    save_checkpoint(manager.path_for(4), step=4, config_hash=HASH, **training_state(4))
    manager.prune()
    assert [s for s, _ in manager.step_files()] == [3, 4]
    assert manager.latest() == manager.path_for(3)


def test_resolve_accepts_run_dir_checkpoints_dir_or_file(tmp_path):
    manager = CheckpointManager(tmp_path / "run", keep_last=None)
    save_steps(manager, [5, 15])
    target = tmp_path / "run" / "checkpoints" / "step-15.safetensors"
    assert CheckpointManager.resolve(tmp_path / "run") == target
    assert CheckpointManager.resolve(tmp_path / "run" / "checkpoints") == target
    assert CheckpointManager.resolve(manager.path_for(5)) == manager.path_for(5)
    # Without the pointer, the newest step file is used.
    (tmp_path / "run" / "checkpoints" / "latest").unlink()
    assert CheckpointManager.resolve(tmp_path / "run") == target
    with pytest.raises(UserError, match="no checkpoint found"):
        CheckpointManager.resolve(tmp_path)
    with pytest.raises(UserError, match="no such checkpoint file or run folder"):
        CheckpointManager.resolve(tmp_path / "missing")


def test_exception_during_write_leaves_previous_checkpoint(tmp_path, monkeypatch):
    manager = CheckpointManager(tmp_path, keep_last=1)
    save_steps(manager, [1])
    before = manager.path_for(1).read_bytes()

    def failing_fsync(fd):
        raise OSError(28, "No space left on device")

    # The disk fills up after the bytes went to the temp file, before the rename.
    monkeypatch.setattr("minitrain.common.io.os.fsync", failing_fsync)
    with pytest.raises(UserError, match=r"step-2.safetensors: cannot write \(No space left on device\)"):
        save_steps(manager, [2])
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest", "step-1.safetensors"]
    assert manager.latest() == manager.path_for(1)
    assert manager.path_for(1).read_bytes() == before


KEEP_SAVING = """
import os
import signal
import sys
import tempfile
sys.path.insert(0, {tests!r})
from test_checkpoint import HASH, CheckpointManager, Model, Optimizer, load_model_file, save_checkpoint, training_state

manager = CheckpointManager({run!r}, keep_last=2)
latest = manager.latest()
step = load_model_file(latest)[2]["step"] if latest else 0
state = training_state()
state["model"] = Model({{**state["model"].config, "vocab_size": 3000, "d_model": 128}})  # ~4.5 MB per save
state["optimizer"] = Optimizer(state["model"])
saves = 0  # saves this child completed; it stops itself (SIGSTOP) at its chosen moment of the second one


def stop_at(moment):
    if moment == {stop!r} and saves == 1:
        os.kill(os.getpid(), signal.SIGSTOP)


make_temp, real_replace = tempfile.mkstemp, os.replace


def mkstemp(*args, **kwargs):
    made = make_temp(*args, **kwargs)
    if kwargs.get("prefix", "").startswith(".step-"):
        stop_at("temp made")  # the temp file exists, empty
    return made


def replace(src, dst, *args, **kwargs):
    name = os.path.basename(dst)
    stop_at("before the rename" if name.startswith("step-") else "before latest" if name == "latest" else "")
    return real_replace(src, dst, *args, **kwargs)


tempfile.mkstemp, os.replace = mkstemp, replace
while True:
    step += 1
    state["scheduler"].state["step"] = step
    state["model"].params["transformer.wte.weight"][0, 0] = step
    save_checkpoint(manager.path_for(step), step=step, config_hash=HASH, **state)
    manager.point_latest(manager.path_for(step))
    stop_at("after the save")
    saves += 1
"""


@pytest.mark.slow
def test_sigkill_at_each_moment_of_a_save_leaves_a_complete_latest_checkpoint(tmp_path):
    """kill -9 at each moment of a checkpoint save, chosen (the child stops itself there) rather than hoped for:
    `latest` always names a complete, checksummed checkpoint, the one before the save unless the save ended."""
    from test_resume import wait_until_stopped

    folder = tmp_path / "checkpoints"
    start = 0
    # (the moment of the child's second save, the step `latest` then names, the temp file left, if any)
    moments = [("after the save", 2, None), ("temp made", 1, ".step-{}.safetensors"),
               ("before the rename", 1, ".step-{}.safetensors"), ("before latest", 1, ".latest")]
    for moment, saved, temp in moments:
        code = KEEP_SAVING.format(tests=str(Path(__file__).parent), run=str(tmp_path), stop=moment)
        child = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
        wait_until_stopped(child)
        child.kill()
        child.communicate()
        temps = [p for p in folder.iterdir() if p.name.endswith(".tmp")]
        assert [p.name.rsplit(".", 2)[0] for p in temps] == ([] if temp is None else [temp.format(start + 2)])
        if moment != "after the save":  # the temp file of a save cut short: empty until written, then complete
            assert (temps[0].stat().st_size == 0) == (moment == "temp made")
        latest = CheckpointManager(tmp_path).latest()
        sd, _, meta = load_model_file(latest)  # complete and checksummed, or this raises
        assert meta["step"] == start + saved and meta["scheduler"]["step"] == meta["step"]
        assert sd["transformer.wte.weight"][0, 0] == meta["step"]
        steps = [step for step, _ in CheckpointManager(tmp_path).step_files()]
        # keep_last 2, pruned after `latest` moves; before it moves, the new step file sits beside them
        assert steps == list(range(max(1, start + saved - 1), start + saved + 1)) + (
            [start + 2] if moment == "before latest" else [])
        for _, path in CheckpointManager(tmp_path).step_files():
            load_model_file(path)
        start = meta["step"]


# ------------------------------------------------------------------------------------ with the real objects


def real_parts(folder: Path, overrides: list[str] = (), train_records: int = 40):
    """MiniGPT (dropout on), AdamW, warm-up cosine and the train batcher, built as a run builds them."""
    from minitrain.config import load_config
    from minitrain.course.fixtures import write_tiny_run
    from minitrain.training.parts import build_parts

    config = write_tiny_run(folder)
    train = folder / "data" / "train.jsonl"
    train.write_text("".join(train.read_text().splitlines(keepends=True)[:train_records]))
    return build_parts(load_config(config, ["model.dropout=0.1", *overrides]), 24)


def advance(parts, steps: int) -> None:
    from minitrain.loop import train_step

    for _ in range(steps):
        train_step(parts.model, parts.optimizer, [next(parts.batcher)], clip_norm=1.0)
        parts.optimizer.step()
        parts.scheduler.step()


def objects(parts) -> dict:
    return {"model": parts.model, "optimizer": parts.optimizer, "scheduler": parts.scheduler,
            "batcher": parts.batcher, "train_rng": parts.model.rng}  # fmt: skip


@pytest.mark.lab02
@pytest.mark.slow
def test_real_training_state_round_trip_continues_identically(tmp_path):
    a = real_parts(tmp_path / "a")
    advance(a, 7)  # inside the second half of the first epoch, after the 6-step warm-up
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, step=7, config_hash=HASH, **objects(a))
    b = real_parts(tmp_path / "b", ["training.rng_seed=1", "training.data_seed=2"])
    assert as_plain(objects(b)) != as_plain(objects(a))
    assert load_checkpoint(path, config_hash=HASH, **objects(b))["step"] == 7
    assert as_plain(objects(b)) == as_plain(objects(a))
    advance(a, 5)  # across the epoch boundary: the data RNG reshuffles, dropout draws from the training RNG
    advance(b, 5)
    assert as_plain(objects(b)) == as_plain(objects(a))


def test_real_objects_are_rolled_back_when_one_refuses(tmp_path):
    a = real_parts(tmp_path / "a")
    advance(a, 3)
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, step=3, config_hash=HASH, **objects(a))
    # The training file lost records since the save: the batcher refuses, after the model and optimizer loaded.
    b = real_parts(tmp_path / "b", train_records=36)
    before = as_plain(objects(b))
    with pytest.raises(UserError, match=r"c\.safetensors: cannot restore .*batcher state is for 40 records"):
        load_checkpoint(path, config_hash=HASH, **objects(b))
    assert as_plain(objects(b)) == before


# ------------------------------------------------------------------------------------------------ lab 02


REPO = Path(__file__).resolve().parents[2]
LAB01 = REPO / "experiments" / "18-train-mini"


@pytest.mark.lab02
def test_committed_lab01_model_reproduces_its_val_ppl_and_resaves_to_the_same_bytes(tmp_path, monkeypatch):
    from minitrain.config import load_config
    from minitrain.config.datacheck import load_split
    from minitrain.data.batcher import EvalBatcher, encode_split
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.loop import evaluate
    from minitrain.models.minigpt import MiniGPT
    from minitrain.training.scoring import EVAL_BATCH_SIZE

    monkeypatch.chdir(REPO)  # the lab config's data paths are relative to the repository
    results = json.loads((LAB01 / "results.json").read_text())
    model_path = REPO / results["model_path"]
    assert model_path.parent == REPO / "models" and model_path.name.startswith("minigpt-phase18-")
    state, model_config, meta = load_model_file(model_path)
    model = MiniGPT(**model_config)  # a fresh model, its own random init overwritten by the file
    model.load_state_dict(state)

    cfg = load_config(LAB01 / "config.yaml")
    assert model_config == cfg.model.model_dump(include=set(model_config))
    val = encode_split(load_split(cfg.data, "val"), CharTokenizer.load(cfg.data.vocab_path), cfg.model.max_seq_len,
                       cfg.data.loss_on)  # fmt: skip
    _, val_ppl = evaluate(model, EvalBatcher(val, EVAL_BATCH_SIZE))  # as the run evaluated it
    # Bit-identical on the machine that trained it; elsewhere BLAS may round float32 sums differently.
    assert val_ppl == pytest.approx(results["val_ppl"], rel=1e-6)

    # save -> load -> save: the same bytes, so the file's name (its content hash) is reproducible too.
    again = tmp_path / "again.safetensors"
    kept = {k: v for k, v in meta.items() if k not in ("format", "format_version", "kind", "model_config")}
    digest = save_model_file(again, model.state_dict(), model.config, kept)
    assert again.read_bytes() == model_path.read_bytes()
    assert model_path.name == f"minigpt-phase18-{digest[:16]}.safetensors"
