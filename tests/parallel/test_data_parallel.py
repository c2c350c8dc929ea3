"""Data-parallel training (minitrain/parallel/, docs/distributed.md): N workers write the same train_log.jsonl and
model file, byte for byte, as grad_accumulation N in one process (at 1 BLAS thread), on the local backend and on
Ray; a worker that dies stops the run with one error naming it and the run resumes bit for bit; no worker outlives
its run (`kill -9` of the training process, Ctrl-C); bad settings are one `error:` line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_sweep import _live, needs_proc

from minitrain import cli
from minitrain.callbacks import Callback
from minitrain.callbacks.thread_choice import MeasuredSettings, SettingChooser
from minitrain.common.compute import Setting
from minitrain.common.errors import UserError
from minitrain.common.runtime import blas_threads, get_blas_threads
from minitrain.config import load_config
from minitrain.config.run_sections import DataParallelConfig
from minitrain.course.fixtures import write_tiny_run
from minitrain.data.batch import Batch
from minitrain.loop import train_step
from minitrain.models.minigpt import MiniGPT
from minitrain.optim import AdamW
from minitrain.parallel.local import LocalWorkers
from minitrain.parallel.switch import WorkerSwitch
from minitrain.parallel.workers import start_workers
from minitrain.training import run as run_module
from minitrain.training import watchers
from minitrain.training.run import run_training

STEPS = 6  # a checkpoint at step 4 (the tiny config's save_every)


def _config(folder: Path, name: str, k: int, runtime: str = "{threads: 1}", steps: int = STEPS) -> Path:
    """The tiny config at `k` micro-batches per step and `steps` steps, with `runtime` as its runtime section."""
    path = folder / f"{name}.yaml"
    text = (folder / "config.yaml").read_text().replace("warmup_steps: 6, total_steps: 24",
                                                         f"warmup_steps: 2, total_steps: {steps}")
    path.write_text(text.replace("batch_size: 4", f"batch_size: 4\n  grad_accumulation: {k}")
                    + f"runtime: {runtime}\n")
    return path


def _train(config: Path, run: Path, **keys) -> dict:
    return run_training(load_config(config), run, progress=False, models_dir=run / "models", **keys)


def _outputs(run: Path) -> tuple[bytes, dict[str, bytes]]:
    """The run's train_log.jsonl and its model files (name: bytes)."""
    models = {p.name: p.read_bytes() for p in sorted((run / "models").glob("*.safetensors"))}
    return (run / "train_log.jsonl").read_bytes(), models


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dp")
    write_tiny_run(folder)
    return folder


@pytest.fixture(scope="module")
def accumulated(tiny) -> dict[int, tuple[bytes, dict[str, bytes]]]:
    """{k: the outputs of grad_accumulation k in one process}, for k = 2 and 3."""
    out = {}
    for k in (2, 3):
        _train(_config(tiny, f"acc{k}", k), tiny / f"acc{k}")
        out[k] = _outputs(tiny / f"acc{k}")
    return out


class _KillWorker(Callback):
    """After step `at`, SIGKILL data-parallel worker `worker` (as the OOM killer or a crash would); with `wait`,
    also wait until it is gone, so the next step finds it dead when it sends "go" (else it may still be dying)."""

    def __init__(self, at: int, worker: int, wait: bool) -> None:
        super().__init__()
        self.at, self.worker, self.wait, self.pid = at, worker, wait, None

    def on_step_end(self, ctx) -> None:
        if ctx.step == self.at:
            import multiprocessing

            (process,) = [p for p in multiprocessing.active_children()
                          if p.name == f"minitrain-dp-worker-{self.worker}"]
            self.pid = process.pid
            os.kill(process.pid, signal.SIGKILL)
            if self.wait:
                process.join()


@pytest.mark.parametrize("gone", [True, False], ids=["gone before the step", "dying"])
def test_a_killed_worker_is_one_error_and_two_workers_resumed_write_the_bytes_of_accumulation_2(tiny, accumulated,
                                                                                                gone):
    """2 workers, worker 1 killed after step 4: step 5's update is never applied, the run fails naming the
    worker, the manifest says failed, and resuming the folder (from step 4's checkpoint, 2 workers again) gives
    the bytes grad_accumulation 2 writes in one process, the rows before the kill and those after. A worker
    already gone when the step starts (its pipe broken for "go") and one still dying give the same error."""
    config = _config(tiny, "killed", 2, "{threads: 1, data_parallel: {workers: 2}}")
    run, killer = tiny / f"killed-{gone}", _KillWorker(at=4, worker=1, wait=gone)
    with pytest.raises(UserError) as info:
        _train(config, run, callbacks=[killer])
    message = str(info.value)
    assert f"data-parallel worker 1 (pid {killer.pid}) died during step 5" in message
    assert "killed by SIGKILL" in message and "step-4.safetensors" in message and "\n" not in message
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "worker 1" in manifest["error"]
    assert not any(p.name.startswith("minitrain-dp-worker") for p in __import__("multiprocessing").active_children())
    _train(config, run, resume=run)
    assert _outputs(run) == accumulated[2]
    assert json.loads((run / "manifest.json").read_text())["resumes"][-1]["step"] == 4


