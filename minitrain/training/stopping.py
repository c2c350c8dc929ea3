"""How a run that does not end well ends: one readable error that says what happened and how to go on.

    stopped_error(outcome, rerun)  diverged (exit 3), interrupted (128 + the signal), halted by an alert (exit 4),
                                   with the command that resumes it: the one that started it, plus --resume
    failed(error, ...)             an error the run cannot go on from (a full disk, a bug): the manifest records
                                   "failed" and the error
    sigterm_raises()               SIGTERM outside the training loop raised like a Ctrl-C (`Terminated`), so the
                                   same clean-up runs (the loop handles it itself, at a step boundary)
    catch_stop_signals()           inside the loop: SIGINT/SIGTERM remembered, so the loop stops at the next step
                                   boundary (a second Ctrl-C raises KeyboardInterrupt at once)
"""

from __future__ import annotations

import shlex
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from minitrain import seam
from minitrain.common.errors import UserError
from minitrain.config import Config
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.run_files import DIVERGED, FAILED, INTERRUPTED
from minitrain.training import artifacts

EXIT_DIVERGED, EXIT_HALTED = 3, 4


class Terminated(KeyboardInterrupt):
    """SIGTERM outside the training loop (which handles it itself, at a step boundary), raised like a Ctrl-C so
    that the same clean-up runs and the run ends with one error line and exit code 143."""


@contextmanager
def sigterm_raises() -> Iterator[None]:
    def terminate(signum: int, frame: Any) -> None:
        raise Terminated

    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed from the main thread
        return
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    except Terminated:
        raise UserError("SIGTERM: terminated (manifest.json, if written, says where the run stands)",
                        128 + signal.SIGTERM) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


class StopSignal:
    """Remembers a SIGINT/SIGTERM so the loop can stop cleanly at the next step boundary."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum: int, frame: Any) -> None:
        if self.signum == signal.SIGINT and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: the user wants out now
        self.signum = signum

    @property
    def name(self) -> str:
        """"SIGINT" or "SIGTERM" once one was received, else ""."""
        return signal.Signals(self.signum).name if self.signum is not None else ""


@contextmanager
def catch_stop_signals() -> Iterator[StopSignal]:
    """While the loop runs, SIGINT and SIGTERM only set the yielded StopSignal (the previous handlers come back
    after)."""
    stop = StopSignal()
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signal handlers can only be installed from the main thread
        return
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def failed(error: BaseException, out_dir: Path, manifest: dict[str, Any], manager: CheckpointManager) -> UserError:
    """Record status "failed" (and why) in the manifest; the error to raise, saying if even that was impossible."""
    if isinstance(error, UserError):
        message = str(error)
    else:
        message = f"out of memory ({error})" if isinstance(error, MemoryError) else f"{type(error).__name__}: {error}"
    latest = manager.latest()
    # Raised from a lab workspace's file: the student's code, named; run_dir lets the next run replace this one.
    in_lab_file = None if isinstance(error, UserError) else seam.lab_error_line(error)
    try:
        artifacts.complete_manifest(out_dir / "manifest.json", manifest, status=FAILED, error=in_lab_file or message,
                                    checkpoint=None if latest is None else str(latest),
                                    **({"failed_in_lab_file": True} if in_lab_file else {}))
    except UserError as again:
        message += f"; {out_dir / 'manifest.json'} could not record the failure either ({again})"
    if latest is not None:
        message += f"; the last checkpoint is {latest}"
    return UserError(message, error.exit_code if isinstance(error, UserError) else 1)


def train_command(cfg: Config, out_dir: Path, config_path, overrides) -> list[str]:
    """`minitrain train CONFIG --out-dir OUT_DIR` with the run's `--set`/`--seed` flags."""
    config = config_path or (cfg.source.path if cfg.source is not None and cfg.source.path else "CONFIG")
    argv = ["minitrain", "train", str(config), "--out-dir", str(out_dir)]
    for override in overrides:  # "--set key=value", "--seed 3", ...: flag, then its value
        flag, _, value = override.partition(" ")
        if flag != "--out-dir":
            argv += [flag, value]
    return argv


def stopped_error(outcome: dict, rerun: list[str] | tuple[str, ...]) -> UserError:
    """The one-line explanation of a run that did not finish, with the command that resumes it: `rerun` (the
    command that started it) with `--resume CHECKPOINT`."""
    status, checkpoint = outcome["status"], outcome["checkpoint"]
    # Counted as the checkpoint is (step-N: N updates done), not by the log's step of the last update (N − 1).
    done = outcome["steps_done"]
    command = shlex.join([*rerun, "--resume", str(checkpoint)])  # quoted where the shell needs it
    resume = f"resume with: {command}" if checkpoint else "no checkpoint was saved yet: start again"
    if status == DIVERGED:
        # Training is deterministic: resuming the same config from the last good checkpoint diverges again.
        last_good = f"the last good checkpoint is {checkpoint}" if checkpoint else "no checkpoint was saved before it"
        return UserError(f"training diverged: {outcome['messages'][-1]}; {last_good}. "
                         "Lower optimizer.lr_max (or set optimizer.clip) and train again", EXIT_DIVERGED)
    if status == INTERRUPTED:
        signum = signal.Signals[outcome["signal"]]
        return UserError(f"{signum.name}: interrupted after {done} steps; checkpoint {checkpoint}; {resume}",
                         128 + signum.value)
    reason = next((m for m in reversed(outcome["messages"]) if m.startswith("halt")), "an alert fired")
    return UserError(f"halted after {done} steps ({reason}); checkpoint {checkpoint}; {resume}", EXIT_HALTED)

