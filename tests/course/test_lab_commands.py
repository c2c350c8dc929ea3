"""Every shell command of lab/*.md runs as printed, in order, in a scratch copy of the repository.

A student types these commands from the repository root after the README's set-up; so does this test, in a copy
of the tracked files with `.venv` linked in. Two things differ from a student's session, both on purpose:

- after `minitrain lab start NN DIR`, the library's own files for lab NN are copied into the workspace, as if
  the student had written them, so that the commands after it (training with the workspace, `lab check`) run
  (lab 07's from its solution folder, solutions/07: the library's own use fused ops, which its checker refuses);
- runs of lab 01's config are cut short (`--set scheduler.total_steps=N`): to 700 steps for the workspace run
  that lab 01's checker reads (enough for val PPL to go below the n-gram baseline: 4.39 at step 699, where the
  2000-step run is at 2.84), to 200 for the others (lab 02 stops one after step 120 and resumes it); lab 06's
  experiment trains two 20-step runs, characters and the smallest BPE, instead of four of 2000 steps (`--steps 20
  --sizes 320`); lab 08's start installs nothing (`--no-install`), and its runs train the tiny stand-in base of
  `course/chat_fixtures.py` (`--base`), never the real 135M model, on the 144 dev conversations
  instead of the 16,128 training ones (whose encoding would take
  most of the time), and are scored on all 144 held-out questions. Labs 03, 04 and 05's configs run as they are:
  they take seconds (lab 05's base, 2000 steps, about 20); so does lab 07's (about 30 s with the solution's
  Tensor-op pieces, 24 of them its 2000 steps: its checker's thresholds need the whole run).

A command ending in a comment `# exit code N` must exit with N; every other command with 0. Labs that share no
file run side by side (GROUPS), each lab's commands in order.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from lab05_table import check_bit_identity, check_reference_table
from test_course_text import parse

from minitrain import seam
from minitrain.course import chat_fixtures
from minitrain.course.labs import LABS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHECKED_RUN, CHECKED_STEPS, OTHER_STEPS = "--out-dir labs/01/run", 700, 200
# Labs whose commands may run at the same time as the other groups'. Labs 03 and 04 share lab 03's training
# file, which lab 03 rewrites; the others write only their own folders (lab 05 also runs/21-lora/, and
# build_corpus.py rewrites data/processed/ atomically, with the same bytes).
GROUPS = [("00-data-and-batcher.md", "01-train-mini.md"), ("02-checkpoint-roundtrip.md",),
          ("03-overfitting-and-dashboard.md", "04-early-stopping.md"), ("05-lora-and-quantization.md",),
          ("06-bpe-tokenizer.md",), ("07-gpt2-to-llama.md",), ("08-capstone-real-model.md",),
          ("09-model-merging.md",)]
TINY_BASE = "tiny-chat-base"  # written into the scratch copy by `scratch`
START = re.compile(r"minitrain lab start (\d\d) (\S+)")
EXIT = re.compile(r"#\s*exit code (\d+)")


def lab_texts() -> list[Path]:
    return sorted(p for p in (ROOT / "lab").glob("*.md") if not p.name.endswith(".es.md"))


def commands(page: Path) -> list[tuple[str, int]]:
    """(command, expected exit code) for each command line of the page's bash blocks; `\\` joins lines."""
    found, pending = [], ""
    for line in parse(page).shell.splitlines():
        line = pending + line.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if line and not line.startswith("#"):
            expected = EXIT.search(line)
            found.append((line, int(expected.group(1)) if expected else 0))
    return found


