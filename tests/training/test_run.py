"""minitrain.training.run: a whole run on a tiny config writes every artifact; same seed, same bytes; resume is exact;
bad data fails before any work; the dry run writes nothing."""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

import minitrain.training.plan
from minitrain.common.errors import UserError
from minitrain.config import load_config
from minitrain.config.problems import ConfigError
from minitrain.course.fixtures import write_tiny_run
from minitrain.models.minigpt import MiniGPT
from minitrain.runs.model_files import load_model_file
from minitrain.training import artifacts
from minitrain.training.plan import plan_run
from minitrain.training.run import run_training

pytestmark = [pytest.mark.lab01, pytest.mark.slow]

DATA = Path(__file__).resolve().parents[2] / "data" / "processed"
MANIFEST_KEYS = {"seed", "versions", "config", "git_sha", "data_manifest_hash", "hardware", "status",
                 "wall_seconds", "peak_rss_mb"}
RESULTS_KEYS = {"train_ppl", "val_ppl", "best_val_step", "best_val_ppl", "ngram_baseline_val_ppl", "beats_baseline",
                "ppl_improvement_pct", "val_exact_match", "wall_seconds", "peak_rss_mb", "model_path"}
RUN_FILES = ("manifest.json", "config.yaml", "config.resolved.yaml", "train_log.jsonl", "metrics.csv",
             "results.json", "loss_curve.png", "dashboard.png", "report.md")


def train_tiny(config: Path, out_dir: Path, overrides: list[str] = (), **keys) -> dict:
    cfg = load_config(config, overrides)
    return run_training(cfg, out_dir, progress=False, models_dir=config.parent / "models",
                        baseline_path=config.parent / "baseline.json", **keys)


def log_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]


