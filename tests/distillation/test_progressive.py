"""Progressive distillation (`distillation.stages`, minitrain/training/progressive.py): each stage a run taught by
the one before, the student taught by the last; a chain stopped inside a stage or inside the student resumes bit
for bit; a folder holding a chain is not overwritten without --overwrite; a stage's bad overrides are one problem
under its key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_damage import run_cli
from test_run import train_tiny

from minitrain.common.errors import UserError
from minitrain.course.fixtures import write_tiny_run
from minitrain.lora import state_digest
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.model_files import load_model_file

STAGE = "distillation.stages=[{name: assistant, set: [model.d_ff=48, 'monitoring.alerts=[]']}]"
ALERTS_KEPT = "distillation.stages=[{name: assistant, set: [model.d_ff=48]}]"  # the stage keeps the chain's alerts


def chain(teacher: Path, *more: str, stage: str = STAGE) -> list[str]:
    return ["model.dropout=0.1", "training.checkpoint.save_every=1", f"distillation.teacher={teacher}", *more, stage]


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    """The tiny corpus; a wider teacher trained on it; the chain teacher → assistant (d_ff 48) → student (d_ff
    32) trained without a stop, to compare against."""
    root = tmp_path_factory.mktemp("progressive")
    config = write_tiny_run(root)
    teacher = root / "teacher"
    train_tiny(config, teacher, ["model.d_model=32", "model.d_ff=64"])
    straight = train_tiny(config, root / "straight", chain(teacher))
    return {"root": root, "config": config, "teacher": teacher, "straight": straight}


def manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def test_each_stage_is_a_run_taught_by_the_one_before(setup):
    run, teacher = setup["root"] / "straight", setup["teacher"]
    stage = run / "stages" / "1-assistant"
    assert manifest(stage)["status"] == "completed" and manifest(stage)["config"]["model"]["d_ff"] == 48
    assert manifest(run)["config"]["model"]["d_ff"] == 32
    # Each is taught by the one before it, by path and by the weights it read.
    assert manifest(stage)["data_sha256"]["distillation.teacher"]["path"] == str(teacher)
    taught_by = manifest(run)["data_sha256"]["distillation.teacher"]
    stage_results = json.loads((stage / "results.json").read_text())
    assert taught_by == {"path": str(stage), "sha256": state_digest(load_model_file(stage_results["model_path"])[0])}
    assert setup["straight"]["stages"] == [{"run": "stages/1-assistant", "val_ppl": stage_results["val_ppl"],
                                            "val_exact_match": stage_results["val_exact_match"]}]
    assert json.loads((run / "results.json").read_text())["stages"] == setup["straight"]["stages"]
    # The student's config is the chain's, stages and all: what `train --resume RUN` trains again.
    assert f"# override: --set {STAGE}\n" in (run / "config.resolved.yaml").read_text()


@pytest.mark.parametrize("in_stage", [True, False])
def test_a_chain_stopped_anywhere_resumes_bit_exactly(setup, tmp_path, in_stage):
    root, config, teacher = setup["root"], setup["config"], setup["teacher"]
    run = tmp_path / "split"
    # The chain's alert halts the stage when the stage keeps it, else (its `set` clears it) the student.
    halt = f"monitoring.alerts=['step >= {4 if in_stage else 9}: halt']"
    with pytest.raises(UserError, match="halted after") as info:
        train_tiny(config, run, chain(teacher, halt, stage=ALERTS_KEPT if in_stage else STAGE))
    folder = run / "stages" / "1-assistant" if in_stage else run
    latest = CheckpointManager(folder).latest()
    assert f"--resume {latest}" in str(info.value)  # the whole chain's command, continuing from that checkpoint
    resumed = train_tiny(config, run, chain(teacher), resume=latest)
    for sub in ("stages/1-assistant/train_log.jsonl", "train_log.jsonl"):
        assert (run / sub).read_bytes() == (root / "straight" / sub).read_bytes(), sub
    # The weights (the file's metadata names the chain's own folder, so not its bytes).
    weights = [state_digest(load_model_file(r["model_path"])[0]) for r in (resumed, setup["straight"])]
    assert weights[0] == weights[1]
    assert resumed["stages"][0]["val_ppl"] == setup["straight"]["stages"][0]["val_ppl"]


def test_a_folder_holding_a_chain_is_replaced_only_with_overwrite(setup, tmp_path):
    config, teacher = setup["config"], setup["teacher"]
    run = tmp_path / "chain"
    (run / "stages" / "1-assistant").mkdir(parents=True)
    (run / "stages" / "1-assistant" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="holds another run"):
        train_tiny(config, run, chain(teacher))
    assert (run / "stages" / "1-assistant" / "notes.txt").read_text() == "mine"
    train_tiny(config, run, chain(teacher), overwrite=True)
    assert not (run / "stages" / "1-assistant" / "notes.txt").exists()
    assert manifest(run / "stages" / "1-assistant")["status"] == "completed"


@pytest.mark.parametrize(("stage", "message"), [
    ("[{name: a, set: [model.n_layr=2]}]", "stages[0].set: gives an invalid config: model.n_layr: unknown key"),
    ("[{name: a, set: [model.vocab_size=80]}]", "changes model.vocab_size"),
    ("[{name: a}, {name: a}]", "two stages share a name"),
])
def test_a_bad_stage_is_one_problem_naming_it(setup, stage, message):
    code, _, err = run_cli(["validate", str(setup["config"]), "--set", f"distillation.teacher={setup['teacher']}",
                            "--set", f"distillation.stages={stage}"])
    assert code == 2 and "Traceback" not in err and message in err, err


def test_validate_shows_the_chain(setup):
    code, out, err = run_cli(["validate", str(setup["config"]), *(a for s in chain(setup["teacher"])
                                                                 for a in ("--set", s))])
    assert code == 0, err
    assert (f"✓ distillation from {setup['teacher']} → assistant (model.d_ff=48, monitoring.alerts=[]) → the "
            "student: T 2,") in out


def test_a_resumed_chain_refuses_a_completed_stage_its_changed_set_would_train_differently(setup):
    run = setup["root"] / "straight"
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}
    changed = chain(setup["teacher"], stage="distillation.stages=[{name: assistant, set: [model.d_ff=40]}]")
    with pytest.raises(UserError, match="1-assistant was trained by another config than this chain's stage"):
        train_tiny(setup["config"], run, changed, resume=run)
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()} == before  # nothing written
