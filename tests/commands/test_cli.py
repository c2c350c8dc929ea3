"""The `minitrain` command line: validate, schema, init, lock, info, train's checks, and command registration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_config import LAB01
from test_config_data import config_for, make_corpus

from minitrain import cli
from minitrain.data.corpus import make_record, records_to_jsonl

ROOT = Path(__file__).parents[2]


def run(argv, capsys) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_prints_a_checklist_and_exits_0(tmp_path, capsys):
    path = config_for(make_corpus(tmp_path / "d"))
    code, out, err = run(["validate", path, "--set", "training.batch_size=1"], capsys)
    assert code == 0 and err == ""
    assert out.startswith(f"✓ YAML read safely: {path}") and out.rstrip().endswith("config is valid.")
    assert "overrides: --set training.batch_size=1" in out and "✓ data: train 4 records, val 2 records" in out
    assert "steps of batch 1 × 1" in out


def test_validate_lab01_on_the_committed_corpus(tmp_path, capsys, monkeypatch):
    (tmp_path / "config.yaml").write_text(LAB01, encoding="utf-8")
    monkeypatch.chdir(ROOT)
    code, out, _ = run(["validate", tmp_path / "config.yaml"], capsys)
    assert code == 0 and "2000 steps of batch 8 × 1, adamw" in out


def test_invalid_config_exits_2_with_every_problem_and_no_traceback(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("optimizer:\n  lr_mx: 1e-3\ntraining:\n  total_steps: 0\n", encoding="utf-8")
    code, out, err = run(["validate", path], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {path} has 2 problems:")
    assert f"{path}:2: optimizer.lr_mx: unknown key — did you mean 'lr_max'?" in err
    assert f"{path}:4: training.total_steps: must be greater than or equal to 1" in err


def test_a_real_process_exits_2_without_traceback(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("modle: {}\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "minitrain.cli", "validate", str(path), "--no-data"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "modle: unknown key — did you mean 'model'?" in done.stderr


def test_missing_config_file(tmp_path, capsys):
    code, _, err = run(["validate", tmp_path / "nope.yaml"], capsys)
    assert code == 2 and "config file not found" in err


def test_schema_is_json_schema(capsys):
    code, out, _ = run(["schema"], capsys)
    schema = json.loads(out)
    assert code == 0 and schema["additionalProperties"] is False
    assert "lr_max" in schema["$defs"]["OptimizerConfig"]["properties"]


# --- init ---------------------------------------------------------------------------------------------------------


def test_init_lab01_on_the_corpus_writes_lab01_block_exactly(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, _ = run(["init", "--template", "lab01"], capsys)
    assert code == 0 and out == LAB01


@pytest.mark.parametrize("template", ["minimal", "lab01"])
def test_init_templates_validate_for_jsonl_data(tmp_path, capsys, template):
    folder = make_corpus(tmp_path / "d")
    out = tmp_path / f"{template}.yaml"
    code, printed, _ = run(["init", "--template", template, "--data", folder, "-o", out], capsys)
    assert code == 0 and f"wrote {out}" in printed
    code, checked, _ = run(["validate", out], capsys)
    assert code == 0 and "✓ data: train 4 records, val 2 records" in checked
    if template == "minimal":
        text = out.read_text(encoding="utf-8")
        assert "max_seq_len: 17" in text and "batch_size: 4" in text and "format" not in text


def test_init_detects_plain_text_and_builds_a_vocabulary(tmp_path, capsys):
    folder = tmp_path / "txt"
    folder.mkdir()
    (folder / "train.txt").write_text("el gato duerme\nla casa es azul\n", encoding="utf-8")
    (folder / "val.txt").write_text("el perro come\n", encoding="utf-8")
    out = tmp_path / "c.yaml"
    code, _, err = run(["init", "--data", folder, "-o", out], capsys)
    assert code == 0 and f"wrote {folder}/vocab.json" in err
    text = out.read_text(encoding="utf-8")
    assert "format: text" in text and "loss_on: all" in text and "heldout_policy: none" in text
    assert run(["validate", out], capsys)[0] == 0


def test_init_detects_jsonl_by_content_not_extension(tmp_path, capsys):
    folder = make_corpus(tmp_path / "d")
    for split in ("train", "val"):
        (folder / f"{split}.jsonl").rename(folder / f"{split}.txt")
    code, out, _ = run(["init", "--data", folder], capsys)
    assert code == 0 and "format" not in out and "heldout_policy: verbs_4" in out


@pytest.mark.parametrize(("name", "damage", "message"), [
    ("train.txt", b"\xff\xfe not utf-8\n", ":2: not valid UTF-8"),
    ("train.jsonl", b'{"text": 1' + b"0" * 5000 + b"}\n", ":2: invalid JSON (a number too long or nesting too deep)"),
])
def test_init_on_unreadable_data_is_exit_2(tmp_path, capsys, name, damage, message):
    folder = tmp_path / "data"
    folder.mkdir()
    good = records_to_jsonl([make_record("hablar", "P", 1, "hablo")]).encode()
    (folder / name).write_bytes(good + damage)
    (folder / name.replace("train", "val")).write_bytes(good)
    code, out, err = run(["init", "--data", folder], capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"error: {folder / name}") and message in err and not (folder / "vocab.json").exists()


def test_init_promises_held_out_verbs_only_when_the_data_holds_them_out(tmp_path, capsys):
    folder = make_corpus(tmp_path / "d")  # val: bailar, which train never conjugates
    assert "heldout_policy: verbs_4" in run(["init", "--data", folder], capsys)[1]
    (folder / "val.jsonl").write_bytes((folder / "train.jsonl").read_bytes())
    (folder / "vocab.json").unlink()
    out = tmp_path / "c.yaml"
    code, _, err = run(["init", "--data", folder, "-o", out], capsys)
    assert code == 0, err
    assert "heldout_policy: none   # val shares verbs with train" in out.read_text()
    assert run(["validate", out], capsys)[0] == 0


def test_init_refuses_to_overwrite_and_needs_splits(tmp_path, capsys):
    folder = make_corpus(tmp_path / "d")
    out = tmp_path / "c.yaml"
    out.write_text("keep me\n", encoding="utf-8")
    code, _, err = run(["init", "--data", folder, "-o", out], capsys)
    assert code == 2 and "this command wrote; pass --force" in err and out.read_text() == "keep me\n"
    assert run(["init", "--data", folder, "-o", out, "--force"], capsys)[0] == 0
    code, _, err = run(["init", "--data", tmp_path], capsys)
    assert code == 2 and "expected train.jsonl and val.jsonl" in err


# --- lock and train --strict --------------------------------------------------------------------------------------


def test_lock_then_strict_train_refuses_a_changed_data_file(tmp_path, capsys):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder)
    code, out, err = run(["lock", path], capsys)
    lock_file = folder / "c.lock.yaml"
    assert code == 0 and out == "" and f"wrote {lock_file}" in err and "sha256 of 3 data files" in err
    assert run(["validate", lock_file], capsys)[0] == 0  # a lock file is a loadable config
    with (folder / "val.jsonl").open("a", encoding="utf-8") as f:
        f.write(records_to_jsonl([make_record("bailar", "P", 1, "bailo")]))
    for config in (path, lock_file):
        code, out, err = run(["train", config, "--strict", "--dry-run"], capsys)
        assert code == 2 and f"--strict: this run differs from {lock_file}" in err
        assert f"data {folder}/val.jsonl: content changed" in err


def test_strict_train_refuses_a_changed_setting(tmp_path, capsys):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder)
    assert run(["lock", path], capsys)[0] == 0
    code, _, err = run(["train", path, "--strict", "--seed", "3"], capsys)
    assert code == 2 and "config training.rng_seed: locked 42, now 3" in err


def test_strict_train_without_a_lock(tmp_path, capsys):
    path = config_for(make_corpus(tmp_path / "d"))
    code, _, err = run(["train", path, "--strict"], capsys)
    assert code == 2 and "run `minitrain lock CONFIG` first" in err


def test_train_checks_config_and_data_before_anything(tmp_path, capsys):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder)
    code, _, err = run(["train", path, "--set", "model.max_seq_len=8", "--out-dir", tmp_path / "run"], capsys)
    assert code == 2 and "model.max_seq_len: max_seq_len 8 is shorter than the longest record" in err
    code, _, err = run(["train", path, "--resume", tmp_path / "nowhere"], capsys)
    assert code == 2 and "--resume" in err and "no such run folder or checkpoint" in err
    assert not (tmp_path / "run").exists()


# --- info -----------------------------------------------------------------------------------------------------------


def test_info_summarises_a_run_folder(tmp_path, capsys):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({"status": "completed", "seed": 42}), encoding="utf-8")
    (run_dir / "results.json").write_text(json.dumps({"val_ppl": 3.25, "beats_baseline": True}), encoding="utf-8")
    rows = [{"step": 0, "loss": 4.0}, {"step": 0, "val_loss": 4.1, "val_ppl": 60.3}, {"step": 10, "loss": 1.0},
            {"step": 10, "val_loss": 1.5, "val_ppl": 4.48}]
    (run_dir / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (run_dir / "config.resolved.yaml").write_text("name: lab01\nmodel: {n_layer: 2, n_head: 4}\n", encoding="utf-8")
    (run_dir / "checkpoints" / "latest").write_text("step-10.safetensors\n", encoding="utf-8")
    code, out, _ = run(["info", run_dir], capsys)
    assert code == 0
    assert "status: completed" in out and "config: lab01 — n_layer 2, n_head 4" in out
    assert "log: 4 rows, last step 10, loss 1" in out and "best 1.5 at step 10" in out
    assert "val_ppl: 3.25" in out and "beats_baseline: True" in out and "quality: " in out
    # convergence 100 (the loss fell, no setback), generalization 100·exp(1.0 − 1.5) = 60.65; the rest unmeasured
    assert "quality: 80.3 / 100, grade B+ (good, minor issues): how training went, not how good the model is" in out
    assert ("  the mean of convergence 100.0, generalization 60.7 (each 0–100; not measured: stability, efficiency, "
            "reproducibility; report.md says what each measures)") in out
    assert "latest checkpoint: step-10.safetensors" in out
    code, _, err = run(["info", tmp_path / "empty"], capsys)
    assert code == 2 and "not a run folder" in err


@pytest.mark.parametrize(("name", "text", "message"), [
    ("config.resolved.yaml", "model: [1\n", "config.resolved.yaml:2: not valid YAML (expected ',' or ']', but "
                                            "got '<stream end>')"),
    ("manifest.json", "{", "manifest.json: the run manifest is not valid JSON"),
    ("train_log.jsonl", '{"step": "x", "loss": 1.0}\n', "train_log.jsonl:1: a log row must be a JSON object"),
    ("results.json", "[1, 2]", "results.json: the results file must be a JSON object, not a list"),
    ("results.json", '{"wall_seconds": "12.5"}', "results.json: wall_seconds: input should be a valid number, got a "
                                                 "string ('12.5')"),
    ("results.json", '{"model_path": 5}', "results.json: model_path: input should be a valid string, got an integer"),
    ("manifest.json", '{"wall_seconds": -1e308}', "manifest.json: wall_seconds: input should be greater than or "
                                                  "equal to 0"),
    ("manifest.json", '{"status": "done"}', "manifest.json: status: input should be 'running', 'finishing',"),
    ("manifest.json", '{"seed": 1' + "0" * 4400 + "}", "manifest.json: the run manifest holds an integer of more"),
    ("config.resolved.yaml", "a: &x [*x]\n", "config.resolved.yaml:1: not valid YAML (an alias refers to a node "
                                             "that contains it"),
    ("config.resolved.yaml", "data: {train_path: 5}\n", "config.resolved.yaml: data.train_path: input should be a "
                                                         "valid string"),
])
def test_info_on_a_damaged_run_folder_is_one_line(tmp_path, capsys, name, text, message):
    (tmp_path / name).write_text(text, encoding="utf-8")
    code, out, err = run(["info", tmp_path], capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"error: {tmp_path / name}") and message in err


def test_running_out_of_memory_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch):
    import minitrain.training.run

    def too_big(cfg, summary=None):
        raise MemoryError("Unable to allocate 477. GiB for an array with shape (64, 1000000000)")

    monkeypatch.setattr(minitrain.training.plan, "plan_run", too_big)
    code, out, err = run(["train", config_for(make_corpus(tmp_path / "d")), "--dry-run"], capsys)
    assert code == 1 and out == ""
    assert err == ("error: out of memory (Unable to allocate 477. GiB for an array with shape (64, 1000000000)); "
                   "make the model (model.*) or the batch (training.batch_size) smaller\n")


def test_a_core_refusal_is_one_error_line_and_any_other_value_error_stays_a_traceback(tmp_path, capsys,
                                                                                       monkeypatch):
    import minitrain.training.plan
    from minitrain import Tensor, nn
    from minitrain.models.attention_map import attention_line
    from minitrain.models.minigpt import MiniGPT

    config = config_for(make_corpus(tmp_path / "d"))
    refusals = {  # what the core refuses (an ArgumentError, a ValueError), as a config check would have
        "model.n_head: d_model 8 is not divisible by n_head 3; each head needs d_model / n_head dimensions":
            lambda: MiniGPT(n_layer=1, n_head=3, d_model=8, d_ff=8, vocab_size=8, max_seq_len=4),
        "attention: a Linear has no attention layers; only MiniGPT does":
            lambda: attention_line(nn.Linear(2, 2), None, ""),
    }
    for message, refuse in refusals.items():
        monkeypatch.setattr(minitrain.training.plan, "plan_run", lambda cfg, summary=None, refuse=refuse: refuse())
        code, out, err = run(["train", config, "--dry-run"], capsys)
        assert (code, out, err) == (2, "", f"dry run: checking the data\nerror: {message}\n")
    bugs = {  # a ValueError that is no refusal: NumPy inside a core function, a core guard, code outside the core
        "cannot reshape array": lambda: Tensor(np.ones(3)).reshape(4),
        "unknown activation": lambda: nn.Linear(2, 2, activation="relu6"),
        "invalid literal": lambda: int("three"),
    }
    for message, bug in bugs.items():
        monkeypatch.setattr(minitrain.training.plan, "plan_run", lambda cfg, summary=None, bug=bug: bug())
        with pytest.raises(ValueError, match=message):
            cli.main(["train", str(config), "--dry-run"])


# --- registering command groups -------------------------------------------------------------------------------------


def add_command(tmp_path, monkeypatch, name: str, source: str) -> None:
    """A command module minitrain/commands/<name>.py, written in tmp_path, and its one entry in COMMANDS."""
    import minitrain.commands

    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    monkeypatch.setattr(minitrain.commands, "__path__", [*minitrain.commands.__path__, str(tmp_path)])
    monkeypatch.setitem(minitrain.commands.COMMANDS, name, f"the {name} command")
    monkeypatch.delitem(sys.modules, f"minitrain.commands.{name}", raising=False)


def test_a_command_module_is_registered_by_one_list_entry(tmp_path, capsys, monkeypatch):
    add_command(tmp_path, monkeypatch, "hello", (
        "from minitrain.common.errors import UserError\n"
        "def register(parser):\n"
        "    parser.add_argument('--fail', action='store_true')\n"
        "    parser.set_defaults(handler=run)\n"
        "def run(args):\n"
        "    if args.fail:\n"
        "        raise UserError('hello failed', 7)\n"
        "    print('hi')\n"
        "    return 0\n"))
    assert run(["hello"], capsys) == (0, "hi\n", "")
    assert run(["hello", "--fail"], capsys) == (7, "", "error: hello failed\n")
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "    hello         the hello command\n" in capsys.readouterr().out


def test_ctrl_c_while_the_command_module_loads_is_one_line(tmp_path, capsys, monkeypatch):
    add_command(tmp_path, monkeypatch, "slow", "raise KeyboardInterrupt  # Ctrl-C while importing\n")
    assert run(["slow", "x.yaml"], capsys) == (130, "", "error: interrupted\n")


def test_a_command_module_loads_only_when_its_command_runs(tmp_path, capsys, monkeypatch):
    add_command(tmp_path, monkeypatch, "broken", "raise RuntimeError('imported')\n")
    assert run(["info", tmp_path / "missing"], capsys)[0] == 2  # another command: the broken module stays unread
    with pytest.raises(RuntimeError, match="imported"):
        cli.main(["broken"])


def test_help_and_validate_import_neither_numba_nor_the_models_nor_the_command_modules():
    """`minitrain --help` lists every command without importing one (nor NumPy, numba, the autograd core, the models,
    pydantic, the config); `minitrain validate` imports its own command module and the config, but not numba (its
    kernels load on first use) nor the training engine."""
    probe = ("import sys\n"
             "from minitrain import cli\n"
             "try:\n"
             "    cli.main(sys.argv[1:])\n"
             "except SystemExit:\n"
             "    pass\n"
             "print(' '.join(sorted(sys.modules)))\n")
    help_out = subprocess.run([sys.executable, "-c", probe, "--help"], capture_output=True, text=True, check=True,
                              cwd=ROOT).stdout
    assert "    validate      check a config" in help_out and "    lab           start a lab's" in help_out
    assert "fine-tuned in full or with LoRA / QLoRA" in " ".join(help_out.split())  # what it is for, wrapped
    loaded = set(help_out.split("\n")[-2].split())
    assert "minitrain.cli" in loaded
    assert not {m for m in loaded if m.startswith(("minitrain.commands.", "minitrain.models", "minitrain.config",
                                                   "minitrain.autograd", "numba", "numpy", "pydantic", "yaml"))}
    loaded = set(subprocess.run([sys.executable, "-c", probe, "validate", "experiments/18-train-mini/config.yaml"],
                                capture_output=True, text=True, check=True, cwd=ROOT).stdout.split("\n")[-2].split())
    assert {"minitrain.commands.validate", "minitrain.config.loader"} <= loaded
    assert not {m for m in loaded if m.startswith(("numba", "minitrain.training", "minitrain.commands.train"))}
