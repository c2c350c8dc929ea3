"""`lab check` cannot hang or be fooled (minitrain/course/sandbox.py, worker.py): a student's code that never
returns, fills the memory, exits or crashes the interpreter is a ✗ with its reason naming the function, the other
items still run, and Ctrl-C prints the items done and the function that was running.

The bugs are the ones students wrote (issue 28): lab 00's EvalBatcher without `start += B`, a `while ...: pass`
in lab 03's moving_average, `raise SystemExit(0)`, `os._exit(0)`, `ctypes.string_at(0)`, `while True: pass` at
import; then a generated set, one lab function at random replaced by one of these misbehaviours.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interrupts import as_a_terminal_leaves_it, command, interrupt
from test_course_i18n import english_left
from test_course_labs import workspace_with_reference

from minitrain import seam
from minitrain.course.labs import checklist, grade, start
from minitrain.course.sandbox import Limits

REPO = Path(__file__).resolve().parents[2]
CURVES, BATCHER = "minitrain/monitor/curves.py", "minitrain/data/batcher.py"
LIMITS = Limits(timeout=5, memory_mb=700)  # the items these tests run take milliseconds, the child ~300 MB
MOVING_AVERAGE = "moving_average is the trailing mean of the last `window` values"
NO_ONSET = "overfitting_onset is None when val ended within the tolerance of its best"  # never calls moving_average
ONSET = "overfitting_onset names the step of the lowest val PPL when val ended clearly above it"


def by_name(outcomes) -> dict:
    return {o.name: o for o in outcomes}


def in_moving_average(code: str) -> tuple:
    """A lab 03 bug: `code` (indented lines) at the start of moving_average's loop set-up."""
    return (CURVES, ("    out = []\n", "    out = []\n" + code))


def line_of(path: Path, text: str) -> int:
    return path.read_text(encoding="utf-8").splitlines().index(text) + 1


def test_a_loop_that_never_ends_fails_each_item_that_reaches_it_and_the_others_still_run(tmp_path):
    ws = workspace_with_reference("03", tmp_path / "ws", in_moving_average("    while values:\n        pass\n"))
    _, outcomes = grade("03", ws, limits=LIMITS, only=lambda name: name in (MOVING_AVERAGE, ONSET, NO_ONSET))
    got = by_name(outcomes)
    line = line_of(ws / CURVES, "        pass") - 1  # the `while` line or its body: both are the loop
    for name in (MOVING_AVERAGE, ONSET):  # onset's check calls train_val_gap, which smooths with moving_average
        assert not got[name].passed
        assert re.fullmatch(pattern("took longer than 5 s — look for a loop that never ends in {where}",
                                    "moving_average", CURVES, [line, line + 1]), got[name].reason), got[name].reason
        assert got[name].hint == next(c.hint for c in checklist("03").checks if c.name == name)
    assert got[NO_ONSET].passed, got[NO_ONSET].reason


def test_an_eval_batcher_that_never_advances_is_stopped_by_the_memory_limit(tmp_path):
    """Lab 00's EvalBatcher with the `start += B` forgotten: `list(batcher)` grows without end (23 GB before
    the kernel killed the checker, in the issue); here it stops at the limit and the items before it pass."""
    bug = (BATCHER, ("        for start in range(0, self.num_records, self.batch_size):\n",
                     "        start = 0\n        while start < self.num_records:\n"))
    ws = workspace_with_reference("00", tmp_path / "ws", bug)
    eval_pass = "EvalBatcher: one pass in file order, the last batch smaller, every record once"
    names = [c.name for c in checklist("00").checks]
    limits = Limits(timeout=600, memory_mb=600)  # the time limit far away: the memory limit is what stops it
    _, outcomes = grade("00", ws, limits=limits, only=lambda name: name != names[-1])  # not its training run
    got = by_name(outcomes)
    yield_line = line_of(ws / BATCHER, "            yield take(self.data, slice(start, start + self.batch_size))")
    assert got[eval_pass].reason == ("used more than 600 MB — look for a list or an array that grows without end "
                                     f"in EvalBatcher.__iter__ (minitrain/data/batcher.py, line {yield_line})")
    assert [o.name for o in outcomes if not o.passed] == [eval_pass], [o.reason for o in outcomes if not o.passed]