def test_a_run_writes_every_artifact_with_the_required_keys(tmp_path):
    config = write_tiny_run(tmp_path, plots=True)
    run_dir = tmp_path / "run"
    results = train_tiny(config, run_dir)

    for name in RUN_FILES:
        assert (run_dir / name).is_file(), name
    assert (run_dir / "config.yaml").read_text() == config.read_text()  # as given
    assert (run_dir / "loss_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "step,loss,lr,grad_norm,val_loss,val_ppl" in (run_dir / "metrics.csv").read_text()
    assert "## Training quality:" in (run_dir / "report.md").read_text()
    assert "## Train vs val" in (run_dir / "report.md").read_text()
    assert (run_dir / "dashboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest.keys() >= MANIFEST_KEYS
    assert manifest["status"] == "completed" and manifest["seed"] == 42 and manifest["steps_done"] == 24
    assert {"cpu_model", "cpu_cores", "ram_gb"} <= manifest["hardware"].keys()
    assert manifest["config"]["model"]["d_model"] == 16

    on_disk = json.loads((run_dir / "results.json").read_text())
    assert on_disk == results and results.keys() >= RESULTS_KEYS
    assert results["ngram_baseline_val_ppl"] == 1000.0 and results["beats_baseline"] is True
    assert results["ppl_improvement_pct"] == pytest.approx(100 * (1000 - results["val_ppl"]) / 1000, abs=0.01)
    assert 0.0 <= results["val_exact_match"] <= 1.0
    val_rows = [r for r in log_rows(run_dir) if "val_ppl" in r]
    assert results["val_ppl"] == val_rows[-1]["val_ppl"] and val_rows[-1]["step"] == 23
    best = min(val_rows, key=lambda r: r["val_loss"])
    assert (results["best_val_step"], results["best_val_ppl"]) == (best["step"], best["val_ppl"])
    assert math.isfinite(results["train_ppl"]) and results["train_ppl"] > 1

    # The model file: named by its content hash, loadable alone, and it reproduces the recorded val PPL.
    model_path = Path(results["model_path"])
    assert model_path.parent == tmp_path / "models" and model_path.name.startswith("minigpt-phase18-")
    state, model_config, _ = load_model_file(model_path)
    model = MiniGPT(**model_config)
    model.load_state_dict(state)
    from minitrain.config.datacheck import load_split
    from minitrain.data.batcher import EvalBatcher, encode_split
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.loop import evaluate

    cfg = load_config(config)
    split = encode_split(load_split(cfg.data, "val"), CharTokenizer.load(cfg.data.vocab_path), 32)
    assert evaluate(model, EvalBatcher(split, 5))[1] == pytest.approx(results["val_ppl"], rel=1e-5)
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        "latest", *(f"step-{n}.safetensors" for n in (12, 16, 20, 24, 4, 8))]


def test_output_plots_false_draws_nothing_and_trains_the_same_bytes(tmp_path):
    drawn = train_tiny(write_tiny_run(tmp_path / "drawn", plots=True), tmp_path / "drawn" / "run")
    plain = train_tiny(write_tiny_run(tmp_path / "plain"), tmp_path / "plain" / "run")  # output: {plots: false}
    assert sorted(p.name for p in (tmp_path / "drawn" / "run").glob("*.png")) == ["dashboard.png", "loss_curve.png"]
    assert not list((tmp_path / "plain" / "run").glob("*.png"))
    report = (tmp_path / "plain" / "run" / "report.md").read_text()
    assert "![" not in report and "## Train vs val" in report and "## Training quality:" in report
    assert (tmp_path / "plain" / "run" / "train_log.jsonl").read_bytes() == (
        tmp_path / "drawn" / "run" / "train_log.jsonl").read_bytes()
    weights = [safetensors.numpy.load_file(run["model_path"]) for run in (plain, drawn)]  # the metadata differs
    assert plain["val_ppl"] == drawn["val_ppl"] and all(np.array_equal(weights[0][k], v) for k, v in weights[1].items())
    # a key added with the value that means "as before": a run that draws its plots keeps its config hash
    assert "plots:" not in (tmp_path / "drawn" / "run" / "config.resolved.yaml").read_text()


def test_the_baseline_counts_only_for_the_corpus_and_positions_it_scored(tmp_path):
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"val_ppl": 5.8, "data_manifest_hash": "abc", "loss_on": "answer"}))
    assert artifacts.load_baseline_ppl(path, data_manifest_hash="abc", loss_on="answer") == 5.8
    assert artifacts.load_baseline_ppl(path, data_manifest_hash="other", loss_on="answer") is None
    assert artifacts.load_baseline_ppl(path, data_manifest_hash=None, loss_on="answer") is None  # plain text
    assert artifacts.load_baseline_ppl(path, data_manifest_hash="abc", loss_on="all") is None
    path.write_text(json.dumps({"val_ppl": 5.8}))  # records neither: nothing to check it against
    assert artifacts.load_baseline_ppl(path, data_manifest_hash=None, loss_on="all") == 5.8
    assert artifacts.load_baseline_ppl(tmp_path / "missing.json", data_manifest_hash="abc", loss_on="answer") is None
    path.write_text("{}")
    with pytest.raises(UserError, match=r"baseline\.json: not an n-gram baseline results\.json with a val_ppl"):
        artifacts.load_baseline_ppl(path, data_manifest_hash="abc", loss_on="answer")


def test_a_run_on_other_data_is_not_compared_with_the_lab_baseline(tmp_path):
    config = write_tiny_run(tmp_path)  # the tiny corpus has no data manifest: not the baseline's corpus
    cfg = load_config(config)
    results = run_training(cfg, tmp_path / "run", progress=False, models_dir=tmp_path / "models")
    lab = json.loads(artifacts.DEFAULT_BASELINE_PATH.read_text())
    assert lab["data_manifest_hash"] and lab["val_ppl"] > 1  # the default baseline exists and records its corpus
    assert results["ngram_baseline_val_ppl"] is None and results["beats_baseline"] is None
    assert results["ppl_improvement_pct"] is None


def test_same_seed_gives_a_byte_identical_log_and_model(tmp_path):
    config = write_tiny_run(tmp_path)
    a = train_tiny(config, tmp_path / "a")
    b = train_tiny(config, tmp_path / "b")
    assert (tmp_path / "a" / "train_log.jsonl").read_bytes() == (tmp_path / "b" / "train_log.jsonl").read_bytes()
    assert a["model_path"] == b["model_path"]  # same content hash
    c = train_tiny(config, tmp_path / "c", ["training.rng_seed=43"])
    assert (tmp_path / "c" / "train_log.jsonl").read_bytes() != (tmp_path / "a" / "train_log.jsonl").read_bytes()
    assert c["model_path"] != a["model_path"]


