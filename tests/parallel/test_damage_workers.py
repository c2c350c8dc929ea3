"""Worker faults, generated: a data-parallel run of 2 or 3 local workers, one worker sent SIGKILL, SIGSTOP,
SIGSEGV, SIGABRT or SIGTERM after a generated step. The run ends with one `error:` line naming the worker (and its
pid) and the step whose update was not applied (a stopped worker within runtime.data_parallel.timeout, 1 s here),
or, if the worker survives the signal, writes the bytes it would have; either way no worker process outlives the run
and its shared block is gone from /dev/shm. Conventions of tests/training/test_damage.py (derandomized in
`make test`, more under MINITRAIN_DAMAGE_EXAMPLES); each example trains, so the fixed slice is small."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_damage import STATS, count, hang_guard
from test_data_parallel import STEPS, _alive, _blocks, _config, _outputs, _train, accumulated, tiny  # noqa: F401
from test_sweep import needs_proc

from minitrain.callbacks import Callback
from minitrain.common.errors import UserError

EXAMPLES = int(os.environ.get("MINITRAIN_DAMAGE_EXAMPLES", "1"))
FUZZ = "MINITRAIN_DAMAGE_EXAMPLES" in os.environ
SIGNALS = [signal.SIGKILL, signal.SIGSTOP, signal.SIGSEGV, signal.SIGABRT, signal.SIGTERM]


class _Fault(Callback):
    """After step `at`, send `signum` to data-parallel worker `worker`, noting every worker's pid and blocks."""

    def __init__(self, at: int, worker: int, signum: int) -> None:
        super().__init__()
        self.at, self.worker, self.signum, self.pids, self.blocks, self.pid = at, worker, signum, [], set(), None

    def on_step_end(self, ctx) -> None:
        if ctx.step == self.at:
            workers = {p.name: p.pid for p in multiprocessing.active_children() if p.name.startswith("minitrain-dp")}
            self.pids, self.pid = list(workers.values()), workers[f"minitrain-dp-worker-{self.worker}"]
            self.blocks = set().union(*map(_blocks, self.pids))
            os.kill(self.pid, self.signum)


@needs_proc
@settings(max_examples=EXAMPLES, derandomize=not FUZZ, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(workers=st.sampled_from([2, 3]), at=st.integers(0, STEPS - 2), signum=st.sampled_from(SIGNALS),
       data=st.data())
def test_a_worker_fault_at_any_step_is_one_error_and_leaves_nothing_behind(tiny, request, workers, at,  # noqa: F811
                                                                          signum, data):
    worker = data.draw(st.integers(1, workers - 1), "worker")
    count("worker faults")
    name = f"fault-{workers}-{at}-{signum.name}-{worker}"
    runtime = f"{{threads: 1, data_parallel: {{workers: {workers}, timeout: 1, oversubscribe: true}}}}"
    config = _config(tiny, name, workers, runtime)
    fault, run = _Fault(at, worker, signum), tiny / name
    error = None
    with hang_guard(120, name):
        try:
            _train(config, run, callbacks=[fault], overwrite=True)
        except UserError as e:
            error = str(e)
    status = json.loads((run / "manifest.json").read_text())["status"]
    STATS["failed"] += error is not None
    if error is None:  # the worker outlived the signal (SIGTERM: the parent's to handle): the run finished, and wrote
        assert status == "completed"  # the bytes grad_accumulation `workers` writes in one process
        assert _outputs(run) == request.getfixturevalue("accumulated")[workers]
    else:
        assert "\n" not in error and status == "failed", error
        assert f"data-parallel worker {worker} (pid {fault.pid})" in error and f"step {at + 1}" in error, error
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("minitrain-dp")]
    assert not [pid for pid in fault.pids if _alive(pid)], f"workers {fault.pids} outlived the run ({error})"
    assert fault.blocks and not [b for b in fault.blocks if Path("/dev/shm", b).exists()], fault.blocks