def test_bad_data_parallel_settings_are_one_error_line(tiny, capsys):
    for runtime, fragment in [
        ("{data_parallel: {workers: 2}}", "2 workers do not divide training.grad_accumulation 3"),
        ("{data_parallel: {workers: 0}}", "runtime.data_parallel.workers: must be greater than or equal to 1"),
        ("{data_parallel: {workers: 3, backend: mpi}}", "runtime.data_parallel.backend: must be one of local, ray"),
        ("{data_parallel: {workers: 3, address: auto}}", "address is the Ray cluster's: it needs backend ray"),
        ("{threads: measure, data_parallel: {workers: 3, backend: ray}}", "runtime.threads measure chooses between"),
    ]:
        assert cli.main(["validate", str(_config(tiny, "bad", 3, runtime))]) == 2
        err = capsys.readouterr().err
        assert fragment in err and err.startswith("error:") and "Traceback" not in err
    dropout = _config(tiny, "bad", 3, "{data_parallel: {workers: 3}}")
    dropout.write_text(dropout.read_text().replace("max_seq_len: 32}", "max_seq_len: 32, dropout: 0.1}"))
    assert cli.main(["validate", str(dropout)]) == 2
    assert "data-parallel workers need model.dropout 0 (got 0.1)" in capsys.readouterr().err
    # train --address names the Ray cluster (backend ray); the workers must still be given
    assert cli.main(["train", str(_config(tiny, "bad", 3)), "--address", "auto", "--dry-run"]) == 2
    assert "runtime.data_parallel.workers: required key is missing" in capsys.readouterr().err