@pytest.mark.parametrize(("code", "reason"), [
    ("    raise SystemExit(0)\n", r"your code called exit \(SystemExit\(0\)\) in moving_average "
                                  r"\(minitrain/monitor/curves\.py, line {line}\): a checked function must return or "
                                  r"raise, never end the program"),
    ("    import os\n    os._exit(0)\n", r"your code ended the checker's process with os\._exit\(0\) in "
                                         r"moving_average \(minitrain/monitor/curves\.py, line {line}\): a checked "
                                         r"function must return or raise, never end the program"),
    ("    import ctypes\n    ctypes.string_at(0)\n", r"the process running the check crashed with SIGSEGV \(a "
                                                     r"segmentation fault: memory read or written where no object "
                                                     r"lives\) in moving_average \(minitrain/monitor/curves\.py, "
                                                     r"line {line}\)"),
], ids=["SystemExit", "os._exit", "segfault"])
def test_an_exit_or_a_crash_in_the_students_code_is_a_failure_never_a_pass(code, reason, tmp_path):
    ws = workspace_with_reference("03", tmp_path / "ws", in_moving_average(code))
    _, outcomes = grade("03", ws, limits=LIMITS, only=lambda name: name in (MOVING_AVERAGE, NO_ONSET))
    got = by_name(outcomes)
    line = line_of(ws / CURVES, code.splitlines()[-1])
    assert re.fullmatch(reason.format(line=line), got[MOVING_AVERAGE].reason), got[MOVING_AVERAGE].reason
    assert got[NO_ONSET].passed, got[NO_ONSET].reason  # in a fresh child process


def test_a_loop_at_import_time_waits_out_the_limit_once(tmp_path):
    """`while True: pass` at the top of the file: the first item's import hangs and is stopped; the later items
    fail at once saying why, instead of each waiting for the time limit again."""
    bug = (CURVES, ("from __future__ import annotations\n", "from __future__ import annotations\n\nwhile True:\n"
                                                             "    pass\n"))
    ws = workspace_with_reference("03", tmp_path / "ws", bug)
    _, outcomes = grade("03", ws, limits=LIMITS, only=lambda name: not name.startswith("run folder"))
    line = line_of(ws / CURVES, "while True:")
    place = (re.escape("the code at the top level of minitrain/monitor/curves.py (line ") + f"({line}|{line + 1})"
             + re.escape("), which runs when it is imported"))
    first, *others = outcomes
    assert re.fullmatch(f"took longer than 5 s — look for a loop that never ends in {place}", first.reason), \
        first.reason
    assert len(others) == 5
    for outcome in others:
        assert re.fullmatch(f"{re.escape(str(ws / CURVES))} does not import: it did not finish importing within 5 s "
                            f"— look for a loop that never ends in {place}", outcome.reason), outcome.reason
        assert not english_left("03", outcome.reason), outcome.reason  # and in Spanish, all of it


def lab_check(*args: str, off_the_main_thread: bool = False) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != seam.LAB_DIR_VARIABLE}
    return subprocess.Popen(command("lab", "check", *args, off_the_main_thread=off_the_main_thread), cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_a_terminal_leaves_it)


def test_the_command_prints_every_item_and_exits_1_when_the_students_code_exits(tmp_path):
    ws = workspace_with_reference("03", tmp_path / "ws", in_moving_average("    raise SystemExit(0)\n"))
    out, err = lab_check("03", str(ws), "--timeout", "30", "--memory-mb", "1000").communicate(timeout=600)
    lines = out.splitlines()
    assert lines[-1] == "1 of 8 passed.", out
    assert f"  ✗ {MOVING_AVERAGE}" in lines and f"  ✓ {NO_ONSET}" in lines
    assert lines[lines.index(f"  ✗ {MOVING_AVERAGE}") + 1].startswith("      your code called exit (SystemExit(0))")
    assert err == ""