@pytest.mark.lab02
@pytest.mark.parametrize("split_step", [4, 12])  # inside the warm-up (6 steps); after the first epoch (10 steps)
def test_resume_is_bit_exact(tmp_path, split_step):
    config = write_tiny_run(tmp_path)
    straight = train_tiny(config, tmp_path / "straight")
    # A run that went on past its checkpoint and then died: resuming must drop the later rows and redo them.
    train_tiny(config, tmp_path / "resumed")
    resumed = train_tiny(config, tmp_path / "resumed",
                         resume=tmp_path / "resumed" / "checkpoints" / f"step-{split_step}.safetensors")
    assert (tmp_path / "resumed" / "train_log.jsonl").read_bytes() == (
        tmp_path / "straight" / "train_log.jsonl").read_bytes()
    assert resumed["model_path"] == straight["model_path"]  # byte-identical final weights
    assert resumed["val_ppl"] == straight["val_ppl"]
    manifest = json.loads((tmp_path / "resumed" / "manifest.json").read_text())
    assert manifest["resumes"][-1]["step"] == split_step and manifest["status"] == "completed"


def test_resume_drops_a_log_line_with_bytes_that_are_not_utf8(tmp_path):
    config = write_tiny_run(tmp_path)
    straight = train_tiny(config, tmp_path / "straight")
    train_tiny(config, tmp_path / "run")
    with open(tmp_path / "run" / "train_log.jsonl", "ab") as log:
        log.write(b'{"step": 30, "lo\xff\xfe')  # a damaged last line, even one that is not UTF-8
    resumed = train_tiny(config, tmp_path / "run", resume=tmp_path / "run" / "checkpoints" / "step-16.safetensors")
    assert log_rows(tmp_path / "run") == log_rows(tmp_path / "straight")
    assert resumed["model_path"] == straight["model_path"]


def test_resume_under_another_config_is_refused_and_changes_nothing(tmp_path):
    config = write_tiny_run(tmp_path)
    train_tiny(config, tmp_path / "run")
    before = (tmp_path / "run" / "train_log.jsonl").read_bytes()
    with pytest.raises(UserError, match=r"recorded with optimizer\.lr_max = 0\.003, the config given has 0\.01"):
        train_tiny(config, tmp_path / "run", ["optimizer.lr_max=1.0e-2"], resume=tmp_path / "run")
    assert (tmp_path / "run" / "train_log.jsonl").read_bytes() == before


def test_missing_data_file_is_a_clear_error_before_any_work(tmp_path):
    config = write_tiny_run(tmp_path)
    (tmp_path / "data" / "train.jsonl").unlink()
    with pytest.raises(ConfigError) as info:
        train_tiny(config, tmp_path / "run")
    assert info.value.exit_code == 2
    assert "data.train_path" in str(info.value) and "train.jsonl" in str(info.value)
    assert not (tmp_path / "run").exists() and not (tmp_path / "models").exists()


@pytest.mark.parametrize("which", ["run", "models"])
def test_a_folder_that_cannot_be_written_is_a_clear_error_before_any_work(tmp_path, which):
    config = write_tiny_run(tmp_path)
    (tmp_path / "a-file").write_text("")
    blocked = tmp_path / "a-file" / "inside"  # under a file: the folder cannot be created
    out_dir = blocked if which == "run" else tmp_path / "run"
    keys = {} if which == "run" else {"models_dir": blocked}
    cfg = load_config(config)
    with pytest.raises(UserError) as info:
        run_training(cfg, out_dir, progress=False, baseline_path=tmp_path / "baseline.json",
                     **{"models_dir": tmp_path / "models", **keys})
    assert info.value.exit_code == 2
    assert str(info.value) == f"{which} folder {blocked}: {tmp_path / 'a-file'} exists and is not a folder"
    assert not (tmp_path / "run").exists() and not (tmp_path / "models").exists()  # nothing created


def test_a_folder_holding_another_run_is_refused_unless_overwrite_which_replaces_it(tmp_path):
    config = write_tiny_run(tmp_path)
    first = train_tiny(config, tmp_path / "run", ["training.rng_seed=1"])
    (tmp_path / "run" / "README.md").write_text("my notes")  # not a run file: --overwrite keeps it
    before = {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}
    with pytest.raises(UserError) as info:
        train_tiny(config, tmp_path / "run")
    assert info.value.exit_code == 2
    assert str(info.value).startswith(f"{tmp_path / 'run'} holds another run (manifest.json, ")
    assert "pass --overwrite to replace it, --resume" in str(info.value)
    assert {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()} == before  # untouched

    second = train_tiny(config, tmp_path / "run", ["training.checkpoint.save_every=null"], overwrite=True)
    assert second["model_path"] != first["model_path"]
    assert [r["step"] for r in log_rows(tmp_path / "run")].count(0) == 2  # one train + one val row: no leftovers
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == ["latest", "step-24.safetensors"]
    assert (tmp_path / "run" / "README.md").read_text() == "my notes"
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["run_id"] == manifest["run_id"] != json.loads(before[tmp_path / "run" / "results.json"])["run_id"]


