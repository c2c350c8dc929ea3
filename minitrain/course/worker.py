"""The child process that runs a lab's checks on a student's code (the parent is minitrain/course/sandbox.py).

    python -m minitrain.course.worker REQUESTS_FD REPLIES_FD

The student's code runs here and never in the checker that prints the verdicts: whatever that code does (loop
forever, fill the memory, call `sys.exit` or `os._exit`, crash the interpreter), the parent stays in charge. A
check marked `here` sends only its calls into the student's code here, and decides in the parent; any other
check still runs whole here, its verdict within reach of the code it grades (a lab moves to `here` when its
checks send only data, or objects built here by `lab.library`: every lab's, 00 to 09, do).
The parent writes one JSON line per request on REQUESTS_FD: first the setup (lab, workspace, run folder,
scratch folder, memory limit, files known not to import), then one `{"check": NAME}` per item. This process
answers on REPLIES_FD, one JSON line each:

    {"ready": true}                          set up; waiting for items
    {"started": NAME}                        the item's clock starts now (the parent times it)
    {"outcome": {name, passed, reason, hint}}

A check that runs in the parent (`here`, remote.py) sends `{"op": OP, "args": [...]}` instead, one per call
into the student's code (OP: module, getattr, call, list; library: a module of the library here, whose
objects the check hands to the student's code), and gets back one of

    {"value": V}                             what the code returned, as data (remote.py)
    {"raised": TYPE, "text": LINE, "classes": [...]}   it raised (a SystemExit too, with its "code");
                                             {"stub": TEXT} for NotImplementedError
    {"failed": REASON, "hint": H}            the file cannot be loaded (labs.LabUnderTest.module)
    {"lost": REASON}                         the memory limit
    {"where": W}                             asked by SIGUSR1 (a time limit, Ctrl-C): the student's line running
    {"exit": "os._exit(0)", "where": W}      the student's code is ending this process

W is `{"path", "line", "function"}` of the innermost frame in a lab file, or null when no lab file's code is
running. A fatal signal (a segmentation fault) leaves faulthandler's traceback in the setup's `crash_file`,
which the parent reads the same way. The memory limit is RLIMIT_DATA (heap and private mappings), so an
allocation past it raises MemoryError here; RLIMIT_AS would also count address space that numba and the BLAS
threads only reserve, which grows with the number of cores.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import json
import os
import resource
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from minitrain.common.lifeline import die_with_parent_if_asked
from minitrain.course.blame import describe, innermost, innermost_in_traceback, lab_files
from minitrain.course.checks import Check, Failed, Outcome, run_one
from minitrain.course.labs import LabUnderTest, checklist, get_lab
from minitrain.course.remote import class_names, decode, encode


class _Replies:
    """The replies pipe: one JSON object per line, written at once (the parent may kill this process next).
    Unbuffered `os.write`, because the SIGUSR1 handler sends too, and a buffered stream refuses a reentrant
    write."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, **message: Any) -> None:
        data = (json.dumps(message) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self.fd, data):]


def _way_out(error: MemoryError | SystemExit, memory_mb: int, files: dict[str, str]) -> str:
    """The reason for the two ways out that run_one leaves to us: the memory limit and SystemExit."""
    where = innermost_in_traceback(error, files)
    if isinstance(error, MemoryError):
        grows = f" — look for a list or an array that grows without end in {describe(where)}" if where else \
            "; if your machine has the memory, give it more with `minitrain lab check --memory-mb MB`"
        return f"used more than {memory_mb} MB{grows}"
    called = f"your code called exit (SystemExit({error.code!r}))" + (f" in {describe(where)}" if where else "")
    return f"{called}: a checked function must return or raise, never end the program"


def _verdict(item: Check, subject: LabUnderTest, memory_mb: int, files: dict[str, str]) -> Outcome:
    """run_one's outcome, or the way out it left to us."""
    try:
        return run_one(item, subject)
    except (MemoryError, SystemExit) as error:
        return Outcome(item.name, False, _way_out(error, memory_mb, files), item.hint)