def test_the_limits_are_refused_when_they_make_no_sense(tmp_path):
    done = lab_check("03", str(tmp_path), "--timeout", "0")
    out, err = done.communicate(timeout=300)
    assert done.returncode == 2 and out == ""
    assert err == "error: --timeout must be above 0 and --memory-mb at least 1; got 0 and 2048\n"


@pytest.mark.parametrize("off_the_main_thread", [False, True], ids=["main thread", "another thread"])
def test_ctrl_c_prints_the_items_done_and_the_function_that_was_running(off_the_main_thread, tmp_path):
    """SIGINT once the student's overfitting_onset is running (it says so by writing its pid to a file, then
    waits forever): the four items before it were printed as each was done, the interrupted one follows, and the
    child process is gone. Also when the SIGINT is handled by a thread other than the main one, which leaves the
    main thread asleep waiting for the child (it once waited there for the item's 600 s)."""
    marker = tmp_path / "running"
    code = ("    import os, time\n"
            f"    open({str(marker)!r} + '.tmp', 'w').write(str(os.getpid()))\n"
            f"    os.replace({str(marker)!r} + '.tmp', {str(marker)!r})\n"
            "    while True:\n        time.sleep(0.05)\n")
    ws = workspace_with_reference("03", tmp_path / "ws", (CURVES, ("    if not gaps:\n        return None\n",
                                                                   code + "    if not gaps:\n        return None\n")))
    checker = lab_check("03", str(ws), "--timeout", "600", off_the_main_thread=off_the_main_thread)
    deadline = time.monotonic() + 600  # a guard against a hang, not a measure of speed
    while not marker.exists() and checker.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), checker.communicate()
    worker = int(marker.read_text())
    early = [checker.stdout.readline() for _ in range(6)]  # printed while the checker still runs
    interrupt(checker, off_the_main_thread=off_the_main_thread)
    out, err = checker.communicate(timeout=120)
    out = "".join(early) + out
    line = line_of(ws / CURVES, "        time.sleep(0.05)")
    running = f"your overfitting_onset (minitrain/monitor/curves.py, line {line}) was running"
    assert checker.returncode == 130
    names = [c.name for c in checklist("03").checks]
    lines = out.splitlines()
    assert [f"  ✓ {name}" for name in names[:4]] == lines[2:6], out
    assert lines[6:8] == [f"  ✗ {ONSET}", f"      interrupted (Ctrl-C) while {running}"], out
    assert NO_ONSET not in out
    assert err == f"error: interrupted while checking {ONSET!r}: {running}\n"
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)


# ------------------------------------------------------------------------------------------- a generated set

# The labs' module-level functions (lab 01's take a numba compile per fresh process: left out for time).
FUNCTIONS = [("00", BATCHER, "encode_split"), ("02", "minitrain/checkpoint.py", "save_checkpoint"),
             ("02", "minitrain/checkpoint.py", "load_checkpoint"), ("03", CURVES, "moving_average"),
             ("03", CURVES, "train_val_gap"), ("03", CURVES, "overfitting_onset"),
             ("04", "minitrain/monitor/early_stopping.py", "is_better"),
             ("05", "minitrain/quant/grid.py", "scale_and_zero"), ("05", "minitrain/quant/grid.py", "quantize_units"),
             ("05", "minitrain/quant/grid.py", "dequantize_units")]
# Items that train a run of their own (seconds each) or read a run folder: not run here.
TRAINS = ("a short training run works with this batcher",
          "a run stopped after 12 steps and resumed ends byte-identical to one that never stopped")