def test_a_folder_with_only_its_own_config_is_a_fine_place_for_a_run(tmp_path):
    # The lab's experiment folder holds config.yaml (the config trained from) and a README: not another run.
    config = write_tiny_run(tmp_path)
    folder = tmp_path / "experiment"
    folder.mkdir()
    (folder / "config.yaml").write_bytes(config.read_bytes())
    (folder / "README.md").write_text("notes")
    train_tiny(folder / "config.yaml", folder)
    assert (folder / "results.json").is_file() and (folder / "README.md").read_text() == "notes"

    other = tmp_path / "other"
    other.mkdir()
    (other / "config.yaml").write_text("a different config\n")  # would be overwritten: refused
    with pytest.raises(UserError, match=r"holds another run \(config.yaml\)"):
        train_tiny(config, other)
    assert (other / "config.yaml").read_text() == "a different config\n"


def test_ctrl_c_while_the_run_is_finished_says_how_to_finish_it(tmp_path, monkeypatch):
    config = write_tiny_run(tmp_path)
    straight = train_tiny(config, tmp_path / "straight")

    def ctrl_c(model, tokenizer, records):
        raise KeyboardInterrupt

    monkeypatch.setattr("minitrain.training.scoring.exact_match", ctrl_c)  # after the last step, before results.json
    with pytest.raises(UserError) as info:
        train_tiny(config, tmp_path / "run")
    final = tmp_path / "run" / "checkpoints" / "step-24.safetensors"
    assert info.value.exit_code == 130
    assert str(info.value).startswith(f"SIGINT: interrupted after 24 steps; checkpoint {final}; resume with: ")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["stopped_at"] == 23
    assert not (tmp_path / "run" / "results.json").exists()

    monkeypatch.undo()
    finished = train_tiny(config, tmp_path / "run", resume=final)  # runs no step, only the finishing part
    assert finished["model_path"] == straight["model_path"] and finished["val_ppl"] == straight["val_ppl"]
    assert log_rows(tmp_path / "run") == log_rows(tmp_path / "straight")
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["status"] == "completed"


def test_a_second_ctrl_c_mid_step_still_completes_the_manifest(tmp_path, monkeypatch):
    import minitrain.training.engine

    calls = []

    def step_then_ctrl_c(*args, **keys):
        calls.append(1)
        if len(calls) == 10:  # step 9, the second Ctrl-C: the handler raises at once
            raise KeyboardInterrupt
        return real_step(*args, **keys)

    real_step = minitrain.training.engine.train_step
    monkeypatch.setattr(minitrain.training.engine, "train_step", step_then_ctrl_c)
    config = write_tiny_run(tmp_path)  # checkpoints every 4 steps
    with pytest.raises(KeyboardInterrupt):
        train_tiny(config, tmp_path / "run")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["steps_done"] == 8  # what the checkpoint kept
    assert manifest["checkpoint"] == str(tmp_path / "run" / "checkpoints" / "step-8.safetensors")


def test_the_resume_command_is_quoted_for_the_shell(tmp_path):
    config = write_tiny_run(tmp_path)
    alert = "monitoring.alerts=['step >= 3: halt']"
    cfg = load_config(config, [alert], values={"training.rng_seed": 42})
    with pytest.raises(UserError) as info:
        run_training(cfg, tmp_path / "run", progress=False, models_dir=tmp_path / "models",
                     config_path=config, overrides=cfg.source.overrides)
    command = str(info.value).split("resume with: ")[1]
    assert shlex.split(command) == [
        "minitrain", "train", str(config), "--out-dir", str(tmp_path / "run"),
        "--set", alert, "--seed", "42", "--resume", str(tmp_path / "run" / "checkpoints" / "step-5.safetensors")]


