"""Grading a student's code from outside: each check runs in a child process with a time and a memory limit.

    with Sandbox(setup, Limits(timeout=60, memory_mb=2048)) as sandbox:
        outcomes = checklist.run(subject, runner=sandbox.run)

The child (minitrain/course/worker.py) imports the student's files. A check marked `here` (checks.py) runs in
this process, and each of its calls into the student's code is sent to the child, which sends back what the
code returned, as data (remote.py): the check compares it with the library's and decides the verdict here,
where the student's code never runs. Any other check runs in the child, which sends back its outcome. What the
student's code prints (the child's stdout and stderr) goes to a file, which `printed()` returns: `lab check`
shows it after the checklist, labelled, never inside it. For each item:

- a verdict comes back: that is the outcome;
- the item runs past `timeout` seconds (its clock starts when the child starts the item, not while the child
  starts up): the child is asked which line of the student's code it is running (SIGUSR1), then killed; the
  item fails with "took longer than N s — look for a loop that never ends in <function>";
- the child ends without a verdict (os._exit, a segmentation fault, killed by a signal): the item fails with how
  it ended and, when known, in which function;
- Ctrl-C: the child is asked where it is, killed, and `Interrupted` goes up with that place.

After a child is lost, the next item starts a fresh one. A file whose import never finished (a loop at its top
level) is remembered: in the fresh child, loading it fails at once, instead of every item waiting out the limit.
The child runs in a session of its own, so the terminal's Ctrl-C reaches only this process, and killing the
child's process group also ends the training runs a check started.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minitrain.common.errors import UserError
from minitrain.common.lifeline import child_environment
from minitrain.common.paths import PACKAGE
from minitrain.course.blame import describe, innermost_in_dump, lab_files
from minitrain.course.checks import Check, Failed, Interrupted, Outcome, run_one
from minitrain.course.remote import Lost, Remote, StudentError, decode, encode

DEFAULT_TIMEOUT = 120.0  # seconds per item: a check's own training run takes ~20 s on a busy 2-core machine
DEFAULT_MEMORY_MB = 2048  # a check needs ~300 MB; this stops a runaway list long before the machine swaps
STARTUP_SECONDS = 300.0  # for the child to import the library: not the student's time
ANSWER_SECONDS = 5.0  # for the child to say where it is, once asked; a child stuck in C code never answers
# Python runs a signal's handler in the main thread, between bytecodes. The kernel may hand a Ctrl-C to any thread
# of this process (OpenBLAS starts one per core) and then leaves the main thread asleep in select(): it wakes at
# least this often, so a Ctrl-C never waits for the item's time limit.
WAKE_SECONDS = 0.1

_SIGNALS = {signal.SIGSEGV: "a segmentation fault: memory read or written where no object lives",
            signal.SIGBUS: "a bus error: memory that cannot be reached", signal.SIGFPE: "an arithmetic fault",
            signal.SIGABRT: "an abort", signal.SIGILL: "an illegal instruction",
            signal.SIGKILL: "killed (kill -9, or the system out of memory)"}


@dataclass(frozen=True)
class Limits:
    """Per item: wall-clock seconds, and megabytes of memory (heap and private mappings: RLIMIT_DATA)."""

    timeout: float = DEFAULT_TIMEOUT
    memory_mb: int = DEFAULT_MEMORY_MB


@dataclass
class _Child:
    process: subprocess.Popen
    requests: Any  # the pipe this process writes requests into
    replies: int  # the file descriptor the child's replies arrive on
    buffer: bytes = b""
    exit_note: dict | None = None  # what the child said just before it ended itself (os._exit)


@dataclass
class Sandbox:
    """Runs a lab's checks in a child process, one item at a time (see the module docstring)."""

    setup: dict  # lab, workspace, run_dir, shown, scratch: what the child builds its LabUnderTest from
    limits: Limits = field(default_factory=Limits)
    subject: Any = None  # the LabUnderTest that `here` checks look at (its `remote` is this sandbox)
    broken: dict[str, str] = field(default_factory=dict)  # lab file -> why it cannot be imported
    _child: _Child | None = None
    _item: Check | None = None  # the `here` item running, and when its time is up
    _deadline: float = 0.0

    def __post_init__(self) -> None:
        self.files = lab_files(self.setup["lab"], Path(self.setup["workspace"]) if self.setup["workspace"] else None)
        self.crash_file = Path(self.setup["scratch"]) / "worker-crash.txt"
        self.printed_file = Path(self.setup["scratch"]) / "printed.txt"

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------- one item

    def run(self, item: Check) -> Outcome:
        """The outcome of `item`: run here, calling into the child, or run in the child (started first if
        there is none)."""
        try:
            if item.here:
                self._item, self._deadline = item, time.monotonic() + self.limits.timeout
                try:
                    return run_one(item, self.subject)
                except Lost as lost:
                    return lost.outcome
            child = self._child or self._start()
            child.requests.write(json.dumps({"check": item.name}) + "\n")
            child.requests.flush()
            deadline = time.monotonic() + STARTUP_SECONDS  # until the child says the item has started
            while True:
                message = self._receive(child, deadline)
                if message is None:  # the child ended without a verdict
                    return self._lost(item, child.exit_note, self._stop())
                if message == "timeout":
                    return self._too_long(item)
                if "started" in message:
                    deadline = time.monotonic() + self.limits.timeout
                elif "outcome" in message:
                    return Outcome(**message["outcome"])
        except KeyboardInterrupt:
            where = self._where() if self._child is not None else None
            self._stop()
            raise Interrupted(item.name, describe(where) and f"your {describe(where)}") from None
        except BrokenPipeError:  # the child died before it read the request
            return self._lost(item, None, self._stop())

    def ask(self, op: str, *values: Any) -> Any:
        """One call into the student's code for the running `here` item (remote.py; worker.py lists the ops):
        what it returned, or what it raised raised here; `Lost` when the child runs past the item's limits or
        ends."""
        item = self._item
        if self._child is None:
            began = time.monotonic()
            self._start()
            self._deadline += time.monotonic() - began  # starting the child is not the student's time
        child = self._child
        try:
            child.requests.write(json.dumps({"op": op, "args": encode(list(values), _by_ref)}) + "\n")
            child.requests.flush()
        except BrokenPipeError:
            raise Lost(self._lost(item, None, self._stop())) from None
        while True:
            message = self._receive(child, self._deadline)
            if message is None:
                raise Lost(self._lost(item, child.exit_note, self._stop()))
            if message == "timeout":
                raise Lost(self._too_long(item))
            if "value" in message:
                return decode(message["value"], lambda data: Remote(self.ask, data["ref"], data["type"]))
            if "raised" in message:
                raise StudentError(message["raised"], message["text"], tuple(message["classes"]), message.get("code"))
            if "stub" in message:
                raise NotImplementedError(message["stub"])
            if "failed" in message:
                raise Failed(message["failed"], message["hint"])
            if "lost" in message:
                raise Lost(Outcome(item.name, False, message["lost"], item.hint))

    def printed(self) -> str:
        """What the student's code printed so far (every child's stdout and stderr)."""
        try:
            return self.printed_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def _too_long(self, item: Check) -> Outcome:
        where = self._where()
        self._stop()
        limit = f"took longer than {self.limits.timeout:g} s"
        if where is None:
            return Outcome(item.name, False, f"{limit}; on a slow or busy machine give it more with `minitrain lab "
                           "check --timeout SECONDS`", item.hint)
        reason = f"{limit} — look for a loop that never ends in {describe(where)}"
        if where["function"] == "<module>":
            self.broken[where["path"]] = f"it did not finish importing within {self.limits.timeout:g} s — look " \
                                         f"for a loop that never ends in {describe(where)}"
        return Outcome(item.name, False, reason, item.hint)

    def _lost(self, item: Check, note: dict | None, returncode: int | None) -> Outcome:
        """The item's outcome when the child ended without giving one (`note`: what it said first)."""
        where = None
        if note is not None:
            where = note["where"]
            reason = f"your code ended the checker's process with {note['exit']} in {describe(where)}: a " \
                     "checked function must return or raise, never end the program"
        elif returncode is not None and returncode < 0:
            number = -returncode
            try:
                name = signal.Signals(number).name
            except ValueError:  # a real-time signal, say: no name
                name = f"signal {number}"
            where = innermost_in_dump(self._crash_dump(), self.files)
            reason = f"the process running the check crashed with {name} ({_SIGNALS.get(number, 'a signal')})" + \
                (f" in {describe(where)}" if where else "")
        else:
            reason = f"the process running the check ended (exit code {returncode}) before giving a verdict: does " \
                     "your code call os._exit or end the process another way?"
        if where is not None and where["function"] == "<module>":  # every later import would end the same way
            self.broken[where["path"]] = f"importing it ended the process: {reason}"
        return Outcome(item.name, False, reason, item.hint)

    # ------------------------------------------------------------------------------------------- the child

    def _start(self) -> _Child:
        self.crash_file.unlink(missing_ok=True)
        theirs_in, ours_out = os.pipe()  # requests: this process -> child
        ours_in, theirs_out = os.pipe()  # replies: child -> this process
        env = {k: v for k, v in os.environ.items() if k != "MINITRAIN_LAB_DIR"}
        with open(self.printed_file, "ab") as printed:  # the student's prints: apart from the checklist
            process = subprocess.Popen(
                [sys.executable, "-m", "minitrain.course.worker", str(theirs_in), str(theirs_out)],
                cwd=PACKAGE.parent, env=child_environment(env), stdin=subprocess.DEVNULL, stdout=printed,
                stderr=printed, pass_fds=(theirs_in, theirs_out), start_new_session=True)
        os.close(theirs_in)
        os.close(theirs_out)
        child = _Child(process, os.fdopen(ours_out, "w", encoding="utf-8"), ours_in)
        self._child = child
        setup = {**self.setup, "memory_mb": self.limits.memory_mb, "broken": self.broken,
                 "crash_file": str(self.crash_file)}
        child.requests.write(json.dumps(setup) + "\n")
        child.requests.flush()
        message = self._receive(child, time.monotonic() + STARTUP_SECONDS)
        if not isinstance(message, dict) or "ready" not in message:
            code = self._stop()
            raise UserError(f"the checker's child process did not start (exit code {code}); it printed: "
                            f"{self.printed()[-2000:].strip()}")
        return child

    def _receive(self, child: _Child, deadline: float) -> dict | str | None:
        """The child's next message; None when it has ended, "timeout" at the deadline."""
        while b"\n" not in child.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([child.replies], [], [], min(left, WAKE_SECONDS))
            if not ready:
                continue
            chunk = os.read(child.replies, 1 << 16)
            if not chunk:
                return None
            child.buffer += chunk
        line, child.buffer = child.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:  # a line cut by the child's death: what it said is lost, the death is not
            return self._receive(child, deadline)
        if "exit" in message:
            child.exit_note = message
        return message

    def _where(self) -> dict | None:
        """Ask the child which line of the student's code it is running (None: none, or no answer in time)."""
        child = self._child
        try:
            os.kill(child.process.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return None
        deadline = time.monotonic() + ANSWER_SECONDS
        while True:
            message = self._receive(child, deadline)
            if not isinstance(message, dict):
                return None
            if "where" in message and "exit" not in message:
                return message["where"]

    def _stop(self) -> int | None:
        """Kill the child and everything it started (its process group); its exit code."""
        child, self._child = self._child, None
        if child is None:
            return None
        if child.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGKILL)
        code = child.process.wait()
        for close in (child.requests.close, lambda: os.close(child.replies)):
            with contextlib.suppress(OSError):  # the pipe to a dead child: nothing left to flush
                close()
        return code

    def _crash_dump(self) -> str:
        try:
            return self.crash_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        """End the child: closing its requests ends its loop; it is killed if it does not end in time."""
        child = self._child
        if child is None:
            return
        try:
            child.requests.close()
            child.process.wait(timeout=ANSWER_SECONDS)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._stop()


def _by_ref(value: Any) -> dict:
    """A value a check sends that is not data: one of the child's own objects, by its number."""
    if isinstance(value, Remote):
        return {"ref": object.__getattribute__(value, "_ref")}
    raise TypeError(f"the checker cannot send a {type(value).__name__} to the student's code: data only (remote.py)")
