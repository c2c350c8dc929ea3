"""A child process that dies with its parent, however the parent ends (`kill -9` included).

    die_with(parent_pid)          in the child: a watchdog thread ends the process once its parent is gone
    child_environment(env)        in the parent: `env` for a `minitrain` child that must die with this process
    die_with_parent_if_asked()    in the CLI: honour MINITRAIN_DIE_WITH (what child_environment sets)

A killed process cannot stop its children, so each child watches instead: it polls its parent's pid, which
changes (the child is re-parented) the moment the parent dies, and then ends at once. Without this an orphan
trains on, holding whatever it inherited, a sweep's caller's pipes among them (the sweep's pool workers,
`lab check`'s training runs). Polling works on every POSIX system, unlike Linux's PR_SET_PDEATHSIG.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping

PARENT_VARIABLE = "MINITRAIN_DIE_WITH"
WATCH_SECONDS = 0.2  # how often a child checks that its parent is alive


def die_with(parent: int) -> None:
    """End this process as soon as its parent is no longer `parent` (checked every WATCH_SECONDS)."""
    threading.Thread(target=_watch, args=(parent,), name="die-with-parent", daemon=True).start()


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_SECONDS)
    os._exit(1)  # the whole process, now: nothing is left to report to


def child_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with this process named as the parent a `minitrain` child must die with."""
    return {**env, PARENT_VARIABLE: str(os.getpid())}


def die_with_parent_if_asked() -> None:
    """Die with the parent MINITRAIN_DIE_WITH names (what child_environment sets): watch it when it is this
    process's parent, end now when it is already gone (killed before this child got here); a grandchild that
    inherited the variable from a living grandparent watches nobody."""
    value = os.environ.get(PARENT_VARIABLE, "")
    if value.isdigit() and (int(value) == os.getppid() or not process_alive(int(value))):
        die_with(int(value))  # a parent already gone: the watchdog ends this process at its first look


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists (another user's included)."""
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except (ProcessLookupError, OverflowError):  # gone, or a number no process can have
        return False
    except PermissionError:  # it exists, as another user's
        return True
    return True