def test_the_resume_command_is_the_command_that_started_the_run(tmp_path):
    config = write_tiny_run(tmp_path)
    cfg = load_config(config, ["monitoring.alerts=['step >= 3: halt']"])
    typed = [".venv/bin/python", "scripts/train_mini.py", "--config", str(config), "--set", "x y"]
    with pytest.raises(UserError) as info:
        run_training(cfg, tmp_path / "run", progress=False, models_dir=tmp_path / "models", command=typed)
    command = str(info.value).split("resume with: ")[1]
    assert shlex.split(command) == [*typed, "--resume", str(tmp_path / "run" / "checkpoints" / "step-5.safetensors")]


def test_nan_run_raises_a_user_error_and_records_diverged(tmp_path):
    # An absurd learning rate: the first update throws the weights to ~1e30, and the validation after it (step 0)
    # overflows: the run stops there, before those weights are logged or saved.
    config = write_tiny_run(tmp_path, "")
    with pytest.raises(UserError) as info:
        train_tiny(config, tmp_path / "run", ["optimizer.lr_max=1.0e+30", "optimizer.clip=null",
                                              "scheduler.warmup_steps=0", "optimizer.lr_min=0.0"])
    assert info.value.exit_code == 3 and "val_loss nan, val_ppl nan after the update of step 0" in str(info.value)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "diverged" and manifest["stopped_at"] == 0
    assert not (tmp_path / "run" / "results.json").exists()


def test_dry_run_plans_and_writes_nothing(tmp_path, monkeypatch):
    config = write_tiny_run(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    micro_batches, said = [], []
    real_step = minitrain.training.plan.step_gradients

    def counted(model, optimizer, batches, *rest):
        micro_batches.extend(batches)
        return real_step(model, optimizer, batches, *rest)

    monkeypatch.setattr(minitrain.training.plan, "step_gradients", counted)
    plan = plan_run(load_config(config, ["output.dir=" + str(tmp_path / "run"), "training.grad_accumulation=2"]),
                    say=said.append)
    assert len(micro_batches) == 1 and len(micro_batches[0].input) == 4  # one micro-batch of batch_size rows
    assert said == ["dry run: checking the data", "dry run: building the model, optimizer and batches",
                    "dry run: timing one forward/backward of one micro-batch (4 rows)"]
    assert plan["estimated_from"].startswith("one forward/backward of one micro-batch, measured: ")
    assert sorted(tmp_path.rglob("*")) == before
    assert plan["parameters"] == MiniGPT(1, 2, 16, 32, 64, 32).num_parameters()
    assert plan["steps"] == 24 and plan["epochs"] == pytest.approx(24 * 8 / 40)
    assert plan["tokens_per_step"]["max"] == 2 * 4 * 32
    assert 0 < plan["tokens_per_step"]["counted_mean"] < plan["tokens_per_step"]["real_mean"] <= 256
    assert plan["ms_per_step"] > 0 and plan["output_dir"] == str(tmp_path / "run")
    assert np.isfinite(float(plan["estimated_wall"].split()[0]))
    duration = plan_run(load_config(config, ["scheduler.total_steps=null", "training.duration=1h"]), say=said.append)
    assert len(micro_batches) == 2 and duration["steps"] >= 7  # a duration run is sized from its one micro-batch
    assert duration["estimated_wall"].endswith("(budget 1h)")


def test_a_resume_after_the_data_changed_is_refused_naming_the_file(tmp_path):
    config = write_tiny_run(tmp_path)
    train_tiny(config, tmp_path / "run")
    train = tmp_path / "data" / "train.jsonl"
    lines = train.read_text().splitlines()
    train.write_text("\n".join(lines[1:] + lines[:1]) + "\n")  # the same records in another order
    before = (tmp_path / "run" / "train_log.jsonl").read_bytes()
    checkpoint = tmp_path / "run" / "checkpoints" / "step-8.safetensors"
    with pytest.raises(UserError) as info:
        train_tiny(config, tmp_path / "run", resume=checkpoint)
    assert info.value.exit_code == 2
    assert str(info.value).startswith(f"{train} (data.train_path) has changed since {checkpoint} was saved (sha256 ")
    assert (tmp_path / "run" / "train_log.jsonl").read_bytes() == before


def test_resume_from_something_that_cannot_resume_is_exit_2(tmp_path):
    config = write_tiny_run(tmp_path)
    results = train_tiny(config, tmp_path / "run")
    (tmp_path / "empty").mkdir()
    for source, message in ((results["model_path"], "a model-only file (no optimizer, schedule or RNG state)"),
                            (tmp_path / "empty", "no checkpoint found")):
        with pytest.raises(UserError, match=re.escape(message)) as info:
            train_tiny(config, tmp_path / "other", resume=source)
        assert info.value.exit_code == 2
    assert not (tmp_path / "other").exists()  # nothing was written


def test_overwrite_removes_the_runs_own_previous_model_file_and_never_another_runs(tmp_path):
    config = write_tiny_run(tmp_path)
    models = tmp_path / "models"  # one models/ folder for every run here, as the lab's experiments share one
    short = train_tiny(config, tmp_path / "a", ["scheduler.total_steps=12"])["model_path"]
    replaced = train_tiny(config, tmp_path / "b")["model_path"]
    train_tiny(config, tmp_path / "b", ["training.rng_seed=1"], overwrite=True)
    assert not Path(replaced).exists() and Path(short).exists()  # b's own previous file went; a's stays
    train_tiny(config, tmp_path / "c", ["scheduler.total_steps=12"])  # the same bytes as a's: the same file
    again = train_tiny(config, tmp_path / "c", overwrite=True)["model_path"]
    assert Path(short).exists(), "a's results.json names it too"
    assert {p.name for p in models.iterdir()} == {Path(p).name for p in (short, again)} | {
        Path(json.loads((tmp_path / "b" / "results.json").read_text())["model_path"]).name}


@pytest.mark.parametrize("how", ["halt", "SIGINT", "duration"])
def test_every_line_of_a_stopped_run_names_the_steps_its_checkpoint_counts(tmp_path, monkeypatch, capsys, how):
    """step-7.safetensors holds 7 updates (log steps 0..6): a run stopped there says "after 7 steps", never 6."""
    import os
    import signal

    from minitrain.training.engine import _Loop

    config, ticks = write_tiny_run(tmp_path), iter(range(100))
    if how == "SIGINT":
        show = _Loop.show_progress

        def ctrl_c_at_6(loop, step, *rest):
            if step == 6:
                os.kill(os.getpid(), signal.SIGINT)
            return show(loop, step, *rest)

        monkeypatch.setattr(_Loop, "show_progress", ctrl_c_at_6)
    if how == "duration":
        monkeypatch.setattr(_Loop, "out_of_time", lambda loop: next(ticks) == 6)
    try:
        train_tiny(config, tmp_path / "run", ["monitoring.alerts=['step >= 6: halt']"] if how == "halt" else [])
        error = ""
    except UserError as e:
        error = str(e)
    lines = capsys.readouterr().err + error
    named = re.findall(r"(?:stopped|halted|interrupted|reached) after (?:step )?(\d+)", lines)
    assert named and set(named) == {"7"}, lines
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("step-*")) == ["step-4.safetensors",
                                                                                        "step-7.safetensors"]


