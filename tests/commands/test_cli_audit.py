"""What the audit of YAML mode found (issue 14, item 7), each fixed and kept fixed: a config error found by
`validate` (exit 2) rather than by `train` (exit 1), a lock that pins training and not folders, the file's own
templates checked whatever the command line replaces, a checklist that reads right, templates that cannot
trace back or leak secrets, and run names that stay inside runs/."""

from __future__ import annotations

import json

import pytest
from test_cli import run
from test_config import LAB01, NOW, problems, write
from test_config_data import config_for, make_corpus

from minitrain.config import load_config


def tiny_model(folder, **shape) -> str:
    """A minitrain model file of the config_for() shape (1 layer, d_model 16...), for model.init_from."""
    from minitrain.models.minigpt import MiniGPT
    from minitrain.runs.model_files import save_model_file

    config = dict(n_layer=1, n_head=2, d_model=16, d_ff=32, vocab_size=64, max_seq_len=32, **shape)
    model = MiniGPT(**config)
    path = folder / "base.safetensors"
    save_model_file(path, model.state_dict(), model.config, {})
    return str(path)


def test_validate_reports_a_missing_or_mismatched_init_from_as_a_config_error(tmp_path, capsys):
    folder = make_corpus(tmp_path / "d")
    base = tiny_model(tmp_path)
    cases = {
        "missing": (f"{tmp_path}/nowhere.safetensors", "no such file or folder"),
        "other shape": (base, "a model of another architecture: n_layer 1 (this config: 2)"),
    }
    for name, (source, fragment) in cases.items():
        path = config_for(folder, name=f"{name.replace(' ', '_')}.yaml")
        text = path.read_text().replace("model:\n", f"model:\n  init_from: {source}\n", 1)
        path.write_text(text)
        code, out, err = run(["validate", path], capsys)
        assert code == 2 and out == "", name
        assert f"{path}:2: model.init_from: " in err and fragment in err, err
        code, _, err = run(["train", path, "--dry-run"], capsys)
        assert code == 2 and fragment in err
    path = config_for(folder, name="fits.yaml")
    path.write_text(path.read_text().replace("model:\n", f"model:\n  init_from: {base}\n  n_layer: 1\n  n_head: 2\n"
                                                          "  d_model: 16\n  d_ff: 32\n", 1))
    code, out, _ = run(["validate", path], capsys)
    assert code == 0 and f"✓ model.init_from {base}: readable, of this architecture" in out


def test_a_locked_config_runs_into_another_folder(tmp_path, capsys):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder)
    assert run(["lock", path], capsys)[0] == 0
    code, out, err = run(["train", path, "--strict", "--dry-run", "--out-dir", tmp_path / "elsewhere",
                          "--models-dir", tmp_path / "models"], capsys)
    assert code == 0, err
    assert f"output_dir: {tmp_path / 'elsewhere'}" in out


def test_out_dir_does_not_hide_a_bad_template_in_the_file(tmp_path, capsys):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder, 'output:\n  dir: "runs/{{ nmae }}"\n')
    code, _, err = run(["train", path, "--dry-run", "--out-dir", tmp_path / "run"], capsys)
    assert code == 2 and "output.dir: in '{{ nmae }}': unknown name 'nmae' — did you mean 'name'?" in err
    assert "(in the file's value at line 12, which --out-dir" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("length", "shown"), [("total_steps: 10", "run: 10 steps of batch 2"),
                                               ("epochs: 3", "run: 3 epochs of batch 2"),
                                               ("epochs: 1", "run: 1 epoch of batch 2"),
                                               ("duration: 1h30m", "run: 1h30m on the clock, batch 2")])
def test_the_checklist_says_how_long_the_run_is_in_words(tmp_path, capsys, length, shown):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder)
    path.write_text(path.read_text().replace("total_steps: 10", length))
    code, out, _ = run(["validate", path], capsys)
    assert code == 0 and shown in out and "epoch(s)" not in out and "1h30m steps" not in out


# --- templates (issue 13, items 6 and 7) ----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["[1", "*x", "a: b: c", "!!python/object:os.system x", "{{"])
def test_an_environment_variable_that_is_not_a_yaml_scalar_is_one_error(tmp_path, value):
    text = LAB01.replace("  lr_max: 3e-4", '  lr_max: "{{ env.LR }}"')
    message = problems(tmp_path, text, env={"LR": value})
    assert "optimizer.lr_max: " in message and "Traceback" not in message
    message = problems(tmp_path, LAB01, ["optimizer.lr_max={{ env.LR }}"], env={"LR": value})
    assert "--set optimizer.lr_max={{ env.LR }}: optimizer.lr_max: " in message


@pytest.mark.parametrize("variable", ["HF_TOKEN", "hf_token", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "API_KEY"])
def test_secret_looking_variables_never_reach_the_config(tmp_path, variable):
    secret = "hf_abcdefghijklmnop"
    message = problems(tmp_path, LAB01 + f'description: "{{{{ env.{variable} }}}}"\n', env={variable: secret})
    assert f"env.{variable} looks like a secret" in message and secret not in message


