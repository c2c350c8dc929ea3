"""Progressive distillation (`distillation.stages`): a chain of teachers, large → assistant(s) → student.

Mirzadeh et al. (2020), "Improved Knowledge Distillation via Teacher Assistant": a student much smaller than its
teacher can learn better through a model of a size in between. Each stage is a complete run folder,
RUN/stages/<i>-<name>/, trained from the config with the stage's `set` overrides applied and the stage before it
as its teacher (the first stage: the config's `teacher` or `teachers`); the student is the config itself, trained
in RUN with the last stage as its teacher. So RUN is the student's run folder, which publish, eval and export read
as any other, and its manifest fingerprints the weights it was taught by (training/distillation_task.py).

    distillation: {enabled: true, teacher: LAB01_MODEL, stages: [{name: assistant, set: ["model.n_layer=2"]}]}
      RUN/stages/1-assistant/   distilled from LAB01_MODEL
      RUN/                      the student, distilled from RUN/stages/1-assistant; results.json lists the stages

`train CONFIG --resume RUN`, or a checkpoint inside a stage (what a stage that stopped prints), skips the stages
that completed (refusing one that a changed `set` would train differently), resumes the one that stopped from its
checkpoint and trains the rest: bit-exact, since each stage is an ordinary run and a completed stage is only read.
Until the student starts RUN holds no config of its own, so the chain is resumed with its CONFIG.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minitrain.common.errors import UserError
from minitrain.config import Config, config_from_dict, resolved_dict
from minitrain.config.problems import ConfigError, Problem
from minitrain.config.source import dotted
from minitrain.runs import run_dir
from minitrain.runs.run_files import FINISHED, read_manifest, read_results
from minitrain.training import artifacts
from minitrain.training.distillation_task import teacher_problems
from minitrain.training.parts import training_config_hash
from minitrain.training.resume import resume_checkpoint, run_dir_of, same_folder

STAGES = "stages"  # RUN/stages/<i>-<name>/


def stage_dirs(cfg: Config, out_dir: Path) -> list[Path]:
    return [out_dir / STAGES / f"{i}-{stage.name}" for i, stage in enumerate(cfg.distillation.stages, 1)]


def stage_config(cfg: Config, index: int, teacher: str | None) -> Config:
    """The config that stage `index` trains (0-based; `index == len(stages)`: the student): the stage's overrides,
    `teacher` (None: the config's own teachers) and no stages of its own. The overrides are recorded in its
    config.resolved.yaml."""
    stages = cfg.distillation.stages
    overrides = [*(stages[index].set if index < len(stages) else ()), "distillation.stages=[]"]
    if teacher is not None:
        overrides += [f"distillation.teacher={teacher}", "distillation.teachers=[]"]
    return config_from_dict(resolved_dict(cfg), overrides)


def chain_problems(cfg: Config) -> list[Problem]:
    """What training the chain would refuse, as config problems (`minitrain validate`): each stage's config must be
    valid and predict over the student's ids, and the teachers must fit the first stage (without stages: the
    student)."""
    for index in range(len(cfg.distillation.stages)):
        key = ("distillation", "stages", index, "set")
        try:
            stage = stage_config(cfg, index, "STAGE_BEFORE")  # the folder a stage is taught by does not exist yet
        except ConfigError as exc:
            return [Problem(key, f"gives an invalid config: {dotted(p.path)}: {p.message}") for p in exc.problems]
        if stage.model.architecture().get("vocab_size") != cfg.model.architecture().get("vocab_size"):
            return [Problem(key, "changes model.vocab_size: every stage must predict over the student's ids")]
    return teacher_problems(stage_config(cfg, 0, None) if cfg.distillation.stages else cfg)


def _completed(folder: Path, stage: Config) -> bool:
    """Whether the stage's run in `folder` finished, trained by this config (a resumed chain whose stage's `set`
    changed since is refused: its folder holds another run)."""
    try:
        manifest = read_manifest(folder / "manifest.json")
    except UserError:
        return False
    if manifest.get("status") in FINISHED and manifest.get("config_hash") != training_config_hash(stage):
        raise UserError(f"{folder} was trained by another config than this chain's stage (its `set` changed?): "
                        "pass --overwrite to train the chain again, or restore the stage's settings", 2)
    return manifest.get("status") in FINISHED


def _resume_in(folder: Path, given: Path | None, resuming: bool) -> Path | None:
    """Where the run in `folder` continues from: the checkpoint `--resume` named when it is this folder's, else, in
    a resumed chain, the folder's latest checkpoint, else None (start it)."""
    if given is not None and same_folder(run_dir_of(given), folder):
        return given
    return folder if resuming and (folder / "checkpoints" / "latest").exists() else None