def shortened(command: str) -> str:
    """A run of lab 01's config with `--set scheduler.total_steps=N` appended (before a trailing comment); lab
    06's experiment (four runs of lab 01's config) with `--steps 20 --sizes 320`; lab 08's start with
    `--no-install`."""
    started = START.search(command)
    if started and LABS[started.group(1)].installs:  # never a real install (tests/course/test_lab_start_installs.py)
        return f"{command} --no-install"
    if "experiments/26-bpe-verbs/run.py" in command:
        return f"{command} --steps 20 --sizes 320"
    if "experiments/22-smollm2-verbs/run.py" in command:
        return f"{command} --base {TINY_BASE} --set data.train_path=data/chat/verbs/val.jsonl"
    if "experiments/18-train-mini/config.yaml" not in command or "validate" in command:
        return command
    steps = CHECKED_STEPS if CHECKED_RUN in command else OTHER_STEPS
    code, hash_, comment = command.partition("#")
    return f"{code.rstrip()} --set scheduler.total_steps={steps}" + (f"  {hash_}{comment}" if hash_ else "")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A copy of the repository's tracked files and of the package's compiled files, with the real .venv linked
    in, and lab 08's tiny base."""
    root = tmp_path_factory.mktemp("repo")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in filter(None, tracked.stdout.split("\0")):
        if (ROOT / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, root / name)
    (root / ".venv").symlink_to(ROOT / ".venv")
    # What a checkout holds once anything has run in it: the package's bytecode and numba's compiled kernels. Lab
    # 06's experiment imports this copy's minitrain, which would otherwise compile every kernel again (numba checks
    # a kernel by its source's bytes, Python the bytecode by its source's time, which copy2 keeps).
    for compiled in ROOT.glob("minitrain/**/__pycache__/*"):
        (root / compiled.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(compiled, root / compiled.relative_to(ROOT))
    chat_fixtures.write_tiny_base(root / TINY_BASE)
    return root


def test_every_lab_has_commands_to_run():
    pages = {p.name: commands(p) for p in lab_texts()}
    for lab in LABS.values():
        assert any(f"minitrain lab check {lab.number} " in c for c, _ in pages[Path(lab.text).name]), lab.text
    assert shortened("x experiments/18-train-mini/config.yaml --y  # exit code 4: halted") == (
        "x experiments/18-train-mini/config.yaml --y --set scheduler.total_steps=200  # exit code 4: halted")
    assert shortened("x experiments/18-train-mini/config.yaml --out-dir labs/01/run").endswith("total_steps=700")
    assert shortened("x experiments/26-bpe-verbs/run.py --out y") == "x experiments/26-bpe-verbs/run.py --out y " \
        "--steps 20 --sizes 320"
    assert shortened(".venv/bin/minitrain lab start 08 labs/08").endswith("labs/08 --no-install")
    assert shortened("x experiments/22-smollm2-verbs/run.py --out y").endswith(
        f"--out y --base {TINY_BASE} --set data.train_path=data/chat/verbs/val.jsonl")


def run_pages(scratch: Path, pages: list[Path]) -> list[str]:
    """Run the pages' commands in order; return one line per command that did not exit as expected."""
    env = {k: v for k, v in os.environ.items() if k != seam.LAB_DIR_VARIABLE}
    env["MINITRAIN_MODELS_DIR"] = str(scratch / "models-elsewhere")  # a run without --models-dir stays here
    problems = []
    for page in pages:
        for command, expected in commands(page):
            done = subprocess.run(["bash", "-c", shortened(command)], cwd=scratch, env=env, capture_output=True,
                                  text=True, timeout=600)
            if done.returncode != expected:
                problems.append(f"{page.relative_to(ROOT)}: `{command}` exited {done.returncode}, expected "
                                f"{expected}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")
                return problems  # what follows depends on it
            started = START.search(command)
            if started:  # the student writes the lab: here, the library's own files
                lab, workspace = started.groups()
                for path in LABS[lab].pieces:
                    shutil.copy(ROOT / (LABS[lab].solution or "") / path, scratch / workspace / path)
    return problems


def test_every_command_in_the_labs_runs_as_printed(scratch):
    pages = {p.name: p for p in lab_texts()}
    with_commands = {name for name, page in pages.items() if commands(page)}
    assert with_commands == {name for group in GROUPS for name in group}
    assert sum(len(commands(p)) for p in pages.values()) >= 20
    with ThreadPoolExecutor(len(GROUPS)) as pool:
        problems = [line for found in pool.map(lambda group: run_pages(scratch, [pages[n] for n in group]), GROUPS)
                    for line in found]
    assert not problems, "\n\n".join(problems)
    # lab 05's quoted table is what its commands gave here (run once, here, rather than again in a test of its own)
    check_reference_table(scratch / "labs" / "05" / "run")
    check_bit_identity(scratch / "labs" / "05" / "run")