@pytest.mark.parametrize(("name", "fragment"), [
    ("../../escape", "cannot name a run folder"),
    ("a/b", "cannot name a run folder"),
    (".hidden", "cannot name a run folder"),
    ("-rf", "cannot name a run folder"),
    ("a\\u0000b", "cannot name a run folder"),  # YAML's escape for a NUL character
    ("a b", "cannot name a run folder"),
    ("x" * 101, "cannot name a run folder"),
])
def test_a_run_name_is_one_safe_folder_name(tmp_path, name, fragment):
    message = problems(tmp_path, LAB01 + f'name: "{name}"\n')
    assert fragment in message


def test_names_made_from_file_names_are_safe_too(tmp_path):
    folder = tmp_path / "my exp (v2)"
    folder.mkdir()
    assert load_config(write(folder, LAB01, "config.yaml")).name == "my-exp--v2-"
    assert load_config(write(tmp_path, LAB01, ".hidden.yaml")).name == "hidden"
    assert load_config(write(tmp_path, LAB01, "verbos-ñ.yaml")).name == "verbos-ñ"


def test_expressions_compute_values_from_other_keys(tmp_path):
    cfg = load_config(write(tmp_path, """\
        name: verbs
        model:
          n_layer: "{{ 4 if training.batch_size >= 16 else 2 }}"
        training:
          batch_size: 16
          total_steps: "{{ 10 * 25 }}"
          val_every: "{{ training.total_steps // 5 }}"
          log_every: "{{ training.val_every // 5 }}"
          rng_seed: 7
        optimizer:
          lr_max: "{{ 1e-3 / 2 if model.n_layer > 2 and not (training.batch_size < 8) else 1e-3 }}"
        output:
          dir: "runs/{{ name }}-{{ model.n_layer }}l-{{ training.batch_size * 2 }}-{{ seed }}-{{ date }}"
        """), now=NOW)
    assert cfg.model.n_layer == 4 and cfg.training.total_steps == 250 and cfg.training.val_every == 50
    assert cfg.training.log_every == 10 and cfg.optimizer.lr_max == 5e-4
    assert cfg.output.dir == "runs/verbs-4l-32-7-2025-03-04"
    from minitrain.config import resolved_yaml

    assert "{{" not in resolved_yaml(cfg)  # config.resolved.yaml holds the values


def test_expressions_reach_keys_under_either_name(tmp_path):
    cfg = load_config(write(tmp_path, """\
        data:
          loader: {batch_size: 4}
        training:
          gradient: {accumulation_steps: 3}
          effective_batch_size: "{{ data.loader.batch_size * training.gradient.accumulation_steps }}"
          total_steps: "{{ training.batch_size * training.grad_accumulation }}"
        """))
    assert cfg.training.total_steps == 12


@pytest.mark.parametrize(("body", "fragment"), [
    ('a_key: "{{ b }}"', "unknown"),
    ('training:\n  total_steps: 10\n  val_every: "{{ training.log_every }}"\n  log_every: "{{ training.val_every }}"',
     "a cycle of references: training.val_every → training.log_every → training.val_every"),
    ('training:\n  total_steps: "{{ \'ten\' * 2 }}"', "'*' needs numbers, got the text 'ten'"),
    ('training:\n  total_steps: "{{ 10 if 1 else 20 }}"', "the condition of 'if' needs true or false, got 1"),
    ('training:\n  total_steps: "{{ 10 < \'a\' }}"', "cannot compare 10 < the text 'a'"),
    ('training:\n  total_steps: "{{ ' + "(" * 30 + "1" + ")" * 30 + ' }}"', "nested more than 20 levels deep"),
    ('training:\n  total_steps: "{{ ' + " + ".join(["1"] * 60) + ' }}"', "more than 100 tokens"),
    ('training:\n  total_steps: "{{ 10 ** 10 }}"', "unexpected '*'"),
    ('training:\n  total_steps: "{{ 99999999999999999999 * 99999999999999999999 * 99999999999999999999 * '
     '99999999999999999999 * 99999999999999999999 * 99999999999999999999 }}"', "a result out of range"),
    ('training:\n  total_steps: "{{ training.distributed.x }}"',
         "training.distributed is not supported: these are PyTorch DDP's keys"),
])
def test_expression_mistakes_are_validation_errors_with_the_key(tmp_path, body, fragment):
    message = problems(tmp_path, body + "\n" + ("" if "total_steps" in body else "training:\n  total_steps: 10\n"))
    assert fragment in message and "Traceback" not in message


def test_a_resolved_config_keeps_computed_values_not_templates(tmp_path):
    path = write(tmp_path, 'training:\n  total_steps: "{{ 3 * 4 }}"\n')
    from minitrain.config import resolved_dict

    assert resolved_dict(load_config(path))["training"]["total_steps"] == 12
    assert json.dumps(resolved_dict(load_config(path)))  # plain data


def test_the_specs_devices_flag_is_refused_with_the_reason(tmp_path, capsys):
    path = config_for(make_corpus(tmp_path / "d"))
    code, out, err = run(["train", path, "--devices", "0,1,2,3"], capsys)
    assert code == 2 and out == "" and "--devices 0,1,2,3: minitrain trains in one process on the CPU" in err
    assert "`minitrain export`" in err