def _long_run(tiny: Path, name: str, runtime: str = "{threads: 1, data_parallel: {workers: 2}}") -> subprocess.Popen:
    """`minitrain train` of a run too long to finish, in its own process group, once its 2 workers run steps."""
    config = _config(tiny, name, 2, runtime)
    config.write_text(config.read_text().replace("val_every: 5", "val_every: 100000")
                      .replace(f"total_steps: {STEPS}", "total_steps: 100000"))
    process = subprocess.Popen([sys.executable, "-m", "minitrain.cli", "train", str(config), "--out-dir",
                                str(tiny / name)], start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    log, deadline = tiny / name / "train_log.jsonl", time.monotonic() + 120
    while not (log.is_file() and log.read_text().count("\n") >= 2 and len(_workers_of(process.pid)) == 1):
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()
        time.sleep(0.05)
    return process


def _blocks(pid: int) -> set[str]:
    """The /dev/shm files process `pid` maps (the name, without the " (deleted)" of an unlinked one)."""
    return {line.split("/dev/shm/")[1].split()[0] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
            if "/dev/shm/" in line}


@pytest.mark.slow
@needs_proc
@pytest.mark.parametrize("group", [False, True], ids=["the training process", "its process group"])
def test_kill_9_of_the_training_process_takes_its_workers_with_it(tiny, group):
    """The training process killed mid-run cannot stop its workers: they notice it is gone (common/lifeline.py)
    and end within seconds, leaving no orphan. The shared block's name was removed once every worker had it
    mapped, so no file is left in /dev/shm, even when `kill -9` takes the whole group (the resource tracker
    too, which alone used to remove it)."""
    process = _long_run(tiny, f"long-{group}")
    try:
        workers = _workers_of(process.pid)
        trackers = [child for child in _live("ppid", process.pid) if child not in workers]
        blocks = _blocks(workers[0])
        assert len(blocks) == 1 and len(trackers) == 1, (blocks, trackers)
        (os.killpg if group else os.kill)(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in workers + trackers):
            assert time.monotonic() < deadline, f"workers {workers} or tracker {trackers} outlived their run"
            time.sleep(0.05)
        assert not any(Path("/dev/shm", block).exists() for block in blocks), f"{blocks} left in /dev/shm"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def _workers_of(pid: int) -> list[int]:
    """The live multiprocessing children of `pid` (not its resource tracker)."""
    return [child for child in _live("ppid", pid) if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class _CtrlC(Callback):
    """After step `at`, SIGINT to the workers and the training process: what a terminal's Ctrl-C sends the group."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.workers = at, []

    def on_step_end(self, ctx) -> None:
        if ctx.step == self.at:
            import multiprocessing

            self.workers = [p for p in multiprocessing.active_children() if p.name.startswith("minitrain-dp-worker")]
            for process in self.workers:
                os.kill(process.pid, signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)


def test_three_workers_then_ctrl_c_then_one_process_write_the_bytes_of_accumulation_3(tiny, accumulated):
    """3 workers (the training process and 2 processes), Ctrl-C after step 2: the worker processes ignore the SIGINT
    (a KeyboardInterrupt would end them mid-step), the training process finishes the step, saves a checkpoint and
    stops them (each leaves with exit code 0). Resumed without workers (runtime is not hashed: a resume may drop
    them), the run then holds, byte for byte, what grad_accumulation 3 writes in one process: the 3 workers' rows
    and state before the interrupt were the same bytes."""
    config = _config(tiny, "local3", 3, "{threads: 1, data_parallel: {workers: 3, oversubscribe: true}}")
    run, ctrl_c = tiny / "local3", _CtrlC(at=2)
    with pytest.raises(UserError, match="interrupted"):
        _train(config, run, callbacks=[ctrl_c])
    assert len(ctrl_c.workers) == 2 and [p.exitcode for p in ctrl_c.workers] == [0, 0]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["steps_done"] == 3
    assert manifest["config"]["runtime"]["data_parallel"]["workers"] == 3
    _train(_config(tiny, "local3-alone", 3), run, resume=run)
    log, models = _outputs(run)
    assert len(models) == 1 and log.count(b"\n") > STEPS // 2
    assert (log, models) == accumulated[3]


@pytest.mark.slow
def test_two_ray_workers_write_the_bytes_of_the_local_backend(tiny, accumulated):
    """Ray actors on a local Ray instance, gradients through the object store: the bytes of accumulation 2, which
    the local backend's test shows its workers give."""
    pytest.importorskip("ray")
    run = tiny / "ray2"
    _train(_config(tiny, "ray2", 2, "{threads: 1, data_parallel: {workers: 2, backend: ray}}"), run)
    assert _outputs(run) == accumulated[2]


def _gone(pid: int) -> bool:
    """True when no process (zombies included: a reaped worker has no /proc entry) has this pid."""
    return not Path(f"/proc/{pid}").exists()


@needs_proc
def test_the_measured_choice_starts_and_stops_workers_mid_run_with_the_bytes_of_one_thread(tiny, monkeypatch):
    """runtime.threads measure with data_parallel: workers are a candidate. Made-up step times (2 workers fast, then
    slow: a core taken, then one process slower again) send the choice to the workers and to one process twice;
    the pool is started once, kept at the first one-process decision and stopped at the second, mid-run
    (processes reaped, shared block removed). The candidates here are the 1-thread settings only, so the run writes
    the bytes of grad_accumulation 2 at 1 thread."""
    one, two_workers = Setting(1), Setting(1, workers=2)
    tables = [{one: 5.0, two_workers: 2.0}, {one: 5.0, two_workers: 9.0}, {one: 8.0, two_workers: 12.0}]
    applied: list[tuple[Setting, bool]] = []
    switches: list[WorkerSwitch] = []
    stopped_mid_run: list[bool] = []

    class Switch(WorkerSwitch):  # stopped after 2 one-process decisions in a row (the default 3 needs a longer run)
        def __init__(self, *args, **keys) -> None:
            super().__init__(*args, stop_after=2, **keys)
            switches.append(self)

        def apply(self, setting: Setting, final: bool) -> None:
            super().apply(setting, final)
            applied.append((setting, final))
            if final and setting.workers == 1:
                stopped_mid_run.append(self.pool is None and all(map(_gone, self.started[-1][0])))

    class Chooser(SettingChooser):  # short blocks and window, so the tiny run holds two decisions
        def __init__(self, candidates, **keys) -> None:
            super().__init__(candidates, trial_steps=2, rounds=1, window=3, **keys)

    class Timed(MeasuredSettings):  # the clock the choice reads: each step takes its setting's made-up time
        def __init__(self, chooser: SettingChooser) -> None:
            self.now = 0.0
            super().__init__(chooser, clock=self.tick)

        def tick(self) -> float:
            self.now += tables[min(len(self.chooser.decisions), 2)][applied[-1][0]] / 1e3
            return self.now

    pool_steps = []
    gradients = LocalWorkers.gradients
    monkeypatch.setattr(LocalWorkers, "gradients", lambda self, *a: pool_steps.append(1) or gradients(self, *a))
    monkeypatch.setattr(run_module, "WorkerSwitch", Switch)
    monkeypatch.setattr(watchers, "thread_settings", lambda: [one])
    monkeypatch.setattr(watchers, "SettingChooser", Chooser)
    monkeypatch.setattr(watchers, "MeasuredSettings", Timed)
    runtime = "{threads: measure, data_parallel: {workers: 2}}"
    _train(_config(tiny, "measured", 2, runtime, steps=30), tiny / "measured")
    _train(_config(tiny, "one-thread", 2, steps=30), tiny / "one-thread")

    (switch,) = switches
    assert [s for s, final in applied if final] == [two_workers, one, one]
    assert stopped_mid_run == [False, True] and len(switch.started) == 1 and switch.pool is None
    assert 5 <= len(pool_steps) < 30  # the workers computed the steps of their blocks and watch, not all of them
    (pids, block), = switch.started
    assert len(pids) == 1 and all(map(_gone, pids)) and not Path("/dev/shm", block).exists()
    log = (tiny / "measured" / "logs" / "train.log").read_text()
    assert "using 2 workers × 1 thread" in log and log.rindex("using 1 thread") > log.index("using 2 workers")
    manifest = json.loads((tiny / "measured" / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["steps_done"] == 30
    assert (tiny / "measured" / "results.json").exists()
    assert _outputs(tiny / "measured") == _outputs(tiny / "one-thread")


@pytest.mark.parametrize("n", [1, 2, 4])
def test_worker_0_is_the_training_process_and_the_step_is_train_steps_bytes(n):
    """LocalWorkers over 4 micro-batches of different lengths: the training process computes worker 0's share
    itself, so n workers hold n − 1 processes (none for one worker), and the step's loss, gradient norm and
    clipped gradient are train_step's, bit for bit, with the process at 1 BLAS thread afterwards as before."""
    rng = np.random.default_rng(n)
    batches = []
    for length in (8, 5, 7, 3):
        ids = rng.integers(0, 16, size=(2, 8))
        pad = np.arange(8) < length
        batches.append(Batch(ids, np.roll(ids, -1, axis=1), np.broadcast_to(pad, (2, 8)).copy(),
                             np.broadcast_to(pad, (2, 8)) & (rng.random((2, 8)) < 0.7)))
    alone, spread = (MiniGPT(n_layer=1, n_head=2, d_model=16, d_ff=32, vocab_size=16, max_seq_len=8, rng=0)
                     for _ in "ab")
    with blas_threads(1):  # the workers' count
        expected = train_step(alone, AdamW(alone.trainable_parameters(), buffer=alone.pack_parameters()), batches,
                              clip_norm=0.5)
    spread.pack_parameters()
    threads = get_blas_threads()
    with start_workers(DataParallelConfig(workers=n), spread, len(batches), 2, 8) as workers:
        assert len(workers.pids) == n - 1 and os.getpid() not in workers.pids
        got = workers.gradients(spread, batches, 0.5)
    assert get_blas_threads() == threads
    assert got == expected
    assert spread.buffer.grad.tobytes() == alone.buffer.grad.tobytes()


def test_local_workers_beyond_the_cores_are_refused_unless_oversubscribed(tiny, capsys):
    """1000 local workers would be 999 processes, each holding a model (about 200 GB at the course's size): refused on
    this machine's usable cores with one problem naming the key; oversubscribe lets them through, and Ray's
    workers (a cluster's CPUs, which Ray itself counts) are not bounded here."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert cores < 1000
    assert cli.main(["validate", str(_config(tiny, "many", 1000, "{data_parallel: {workers: 1000}}"))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err and err.count("error:") == 1
    assert f"runtime.data_parallel.workers: 1000 local workers on {cores} usable cores" in err
    for runtime in ("{data_parallel: {workers: 1000, oversubscribe: true}}",
                    "{data_parallel: {workers: 1000, backend: ray}}"):  # (1000 × 4 lines: more than the data)
        cli.main(["validate", str(_config(tiny, "many", 1000, runtime))])
        assert "usable cores" not in capsys.readouterr().err
    assert cli.main(["validate", str(_config(tiny, "many", cores, f"{{data_parallel: {{workers: {cores}}}}}"))]) == 0


class _StopWorker(Callback):
    """After step `at`, SIGSTOP data-parallel worker 1 (as a debugger, a `kill -STOP` or a swapped-out machine
    would), noting its pid and the /dev/shm blocks it maps; with `sigint_after`, SIGINT this process that many
    seconds later, while the next step waits for the stopped worker."""

    def __init__(self, at: int, sigint_after: float | None = None) -> None:
        super().__init__()
        self.at, self.sigint_after, self.pid, self.blocks = at, sigint_after, None, set()

    def on_step_end(self, ctx) -> None:
        if ctx.step == self.at:
            import multiprocessing
            import threading

            (process,) = [p for p in multiprocessing.active_children() if p.name == "minitrain-dp-worker-1"]
            self.pid, self.blocks = process.pid, _blocks(process.pid)
            os.kill(process.pid, signal.SIGSTOP)
            if self.sigint_after is not None:
                threading.Timer(self.sigint_after, os.kill, (os.getpid(), signal.SIGINT)).start()


def _leftovers(stopper: _StopWorker) -> None:
    """No worker process outlives the run and no shared block stays in /dev/shm."""
    import multiprocessing

    assert not [p for p in multiprocessing.active_children() if p.name.startswith("minitrain-dp-worker")]
    assert not _alive(stopper.pid), f"worker {stopper.pid} outlived its run"
    assert len(stopper.blocks) == 1 and not any(Path("/dev/shm", b).exists() for b in stopper.blocks)


@needs_proc
def test_a_stopped_worker_is_one_error_naming_it_and_the_step_within_the_timeout(tiny):
    """Worker 1 SIGSTOPped after step 2: step 3 waits for it no longer than runtime.data_parallel.timeout (1 s here;
    the default, 120 s, is far above any step of the course's models), then the run fails with one line naming
    the worker and the step, and leaves no process and no shared block."""
    config = _config(tiny, "stopped", 2, "{threads: 1, data_parallel: {workers: 2, timeout: 1}}")
    stopper = _StopWorker(at=2)
    start = time.monotonic()
    with pytest.raises(UserError) as info:
        _train(config, tiny / "stopped", callbacks=[stopper])
    message = str(info.value)
    assert (f"data-parallel worker 1 (pid {stopper.pid}) gave no answer within runtime.data_parallel.timeout (1 s) "
            "during step 3 (its update was not applied): stopped or stuck") in message
    assert "\n" not in message and time.monotonic() - start < 60
    assert json.loads((tiny / "stopped" / "manifest.json").read_text())["status"] == "failed"
    _leftovers(stopper)


@needs_proc
def test_ctrl_c_while_a_worker_is_stopped_interrupts_the_run(tiny):
    """Worker 1 SIGSTOPped after step 2, then SIGINT while step 3 waits for it (the default timeout, 120 s, is far
    off): the wait wakes, gives the step local.STOP_SECONDS to finish, then abandons it as a second Ctrl-C
    would: the run ends interrupted (the CLI's `error: interrupted`, exit 130), its last checkpoint named in
    the manifest, and leaves no process and no shared block."""
    config = _config(tiny, "stopped-ctrl-c", 2, "{threads: 1, data_parallel: {workers: 2}}")
    stopper = _StopWorker(at=2, sigint_after=0.5)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        _train(config, tiny / "stopped-ctrl-c", callbacks=[stopper])
    assert time.monotonic() - start < 60
    assert json.loads((tiny / "stopped-ctrl-c" / "manifest.json").read_text())["status"] == "interrupted"
    _leftovers(stopper)


@needs_proc
def test_a_new_block_first_removes_the_blocks_of_dead_owners():
    """An owner killed while its workers start (before the name is removed) leaves its block; the next start
    removes it, and leaves a living owner's alone."""
    from minitrain.parallel.shared import PREFIX, Layout, SharedBlock

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left, living = Path("/dev/shm", f"{PREFIX}{int(dead.stdout)}-0badcafe"), Path("/dev/shm", f"{PREFIX}1-0badcafe")
    left.write_bytes(b"x"), living.write_bytes(b"x")
    try:
        block = SharedBlock.create(Layout(1, 1, 1, 1, 1, "float32"))
        assert block.name.startswith(f"{PREFIX}{os.getpid()}-") and not left.exists() and living.exists()
        block.close()
        assert not Path("/dev/shm", block.name).exists()
    finally:
        left.unlink(missing_ok=True), living.unlink(missing_ok=True)
