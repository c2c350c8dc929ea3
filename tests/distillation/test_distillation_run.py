"""Distillation in a run (the `distillation:` section): the section's switch and checks, the teachers a run
refuses (one `error:` line, exit code 2), resume bit-exact with a teacher in the loss, and experiment 24's
pipeline on 3-step runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_damage import run_cli
from test_run import log_rows, train_tiny

from minitrain.common.errors import UserError
from minitrain.config import ConfigError, load_config
from minitrain.course.fixtures import write_tiny_run
from minitrain.models.registry import build_model
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.model_files import save_model_file

REPO = Path(__file__).resolve().parents[2]
DROPOUT = ["model.dropout=0.1", "training.log_every=1"]  # the training RNG matters to a resume


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    """The tiny corpus and config; a teacher run on it (with dropout: it must not act while teaching); the
    student distilled from it without a stop, to compare against."""
    root = tmp_path_factory.mktemp("distill")
    config = write_tiny_run(root)
    teacher = root / "teacher"
    train_tiny(config, teacher, ["model.dropout=0.2", "model.d_model=32", "model.d_ff=64"])
    distill = [*DROPOUT, f"distillation.teacher={teacher}", "distillation.temperature=2.0",
               "distillation.alpha=0.5"]
    straight = train_tiny(config, root / "straight", distill)
    return {"root": root, "config": config, "teacher": teacher, "distill": distill, "straight": straight}


def test_the_section_is_on_when_given_and_off_when_it_says_so(setup):
    config, teacher = setup["config"], setup["teacher"]
    assert not load_config(config).distillation.enabled
    on = load_config(config, [f"distillation.teacher={teacher}"]).distillation
    assert on.enabled and on.sources() == [(str(teacher), 1.0)] and (on.temperature, on.alpha) == (2.0, 0.5)
    assert not load_config(config, [f"distillation.teacher={teacher}", "distillation.enabled=false"]
                           ).distillation.enabled


def test_several_teachers_weights_are_normalized(setup):
    cfg = load_config(setup["config"], ["distillation.teachers=[{model: a, weight: 3}, {model: b, weight: 1}]"])
    assert cfg.distillation.sources() == [("a", 0.75), ("b", 0.25)]


@pytest.mark.parametrize(("overrides", "message"), [
    (["distillation.temperature=2.0"], "give one teacher"),
    (["distillation.teacher=a", "distillation.teachers=[{model: b}]"], "not both"),
    (["distillation.teachers=[{model: a, weight: -1}]"], "greater than or equal to 0"),
    (["distillation.teachers=[{model: a, weight: 0}]"], "sum to 0"),
    (["distillation.teacher=a", "distillation.alpha=1.5"], "less than or equal to 1"),
    (["distillation.teacher=a", "distillation.temperature=0"], "greater than 0"),
    (["distillation.teacher=a", "distillation.temprature=2"], "temprature"),
])
def test_a_bad_section_is_a_config_error_naming_the_key(setup, overrides, message):
    with pytest.raises(ConfigError, match=message) as info:
        load_config(setup["config"], overrides)
    assert "distillation" in str(info.value)


def test_alpha_one_trains_exactly_the_plain_run(setup, tmp_path):
    config, teacher = setup["config"], setup["teacher"]
    plain = train_tiny(config, tmp_path / "plain", DROPOUT)
    hard_only = train_tiny(config, tmp_path / "hard", [*DROPOUT, f"distillation.teacher={teacher}",
                                                       "distillation.alpha=1.0"])
    assert (tmp_path / "plain" / "train_log.jsonl").read_bytes() == (tmp_path / "hard" / "train_log.jsonl"
                                                                       ).read_bytes()
    assert plain["val_ppl"] == hard_only["val_ppl"]
    # and with the teacher's weight in the loss the updates differ
    distilled = log_rows(setup["root"] / "straight")
    assert [r["loss"] for r in distilled if "loss" in r] != [r["loss"] for r in log_rows(tmp_path / "plain")
                                                            if "loss" in r]


@pytest.mark.parametrize("k", [3, 10, 13])
def test_a_distilled_run_stopped_after_k_steps_resumes_bit_exactly(setup, k):
    root, config, distill = setup["root"], setup["config"], setup["distill"]
    run_dir = root / f"split-{k}"
    with pytest.raises(UserError, match=f"halted after {k} steps"):
        train_tiny(config, run_dir, [*distill, "training.checkpoint.save_every=1",
                                     f"monitoring.alerts=['step >= {k - 1}: halt']"])
    assert CheckpointManager(run_dir).latest().name == f"step-{k}.safetensors"
    resumed = train_tiny(config, run_dir, [*distill, "training.checkpoint.save_every=1"], resume=run_dir)
    assert (run_dir / "train_log.jsonl").read_bytes() == (root / "straight" / "train_log.jsonl").read_bytes()
    assert resumed["model_path"] == setup["straight"]["model_path"]  # named by content hash: identical bytes
    assert resumed["val_ppl"] == setup["straight"]["val_ppl"]


def train_error(config: Path, tmp_path: Path, *sets: str) -> str:
    """`minitrain validate` and `minitrain train` with `sets`: the problem both report under the key
    (exit code 2, one `error:` line, no traceback, no run folder)."""
    out = tmp_path / "refused"
    overrides = [a for s in sets for a in ("--set", s)]
    found = []
    for argv in (["validate", str(config), *overrides], ["train", str(config), "--out-dir", str(out), "--quiet",
                                                          *overrides]):
        code, _, err = run_cli(argv)
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
        assert errors[0] == f"error: {config} has 1 problem:", err
        found.append(err.splitlines()[1].split(": ", 1)[1])  # after the --set that gave the key
    assert not out.exists()
    assert found[0] == found[1]
    return found[0]


def test_a_missing_teacher_is_one_error_line(setup, tmp_path):
    line = train_error(setup["config"], tmp_path, f"distillation.teacher={tmp_path / 'nowhere'}")
    assert line.startswith(f"distillation.teacher: {tmp_path / 'nowhere'}: no such file or folder")


def test_a_damaged_teacher_is_one_error_line(setup, tmp_path):
    damaged = tmp_path / "teacher.safetensors"
    damaged.write_bytes((setup["teacher"] / "results.json").read_bytes()[:40])
    line = train_error(setup["config"], tmp_path, f"distillation.teacher={damaged}")
    assert line.startswith(f"distillation.teacher: {damaged}: ") and "safetensors" in line


def test_a_teacher_of_another_vocabulary_size_is_refused(setup, tmp_path):
    other = build_model(dict(n_layer=1, n_head=2, d_model=16, d_ff=32, vocab_size=48, max_seq_len=32),
                        rng=np.random.default_rng(0))
    path = tmp_path / "small-vocab.safetensors"
    save_model_file(path, other.state_dict(), other.config)
    line = train_error(setup["config"], tmp_path, f"distillation.teacher={path}")
    assert "the teacher predicts over 48 ids, the student over 64" in line


def test_a_teacher_trained_on_other_characters_is_refused_naming_the_first(setup, tmp_path):
    config = write_tiny_run(tmp_path)
    vocab = tmp_path / "data" / "vocab.json"
    data = json.loads(vocab.read_text())
    chars = data["chars"]
    used = "".join((tmp_path / "data" / f"{split}.jsonl").read_text() for split in ("train", "val", "dev"))
    # One character the tiny corpus never uses becomes another (the list stays sorted, as a vocabulary must).
    i, new = next((i, chr(o)) for i, c in enumerate(chars) if c not in used
                  for o in range(ord(chars[i - 1]) + 1 if i else 33, ord(chars[i + 1]) if i + 1 < len(chars) else 0x2FF)
                  if chr(o) not in chars and chr(o).isalnum())
    old, chars[i] = chars[i], new
    vocab.write_text(json.dumps(data))
    train_tiny(config, tmp_path / "other-chars")
    line = train_error(setup["config"], tmp_path, f"distillation.teacher={tmp_path / 'other-chars'}")
    assert f"first at id {i + 3} ({new!r} against {old!r})" in line  # ids 0-2 are PAD, BOS, EOS


def test_a_teacher_with_a_shorter_context_is_refused(setup, tmp_path):
    short = build_model(dict(n_layer=1, n_head=2, d_model=16, d_ff=32, vocab_size=64, max_seq_len=8),
                        rng=np.random.default_rng(0))
    path = tmp_path / "short.safetensors"
    save_model_file(path, short.state_dict(), short.config)
    line = train_error(setup["config"], tmp_path, f"distillation.teacher={path}")
    assert "reads at most 8 positions" in line


def test_experiment_24_runs_end_to_end_on_3_step_runs(tmp_path):
    subprocess.run([sys.executable, str(REPO / "experiments" / "24-distillation" / "run.py"), "--quick",
                    str(tmp_path)], check=True, cwd=REPO, capture_output=True)
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["main"]) == {"student", "distill"}
    assert results["teacher"]["parameters"] == 106240
    for name in ("student", "distill"):
        runs = results["main"][name]["runs"]
        assert set(runs) == {"42", "43"} and all(r["steps"] == 3 and r["parameters"] == 56256 for r in runs.values())
    assert results["main"]["student"]["runs"]["42"]["val_ppl"] != results["main"]["distill"]["runs"]["42"]["val_ppl"]
    chained = results["progressive"]["T2"]["runs"]["42"]  # the student taught through its assistant
    assert (chained["steps"], chained["parameters"], chained["assistant"]["steps"]) == (3, 56256, 3)


def test_validate_lists_the_teachers_and_the_loss(setup):
    config, teacher = str(setup["config"]), setup["teacher"]
    code, out, err = run_cli(["validate", config, "--set", f"distillation.teacher={teacher}", "--set",
                              "distillation.alpha=0.25"])
    assert code == 0, err
    assert f"✓ distillation from {teacher}: T 2, loss 0.25 · hard + 0.75 · T² · KL(teacher ‖ student)\n" in out
    code, out, err = run_cli(["validate", config, "--set",
                              f"distillation.teachers=[{{model: {teacher}, weight: 3}}, {{model: {teacher}}}]"])
    assert code == 0, err
    assert f"✓ distillation from {teacher} (weight 0.75), {teacher} (weight 0.25): T 2," in out


def test_a_teacher_of_another_family_teaches(setup, tmp_path):
    """The committed MLP-LM (experiment 16) teaching the tiny MiniGPT: the teacher's forward is the family's own."""
    mlp = REPO / "models" / "mlp-lm-f01987eef0d24fef.safetensors"
    taught = train_tiny(setup["config"], tmp_path / "taught", [*DROPOUT, f"distillation.teacher={mlp}"])
    plain = train_tiny(setup["config"], tmp_path / "plain", DROPOUT)
    assert taught["status"] == "completed" and taught["val_ppl"] != plain["val_ppl"]


def test_a_resume_refuses_a_teacher_whose_weights_changed_under_the_same_path(setup, tmp_path):
    config = setup["config"]
    first = build_model(dict(n_layer=1, n_head=2, d_model=16, d_ff=32, vocab_size=64, max_seq_len=32),
                        rng=np.random.default_rng(1))
    teacher = tmp_path / "teacher.safetensors"
    save_model_file(teacher, first.state_dict(), first.config)
    run_dir = tmp_path / "run"
    sets = [f"distillation.teacher={teacher}", "training.checkpoint.save_every=4"]
    with pytest.raises(UserError, match="halted after 9 steps"):  # the first train row at or after step 7
        train_tiny(config, run_dir, [*sets, "monitoring.alerts=['step >= 7: halt']"])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["data_sha256"]["distillation.teacher"]["path"] == str(teacher)

    other = build_model(first.config, rng=np.random.default_rng(2))  # other weights, the same file name
    save_model_file(teacher, other.state_dict(), other.config)
    with pytest.raises(UserError, match=r"\(distillation.teacher\) has changed since .*step-9.safetensors was saved"):
        train_tiny(config, run_dir, sets, resume=run_dir)