def quick(name: str) -> bool:
    return not name.startswith("run folder") and name not in TRAINS


# misbehaviour -> (its code, the reason it must give: {where} is "NAME (PATH, line N)")
MISBEHAVIOURS = {
    "loop": ("while True:\n    pass", "took longer than 5 s — look for a loop that never ends in {where}"),
    "memory": ("hog = []\nwhile True:\n    hog.append(bytearray(1 << 20))",
               "used more than 700 MB — look for a list or an array that grows without end in {where}"),
    "SystemExit": ("raise SystemExit(3)", "your code called exit (SystemExit(3)) in {where}: a checked function "
                   "must return or raise, never end the program"),
    "os._exit": ("os._exit(0)", "your code ended the checker's process with os._exit(0) in {where}: a checked "
                 "function must return or raise, never end the program"),
    "segfault": ("ctypes.string_at(0)", "the process running the check crashed with SIGSEGV (a segmentation "
                 "fault: memory read or written where no object lives) in {where}"),
}


def misbehave_once(lab_file: Path, name: str, code: str, flag: Path) -> list[int]:
    """Replace `name` in `lab_file` by a function that runs `code` the first time any process calls it (the flag
    file says it did), and otherwise calls the original; the line numbers of `code` in the file."""
    text = lab_file.read_text(encoding="utf-8").rstrip("\n")
    wrapper = [f"_original_{name} = {name}", "", "", f"def {name}(*args, **kwargs):", "    import ctypes, os",
               "", f"    if not os.path.exists({str(flag)!r}):", f"        open({str(flag)!r}, 'w').close()"]
    first = len(text.splitlines()) + 3 + len(wrapper)
    wrapper += [f"        {line}" for line in code.splitlines()] + [f"    return _original_{name}(*args, **kwargs)"]
    lab_file.write_text(text + "\n\n\n" + "\n".join(wrapper) + "\n", encoding="utf-8")
    return list(range(first, first + len(code.splitlines())))


def pattern(reason: str, function: str, path: str, lines: list[int]) -> str:
    """`reason` as a regular expression, its {where} matching `function` at any of `lines`."""
    where = re.escape(f"{function} ({path}, line ") + "(" + "|".join(map(str, lines)) + r")\)"
    return re.escape(reason).replace(re.escape("{where}"), where)


@pytest.mark.parametrize("misbehaviour", sorted(MISBEHAVIOURS))
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(target=st.sampled_from(FUNCTIONS))
def test_any_lab_function_misbehaving_fails_only_the_item_that_ran_it(misbehaviour, target):
    """Only the first call misbehaves: the item that made it fails with the misbehaviour's reason, every other
    item (in the same child process or a fresh one) passes, unless it needs the failed one."""
    lab, path, name = target
    code, reason = MISBEHAVIOURS[misbehaviour]
    with tempfile.TemporaryDirectory() as folder:
        ws = workspace_with_reference(lab, Path(folder) / "ws")
        lines = misbehave_once(ws / path, name, code, Path(folder) / "misbehaved")
        _, outcomes = grade(lab, ws, limits=LIMITS, only=quick)
        assert [o.name for o in outcomes] == [c.name for c in checklist(lab).checks if quick(c.name)]
        first, *others = [o for o in outcomes if not o.passed]
        assert re.fullmatch(pattern(reason, name, path, lines), first.reason), first.reason
        assert not english_left(lab, first.reason), first.reason  # and in Spanish, all of it
        for outcome in others:  # only the items that need the failed one (lab 02's chain) are not run
            assert outcome.reason.startswith("not run: fix first: "), (outcome.name, outcome.reason)


def test_the_child_process_gives_the_outcomes_this_process_would(tmp_path):
    """The sandbox changes where the checks run, not what they find: a starter's checklist, item for item."""
    start("04", tmp_path / "ws")
    assert grade("04", tmp_path / "ws", limits=LIMITS) == grade("04", tmp_path / "ws", limits=None)