def _start_fresh(cfg: Config, out_dir: Path, overwrite: bool) -> None:
    """A new chain never mixes with an old one: RUN's run files or stages are refused, or deleted with --overwrite."""
    config_text = cfg.source.text if cfg.source is not None else None
    found = run_dir.run_files_in(out_dir, config_text) + ([STAGES] if (out_dir / STAGES).exists() else [])
    if found and not overwrite:
        raise UserError(f"{out_dir} holds another run ({', '.join(found[:4])}); pass --overwrite to replace it, "
                        f"--resume {out_dir} to continue it, or choose another --out-dir", 2)
    if found:
        run_dir.clear_run(out_dir)
        shutil.rmtree(out_dir / STAGES, ignore_errors=True)


def train_in_stages(cfg: Config, out_dir: str | os.PathLike, *, resume: str | os.PathLike | None, overwrite: bool,
                    progress: bool, models_dir: str | os.PathLike | None,
                    train_stage: Callable[..., dict[str, Any]], **run_args: Any) -> dict[str, Any]:
    """Train every stage, then the student in `out_dir` (module docstring); returns the student's results.json,
    with `stages`: each stage's folder and val scores. `train_stage` is `run.run_training`; `run_args` its other
    keywords, passed to every stage; `models_dir` and the data checks' `summary` are the student's (a stage's
    model file stays in its folder; its `set` may change its data or batch, so it checks its own)."""
    out_dir, summary = Path(out_dir), run_args.pop("summary", None)
    resuming, given = resume is not None, None
    if not resuming:
        _start_fresh(cfg, out_dir, overwrite)
    elif Path(resume).is_file() or (Path(resume) / "checkpoints" / "latest").exists() or \
            not (out_dir / STAGES).is_dir():  # a checkpoint, or a chain not begun here: resume_checkpoint's error
        given = resume_checkpoint(resume, out_dir, overwrite)
    dirs = stage_dirs(cfg, out_dir)
    if given is not None and not any(same_folder(run_dir_of(given), d) for d in (*dirs, out_dir)):
        raise UserError(f"--resume {resume}: not a checkpoint of this run ({out_dir}) or of its stages", 2)
    teacher, stages = None, []
    for index, folder in enumerate(dirs):
        if progress:
            print(f"progressive distillation: stage {index + 1} of {len(dirs)} ({folder.name}), taught by "
                  f"{teacher or 'the config’s teachers'}", flush=True)
        stage = stage_config(cfg, index, teacher)
        if _completed(folder, stage):
            results = read_results(folder / "results.json")
        else:
            results = train_stage(stage, folder, resume=_resume_in(folder, given, resuming), progress=progress,
                                  models_dir=folder / "models", **run_args)
        teacher = str(folder)
        stages.append({"run": f"{STAGES}/{folder.name}", "val_ppl": results.get("val_ppl"),
                       "val_exact_match": results.get("val_exact_match")})
    if progress:
        print(f"progressive distillation: the student, taught by {teacher}", flush=True)
    student = stage_config(cfg, len(dirs), teacher)
    student._source = cfg.source  # config.yaml as given, stages and all: `train --resume RUN` trains the chain
    results = train_stage(student, out_dir, resume=_resume_in(out_dir, given, resuming), progress=progress,
                          models_dir=models_dir, summary=summary, **run_args)
    results = {**results, "stages": stages}
    artifacts.atomic_write_json(out_dir / "results.json", results)
    return results
