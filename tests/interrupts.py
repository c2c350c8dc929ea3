"""Starting a command that a test will Ctrl-C (send SIGINT to), the way a terminal starts it, and interrupting it.

A suite started with `nohup` or with `&` in a script ignores SIGINT, and an ignored SIGINT is inherited: Python
then installs no KeyboardInterrupt handler. `preexec_fn=as_a_terminal_leaves_it` puts the default back.

Python runs a signal's handler in the main thread, but the kernel may hand a SIGINT sent to a process to any of
its threads (OpenBLAS starts one per core), and on a busy machine it now and then does. The command must stop at
once all the same: `interrupt(process, off_the_main_thread=True)` makes that happen every time, in a command
started with `command(..., off_the_main_thread=True)`: a thread of its own takes a SIGINT when told (SIGUSR2).
"""

from __future__ import annotations

import signal
import subprocess
import sys

_OFF_THE_MAIN_THREAD = """\
import runpy, signal, sys, threading
def take_a_sigint():
    signal.sigwait({signal.SIGUSR2})
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # handled here, in this thread
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})  # in every thread, so that only sigwait takes it
threading.Thread(target=take_a_sigint, daemon=True).start()
sys.argv[0] = "minitrain"
runpy.run_module("minitrain.cli", run_name="__main__")
"""


def command(*args: str, off_the_main_thread: bool = False) -> list[str]:
    """`minitrain ARGS` as a list for Popen."""
    start = ["-c", _OFF_THE_MAIN_THREAD] if off_the_main_thread else ["-m", "minitrain.cli"]
    return [sys.executable, *start, *args]


def as_a_terminal_leaves_it() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt(process: subprocess.Popen, *, off_the_main_thread: bool = False) -> None:
    """SIGINT to `process` (as `kill -INT` does), or handled by a thread other than its main one."""
    process.send_signal(signal.SIGUSR2 if off_the_main_thread else signal.SIGINT)
