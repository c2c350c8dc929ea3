"""Lab 02's checker: `save_checkpoint` and `load_checkpoint` (minitrain/checkpoint.py).

Each of the five state machines of theory 00 is checked on its own, so a checkpoint that forgets one is named;
then bytes, refusals and rollback; then a real run is stopped and resumed with the student's file and compared,
byte for byte, with a run that never stopped. The checks decide here (checks.py `here`); the state machines live
in the child (`Parts`), and what only it sees comes back as data from the child-side helpers.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import pathlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from minitrain.common.errors import UserError
from minitrain.course import fixtures
from minitrain.course.checks import Checklist, Failed, raised
from minitrain.data.batcher import TrainBatcher  # the library's: `lab check` refuses the seam
from minitrain.loop import train_step
from minitrain.runs.model_files import save_model_file
from minitrain.runs.run_dir import locate

CHECKS = Checklist(here=True)  # the checker decides here; the calls go to the child (checks.py)
CHECKPOINT = "minitrain/checkpoint.py"
HASH = "0123456789abcdef" * 4
CHILD = sys.modules[__name__]  # its child-side helpers (Parts and those at the end of this file), for `lab.library`


@dataclass
class Parts:
    """Child side: the five state machines of one run (theory 00), stepped and read there."""

    model: Any
    optimizer: Any
    scheduler: Any
    batcher: Any

    def objects(self) -> dict[str, Any]:
        return {"model": self.model, "optimizer": self.optimizer, "scheduler": self.scheduler,
                "batcher": self.batcher, "train_rng": self.model.rng}

    def advance(self, steps: int) -> None:
        for _ in range(steps):
            train_step(self.model, self.optimizer, [next(self.batcher)], 1.0)
            self.optimizer.step()
            self.scheduler.step()

    def states(self) -> dict[str, Any]:
        """Every state as plain, comparable data (the batcher's as the next batch it would give)."""
        probe = copy.deepcopy(self.batcher)
        return {"model": self.model.buffer.data.copy(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(), "train_rng": self.model.rng.bit_generator.state,
                "batcher": self.batcher.state_dict(), "next batch": np.asarray(next(probe).input)}


def parts(seed: int, records: int = 40) -> Parts:
    """Child side: a tiny model with dropout (so the training RNG matters), AdamW, warm-up + cosine, a batcher."""
    model = fixtures.tiny_model(seed, dropout=0.1)
    optimizer, scheduler = fixtures.adamw(model, lr=3e-3)
    return Parts(model, optimizer, scheduler, TrainBatcher(fixtures.split("train", records), 4, data_seed=seed + 7))


def _there(lab, path: Path) -> Any:
    """`path` as a Path where the student's code runs (the data sent is its text)."""
    return lab.library(pathlib).Path(str(path))


def _saved(lab, steps: int = 13) -> tuple[Any, Path]:
    """Run a fresh Parts for `steps` steps (past the warm-up, inside the second epoch) and save it."""
    original = lab.library(CHILD).parts(0)
    original.advance(steps)
    path = lab.scratch() / f"step-{steps}.safetensors"
    lab.module(CHECKPOINT).save_checkpoint(_there(lab, path), step=steps, config_hash=HASH, extra={"best": 1.5},
                                           **original.objects())
    return original, path


def _loaded(lab) -> tuple[Any, Any, Path, dict]:
    """`_saved`'s parts and file, other parts (other seeds, no steps) with that file loaded into them, and what
    load_checkpoint returned."""
    original, path = _saved(lab)
    other = lab.library(CHILD).parts(1)
    info = lab.module(CHECKPOINT).load_checkpoint(_there(lab, path), config_hash=HASH, **other.objects())
    return original, other, path, info


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


@CHECKS.check("save_checkpoint writes a file that load_checkpoint reads back, with its step and extra",
              hint="save: model tensors + optimizer buffers as tensors, everything else as metadata, through "
                   "model_files.encode and io.atomic_write_bytes; load returns {'step', 'extra', 'config_hash', "
                   "'path'}")
def _round_trip(lab):
    _, _, _, info = _loaded(lab)
    if not isinstance(info, dict) or info.get("step") != 13 or info.get("extra") != {"best": 1.5}:
        raise Failed(f"load_checkpoint returned {info!r}; expected step 13 and extra {{'best': 1.5}}")


def _state_check(name: str, title: str, hint: str):
    @CHECKS.check(title, hint=hint, needs=(_round_trip,))
    def check(lab):
        original, other, _, _ = _loaded(lab)
        want, got = original.states(), other.states()
        keys = ("next batch", "batcher") if name == "batcher" else (name,)
        if not all(_same(want[k], got[k]) for k in keys):
            raise Failed(_STATE_FAILURES[name](want, got))

    return check


_STATE_FAILURES = {
    "model": lambda want, got: "after loading, the model's weights differ from the saved run's",
    "optimizer": lambda want, got: (
        f"the optimizer's step count came back as {got['optimizer'].get('step')}, not "
        f"{want['optimizer'].get('step')}: AdamW's bias correction restarts and the next updates are too large"
        if want["optimizer"].get("step") != got["optimizer"].get("step")
        else "the optimizer's moments (exp_avg, exp_avg_sq) differ from the saved run's"),
    "scheduler": lambda want, got: (f"the schedule came back as {got['scheduler']}, not {want['scheduler']}: the "
                                    "learning rate restarts its warm-up"),
    "train_rng": lambda want, got: "the training RNG did not come back: with dropout on, the masks would differ",
    "batcher": lambda want, got: ("the data RNG and position did not come back: after loading, the next batch "
                                  "differs from the saved run's (a resume would see other batches)"),
}
_model_state = _state_check("model", "the model's weights come back",
                            "save model.state_dict() as tensors; load with model.load_state_dict(state), which "
                            "copies into the model's own arrays (rebinding `p.data = ...` leaves the flat buffer "
                            "behind)")
_optimizer_state = _state_check("optimizer", "the optimizer's moments and step count come back",
                                "save optimizer.state_dict(): its buffers as tensors `optimizer.<name>`, the rest "
                                "(type, step, lr) as metadata; load it all back with optimizer.load_state_dict")
_schedule_state = _state_check("scheduler", "the schedule's position comes back",
                               "save scheduler.state_dict() as metadata; load_state_dict it back")
_rng_state = _state_check("train_rng", "the training RNG comes back",
                          "save train_rng.bit_generator.state (JSON keeps PCG64's 128-bit integers exact); "
                          "set it back with train_rng.bit_generator.state = saved")
_data_state = _state_check("batcher", "the data RNG and its position come back",
                           "save batcher.state_dict() as metadata and batcher.load_state_dict it back: forgetting "
                           "it is the resume bug that silently replays batches")


@CHECKS.check("weights are copied into the model's own arrays, not rebound",
              hint="model.load_state_dict copies into the existing arrays (p.data[...] = loaded); `p.data = "
                   "loaded` makes a new array the optimizer never updates", needs=(_model_state,))
def _copied(lab):
    _, other, _, _ = _loaded(lab)
    rebound = lab.library(CHILD).rebound(other.model)
    if rebound:
        raise Failed(f"after loading, {rebound[0]} (and {len(rebound) - 1} more) is no longer a view of the "
                     "model's flat buffer: the optimizer would update the old arrays")


@CHECKS.check("a resumed run continues exactly as the uninterrupted one",
              hint="all five states must come back; compare the lab's five-state table in theory 00",
              needs=(_model_state, _optimizer_state, _schedule_state, _rng_state, _data_state))
def _continues(lab):
    original, other, _, _ = _loaded(lab)
    original.advance(7)
    other.advance(7)
    if not np.array_equal(original.model.buffer.data, other.model.buffer.data):
        raise Failed("13 steps, save, load into fresh objects, 7 more steps: the weights differ from 20 steps "
                     "straight")


@CHECKS.check("the same state saves to the same bytes",
              hint="let model_files.encode build the bytes (it sorts the header and writes JSON canonically); "
                   "do not add timestamps or anything that changes between saves", needs=(_round_trip,))
def _same_bytes(lab):
    _, other, path, _ = _loaded(lab)
    again = lab.scratch() / "again.safetensors"
    lab.module(CHECKPOINT).save_checkpoint(_there(lab, again), step=13, config_hash=HASH, extra={"best": 1.5},
                                           **other.objects())
    if again.read_bytes() != path.read_bytes():
        raise Failed("save, load, save again: the two files differ")


def _refused(lab, path: Path, what: str, **keys: Any) -> None:
    """Loading `path` must raise a UserError and leave fresh parts exactly as they were."""
    other = lab.library(CHILD).parts(1)
    before = other.states()
    error = raised(UserError, lab.module(CHECKPOINT).load_checkpoint, _there(lab, path),
                   **{"config_hash": HASH, **keys, **other.objects()})
    if error is None:
        raise Failed(f"{what} was loaded; it must be refused with a UserError")
    if str(path) not in str(error):
        raise Failed(f"{what}: the error does not name the file: {error}")
    changed = _changed(before, other)
    if changed:
        raise Failed(f"{what} was refused, but only after changing the {', '.join(changed)}")


def _changed(before: dict[str, Any], parts: Any) -> list[str]:
    """The states of `parts` that differ from `before` (a `states()` taken earlier)."""
    after = parts.states()
    return [k for k in before if not _same(before[k], after[k])]


@CHECKS.check("a checkpoint written under another config is refused, and nothing changes",
              hint="compare the saved config_hash with the one given BEFORE restoring anything; raise UserError "
                   "naming the file", needs=(_round_trip,))
def _other_config(lab):
    _, path = _saved(lab)
    _refused(lab, path, "a checkpoint of another config hash", config_hash="f" * 64)


@CHECKS.check("a model-only file is refused, and nothing changes",
              hint="a model file (kind 'model') has no optimizer, schedule or RNG state: it cannot resume a run",
              needs=(_round_trip,))
def _model_only(lab):
    model = fixtures.tiny_model(0, dropout=0.1)
    path = lab.scratch() / "model.safetensors"
    save_model_file(path, model.state_dict(), model.config)
    _refused(lab, path, "a model-only file")


@CHECKS.check("a restore that fails half-way puts every object back",
              hint="snapshot the five states first (deep copies); if one load_state_dict raises, restore them all "
                   "from the snapshot, then raise a UserError", needs=(_round_trip,))
def _rollback(lab):
    _, path = _saved(lab)
    other = lab.library(CHILD).parts(1, records=36)  # its batcher refuses a state for 40, after model and optimizer
    before = other.states()
    if raised(UserError, lab.module(CHECKPOINT).load_checkpoint, _there(lab, path), config_hash=HASH,
              **other.objects()) is None:
        raise Failed("a checkpoint whose batcher state is for 40 records loaded into a run of 36")
    changed = _changed(before, other)
    if changed:
        raise Failed(f"the batcher refused its state, but the {', '.join(changed)} stayed changed")


@CHECKS.check("save_checkpoint writes atomically: a failed save leaves the old file whole",
              hint="never write straight to `path`: io.atomic_write_bytes writes a temp file, fsyncs it and "
                   "renames it over the target", needs=(_round_trip,))
def _atomic(lab):
    original, path = _saved(lab)
    old = path.read_bytes()
    original.advance(1)
    full_disk = lab.library(CHILD).full_disk
    full_disk(True)
    with contextlib.suppress(Exception):  # the disk is full: any error is right, as long as the old file survives
        lab.module(CHECKPOINT).save_checkpoint(_there(lab, path), step=14, config_hash=HASH, **original.objects())
    fsyncs = full_disk(False)
    if path.read_bytes() != old:
        raise Failed("a save that failed while writing left a changed file behind: write to a temp file, fsync, "
                     "then rename")
    if not fsyncs:
        raise Failed("save_checkpoint never called fsync: without it a crash can leave a renamed but empty file")


@CHECKS.check("a run stopped after 12 steps and resumed ends byte-identical to one that never stopped",
              hint="run the two commands of the lab's 'Resuming a run' section with MINITRAIN_LAB_DIR set and "
                   "compare train_log.jsonl", needs=(_continues, _other_config))
def _resume_run(lab):
    config = fixtures.write_tiny_run(lab.scratch(), body="")
    sets = ["--set", "model.dropout=0.1", "--set", "training.log_every=1", "--quiet"]
    train = ["-m", "minitrain.cli", "train", str(config), *sets]
    straight = lab.python(*train, "--out-dir", str(lab.scratch() / "straight"))
    halted = lab.python(*train, "--out-dir", str(lab.scratch() / "resumed"), "--set",
                        "monitoring.alerts=['step >= 11: halt']")
    if halted.returncode != 4:
        raise Failed(f"the run meant to halt after step 11 ended with exit {halted.returncode}: "
                     f"{halted.stderr.strip()[-300:]}")
    resumed = lab.python(*train, "--out-dir", str(lab.scratch() / "resumed"), "--resume",
                         str(lab.scratch() / "resumed"))
    for name, done in (("the uninterrupted run", straight), ("the resumed run", resumed)):
        if done.returncode != 0:
            raise Failed(f"{name} failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    logs = [(lab.scratch() / d / "train_log.jsonl").read_bytes() for d in ("straight", "resumed")]
    if logs[0] != logs[1]:
        raise Failed("the resumed run's train_log.jsonl differs from the uninterrupted run's")
    models = [locate(json.loads((lab.scratch() / d / "results.json").read_text())["model_path"], lab.scratch() / d)
              for d in ("straight", "resumed")]  # results.json says where each model file is; its bytes are compared
    if None in models or models[0].read_bytes() != models[1].read_bytes():
        raise Failed("the resumed run's final model file differs from the uninterrupted run's (its name is the "
                     "hash of its bytes)")


# ------------------------------------------------------------------------------------------------ child side
# Called through `lab.library(CHILD)`: they run where the student's code runs and return plain data.
_FULL_DISK: list = []  # the patch of os.fsync that full_disk(True) started


def rebound(model: Any) -> list[str]:
    """The names of the parameters whose data is no longer a view of the model's flat buffer."""
    return [name for name, p in model.named_parameters() if not np.shares_memory(p.data, model.buffer.data)]


def full_disk(on: bool) -> int:
    """From `full_disk(True)` on, os.fsync fails as on a full disk (OSError 28); `full_disk(False)` puts the real
    one back and returns how many times it was called meanwhile."""
    calls = os.fsync.call_count if _FULL_DISK else 0
    while _FULL_DISK:
        _FULL_DISK.pop().stop()
    if on:
        _FULL_DISK.append(mock.patch.object(os, "fsync", side_effect=OSError(28, "No space left on device")))
        _FULL_DISK[-1].start()
    return calls