def test_a_run_without_matplotlib_says_it_draws_no_plots_and_writes_everything_else(tmp_path, monkeypatch, capsys):
    """matplotlib is the optional `plots` extra (pyproject.toml): without it a run writes every file but the PNGs."""
    import sys

    from minitrain.config import load_config
    from minitrain.course.fixtures import write_tiny_run
    from minitrain.training.run import run_training

    config = write_tiny_run(tmp_path, plots=True)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an install without the extra imports
    results = run_training(load_config(config), tmp_path / "run", progress=False, config_path=config)
    err = capsys.readouterr().err
    assert err.count("draws no plots: matplotlib is not installed (pip install 'minitrain[plots]')") == 1
    assert results["status"] == "completed" and not list((tmp_path / "run").glob("*.png"))
    assert all((tmp_path / "run" / name).is_file() for name in ("results.json", "metrics.csv", "report.md"))


def test_git_sha_names_minitrain_s_commit_only_where_git_tracks_the_code(tmp_path):
    """A checkout's code gives its commit; a package git does not track (a site-packages in a .venv that another
    project's repository ignores) gives None, never that project's commit."""
    import subprocess

    if (artifacts.PACKAGE.parent / ".git").exists():  # this checkout's minitrain/
        assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", artifacts.git_sha() or "")
    package = tmp_path / ".venv" / "site-packages" / "minitrain"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", "utf-8")
    (tmp_path / ".gitignore").write_text(".venv/\n", "utf-8")
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@b", "-C", str(tmp_path)]
    for step in (["init", "-q"], ["add", ".gitignore"], ["commit", "-qm", "a project"]):
        subprocess.run([*git, *step], check=True, capture_output=True)
    assert artifacts.git_sha(package) is None
