"""One writer per run folder: the flock-based lock, its error naming the holder, and what `kill -9` leaves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from test_resume import LONG, script, wait_for_new_checkpoint
from test_run import train_tiny, write_tiny_run

from minitrain.cli import main
from minitrain.common.errors import UserError
from minitrain.runs.run_lock import LOCK_FILE, RunLock, writer_of

HOLD = textwrap.dedent("""\
    import sys, time
    from minitrain.runs.run_lock import RunLock
    with RunLock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
    """)


def test_a_second_lock_on_the_same_folder_is_refused_naming_the_holder(tmp_path):
    with RunLock(tmp_path / "run"):
        with pytest.raises(UserError) as info:
            RunLock(tmp_path / "run").acquire()
        assert info.value.exit_code == 2
        assert str(info.value).startswith(f"{tmp_path / 'run'} is in use by another minitrain process "
                                          f"(PID {os.getpid()}); one run folder has one writer")
        assert writer_of(tmp_path / "run") == f"PID {os.getpid()}"
        assert RunLock(tmp_path / "other").acquire()  # other folders are free
    assert writer_of(tmp_path / "run") is None
    with RunLock(tmp_path / "run"):  # released: free again
        pass


def test_the_kernel_releases_the_lock_of_a_killed_process(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "run")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        assert writer_of(tmp_path / "run") == f"PID {holder.pid}"
        with pytest.raises(UserError, match=f"in use by another minitrain process \\(PID {holder.pid}\\)"):
            RunLock(tmp_path / "run").acquire()
    finally:
        holder.kill()
        holder.wait()
    assert writer_of(tmp_path / "run") is None  # no stale lock to delete by hand
    with RunLock(tmp_path / "run"):
        assert json.loads((tmp_path / "run" / LOCK_FILE).read_text())["pid"] == os.getpid()


def test_a_folder_the_lock_created_for_nothing_is_removed_again(tmp_path):
    with RunLock(tmp_path / "a" / "b"):
        assert (tmp_path / "a" / "b" / LOCK_FILE).is_file()
    assert not (tmp_path / "a").exists()  # nothing was written: no empty folders left behind
    with RunLock(tmp_path / "c"):
        (tmp_path / "c" / "manifest.json").write_text("{}")
    assert sorted(os.listdir(tmp_path / "c")) == [LOCK_FILE, "manifest.json"]


@pytest.mark.parametrize("kind", ["folder", "fifo", "symlink"])
def test_a_lock_file_that_is_not_a_file_is_one_error(tmp_path, kind):
    (tmp_path / "run").mkdir()
    lock = tmp_path / "run" / LOCK_FILE
    {"folder": lambda: lock.mkdir(), "fifo": lambda: os.mkfifo(lock),
     "symlink": lambda: lock.symlink_to(tmp_path / "elsewhere")}[kind]()
    with pytest.raises(UserError, match=f"{LOCK_FILE}") as info:
        RunLock(tmp_path / "run").acquire()
    assert info.value.exit_code == 2 and not (tmp_path / "elsewhere").exists()


@pytest.mark.slow
def test_two_writers_on_one_run_folder(tmp_path, capsys):
    config = write_tiny_run(tmp_path)
    train_tiny(config, tmp_path / "long", LONG)
    run_dir = tmp_path / "run"
    first = script(tmp_path, run_dir)
    try:
        wait_for_new_checkpoint(first, run_dir / "checkpoints", None)
        first.send_signal(signal.SIGSTOP)  # it holds the folder, however long the others take to start
        for extra in (["--resume", str(run_dir)], ["--overwrite"]):
            second = script(tmp_path, run_dir, *extra)
            _, stderr = second.communicate(timeout=120)
            assert second.returncode == 2 and stderr == (
                f"error: {run_dir} is in use by another minitrain process (PID {first.pid}); one run folder has "
                "one writer: wait for it to finish, or choose another --out-dir\n")
        assert main(["info", str(run_dir)]) == 0
        assert f"writer: PID {first.pid} is writing this run now" in capsys.readouterr().out
    finally:
        first.kill()
        first.communicate()

    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "running"  # kill -9: no say
    assert main(["info", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "writer:" not in out and ("warning: the manifest says 'running', but no process is writing this run: it "
                                     "stopped without recording why") in out and f"--resume {run_dir}" in out
    resumed = script(tmp_path, run_dir, "--resume", str(run_dir))
    _, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stderr
    assert (run_dir / "train_log.jsonl").read_bytes() == (tmp_path / "long" / "train_log.jsonl").read_bytes()
