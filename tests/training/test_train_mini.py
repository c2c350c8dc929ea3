"""scripts/train_mini.py end to end, as a student runs it: artifacts, exit codes and messages, Ctrl-C + resume."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest
from test_resume import STOPPER, wait_until_stopped
from test_run import RESULTS_KEYS, RUN_FILES

from minitrain.course.fixtures import write_tiny_run

pytestmark = [pytest.mark.lab01, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "train_mini.py"


def script(*args: str, cwd: Path, wait: bool = True):
    """Run train_mini.py with the repo's models/ kept clean (final models go under cwd/models)."""
    env = {**os.environ, "MINITRAIN_MODELS_DIR": str(cwd / "models")}
    command = [sys.executable, str(SCRIPT), *args]
    if not wait:
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_train_mini_writes_the_run_folder(tmp_path):
    config = write_tiny_run(tmp_path, plots=True)
    done = script("--config", str(config), "--out-dir", "run", "--seed", "3", "--models-dir", "run/models",
                  "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for name in RUN_FILES:
        assert (tmp_path / "run" / name).is_file(), name
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results.keys() >= RESULTS_KEYS and (tmp_path / results["model_path"]).is_file()  # relative to the cwd
    # --models-dir reaches `minitrain train`: the model is in the run folder, not in $MINITRAIN_MODELS_DIR.
    assert (tmp_path / results["model_path"]).parent == tmp_path / "run" / "models"
    assert not (tmp_path / "models").exists()
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["status"] == "completed"  # --seed overrides training.rng_seed
    assert "--seed 3" in (tmp_path / "run" / "config.resolved.yaml").read_text()

    # Once more into the same folder: refused, the first run untouched, until --overwrite replaces it.
    again = ("--config", str(config), "--out-dir", "run", "--models-dir", "run/models", "--quiet")
    refused = script(*again, cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.startswith("error: run holds another run (manifest.json, ")
    assert len(refused.stderr.splitlines()) == 1 and json.loads((tmp_path / "run" / "manifest.json").read_text())[
        "run_id"] == manifest["run_id"]
    replaced = script(*again, "--overwrite", cwd=tmp_path)
    assert replaced.returncode == 0, replaced.stderr
    second = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert second["seed"] == 42 and second["run_id"] != manifest["run_id"]
    assert json.loads((tmp_path / "run" / "results.json").read_text())["run_id"] == second["run_id"]


def test_nan_exits_non_zero_with_one_line(tmp_path):
    config = write_tiny_run(tmp_path)
    done = script("--config", str(config), "--out-dir", "run", "--quiet", "--set", "optimizer.lr_max=1.0e+30",
                  "--set", "optimizer.clip=null", "--set", "scheduler.warmup_steps=0", cwd=tmp_path)
    assert done.returncode == 3
    lines = done.stderr.strip().splitlines()
    # the absurd update makes the validation right after step 0 NaN: the run stops there, before saving those weights
    assert len(lines) == 1 and lines[0].startswith("error: training diverged: ") and " nan" in lines[0]
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["status"] == "diverged"


def test_missing_data_file_fails_before_any_work(tmp_path):
    config = write_tiny_run(tmp_path)
    (tmp_path / "data" / "val.jsonl").unlink()
    done = script("--config", str(config), "--out-dir", "run", cwd=tmp_path)
    assert done.returncode == 2 and "data.val_path" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()


def test_missing_config_argument_is_a_usage_error(tmp_path):
    done = script("--out-dir", "run", cwd=tmp_path)
    assert done.returncode == 2 and "--config" in done.stderr


@pytest.mark.lab02
def test_ctrl_c_saves_a_checkpoint_and_resume_finishes_the_same_run(tmp_path):
    config = write_tiny_run(tmp_path)
    longer = ["--set", "scheduler.total_steps=400", "--set", "training.val_every=3",
              "--set", "training.checkpoint.save_every=50", "--quiet"]
    straight = script("--config", str(config), "--out-dir", "straight", *longer, cwd=tmp_path)
    assert straight.returncode == 0, straight.stderr

    # Ctrl-C at a known step, however busy the machine: the child stops itself (SIGSTOP) while it saves
    # step-100.safetensors (test_resume.STOPPER), gets SIGINT there, and goes on.
    env = {**os.environ, "MINITRAIN_MODELS_DIR": str(tmp_path / "models"),
           "MINITRAIN_TEST_STOP": "step-100.safetensors"}
    running = subprocess.Popen([sys.executable, "-c", STOPPER, str(SCRIPT), "--config", str(config), "--out-dir",
                                "run", *longer], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    wait_until_stopped(running)
    running.send_signal(signal.SIGINT)
    running.send_signal(signal.SIGCONT)
    _, stderr = running.communicate(timeout=600)
    assert running.returncode == 130, stderr
    log = tmp_path / "run" / "train_log.jsonl"
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    # The save under way completes; the loop stops at the next step boundary and saves that state.
    assert manifest["status"] == "interrupted" and manifest["steps_done"] == 101
    # The command printed is the one that was run, with the checkpoint to resume from, runnable as printed.
    printed = shlex.split(stderr.split("resume with: ")[1])
    assert printed == [sys.executable, str(SCRIPT), "--config", str(config), "--out-dir", "run", *longer,
                       "--resume", f"run/checkpoints/step-{manifest['steps_done']}.safetensors"]
    env = {**os.environ, "MINITRAIN_MODELS_DIR": str(tmp_path / "models")}
    resumed = subprocess.run(printed, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert log.read_bytes() == (tmp_path / "straight" / "train_log.jsonl").read_bytes()
    final = [json.loads((tmp_path / d / "results.json").read_text())["model_path"] for d in ("run", "straight")]
    assert final[0] == final[1]


def load_script():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import train_mini
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return train_mini


def test_ctrl_c_while_minitrain_loads_is_one_line(monkeypatch, capsys):
    class Loading(types.ModuleType):
        def __getattr__(self, name):
            raise KeyboardInterrupt  # Ctrl-C while `from minitrain.cli import main` runs

    monkeypatch.setitem(sys.modules, "minitrain.cli", Loading("minitrain.cli"))
    assert load_script().main(["--config", "c.yaml"]) == 130
    assert capsys.readouterr().err == "error: interrupted\n"


def test_the_script_is_the_minitrain_train_command():
    train_mini = load_script()
    args = train_mini.parse_args(["--config", "c.yaml", "--out-dir", "o", "--seed", "4", "--set", "a.b=1",
                                  "--models-dir", "o/models"])
    assert train_mini.to_cli_args(args) == ["train", "c.yaml", "--set", "a.b=1", "--out-dir", "o",
                                            "--models-dir", "o/models", "--seed", "4"]
    args = train_mini.parse_args(["--config", "c.yaml", "--overwrite", "--quiet"])
    assert train_mini.to_cli_args(args) == ["train", "c.yaml", "--overwrite", "--quiet"]