def _serve(request: dict, subject: LabUnderTest, table: list, memory_mb: int, files: dict[str, str]) -> dict:
    """The reply to one call from a check that runs in the parent (remote.py); `table` holds what was sent
    by number."""

    def keep(value: object) -> dict:
        table.append(value)
        return {"ref": len(table) - 1, "type": type(value).__qualname__}

    try:
        head, *args = decode(request["args"], lambda data: table[data["ref"]])
        if request["op"] == "module":
            value = subject.module(head)
        elif request["op"] == "library":  # the library's module, whose objects the check gives the student's code
            value = importlib.import_module(head)
        else:
            target = table[head]
            value = {"getattr": lambda: getattr(target, args[0]), "call": lambda: target(*args[0], **args[1]),
                     "list": lambda: list(target)}[request["op"]]()
        return {"value": encode(value, keep)}
    except Failed as failed:
        return {"failed": str(failed), "hint": failed.hint}
    except NotImplementedError as stub:
        return {"stub": str(stub)}
    except MemoryError as error:
        return {"lost": _way_out(error, memory_mb, files)}
    except SystemExit as error:  # raised like any exception: parse_args may stop with a usage error
        code = error.code if error.code is None or type(error.code) in (int, str) else repr(error.code)
        return {"raised": "SystemExit", "text": _way_out(error, memory_mb, files),
                "classes": class_names(SystemExit), "code": code}
    except Exception as error:  # the student's code raised: the parent words it as run_one does
        frame = traceback.extract_tb(error.__traceback__)[-1]
        return {"raised": type(error).__name__, "classes": class_names(type(error)),
                "text": f"{type(error).__name__}: {error} at {frame.filename}:{frame.lineno}"}


def _limit_memory(megabytes: int) -> None:
    """RLIMIT_DATA at `megabytes` (never above the hard limit). A system that refuses it (macOS enforces no
    RLIMIT_DATA) runs the checks with the time limit alone."""
    limit = megabytes << 20
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def main(argv: list[str]) -> int:
    die_with_parent_if_asked()  # the parent killed (kill -9 included): this process and the student's code end
    requests = os.fdopen(int(argv[0]), "r", encoding="utf-8")
    replies = _Replies(int(argv[1]))
    setup = json.loads(requests.readline())
    workspace = Path(setup["workspace"]) if setup["workspace"] else None
    files = lab_files(setup["lab"], workspace)
    crash_file = open(setup["crash_file"], "w", encoding="utf-8")  # noqa: SIM115 — open until this process ends
    faulthandler.enable(file=crash_file)  # a segfault in the student's code: its traceback, for the parent
    signal.signal(signal.SIGUSR1, lambda signum, frame: replies.send(where=innermost(frame, files)))
    real_exit = os._exit

    def reporting_exit(code: int) -> None:  # os._exit ends the process at once: say where from, first
        where = innermost(sys._getframe(1), files)
        if where is not None:
            replies.send(exit=f"os._exit({code!r})", where=where)
        real_exit(code)

    os._exit = reporting_exit
    _limit_memory(setup["memory_mb"])
    subject = LabUnderTest(get_lab(setup["lab"]), workspace, Path(setup["run_dir"]) if setup["run_dir"] else None,
                           shown=setup["shown"], broken=setup["broken"], _scratch=Path(setup["scratch"]))
    checks = {item.name: item for item in checklist(setup["lab"]).checks}
    replies.send(ready=True)
    table: list = []
    for line in requests:
        request = json.loads(line)
        if "op" in request:
            replies.send(**_serve(request, subject, table, setup["memory_mb"], files))
            continue
        item = checks[request["check"]]
        replies.send(started=item.name)
        outcome = _verdict(item, subject, setup["memory_mb"], files)
        replies.send(outcome=outcome.__dict__)
    return 0  # the parent closed the requests: grading is over


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
