"""A family's record is the one place its rules and capabilities live (minitrain/models/family.py): `validate` and
`train` refuse a config that breaks the family's `check` with the same one line, a model file is held to the same
rules, and a family without a capability a config asks for is refused by `validate` with the reason. The last
tests drop the bigram family of docs/extending.md into a copy of minitrain, so they hold for any family."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from test_cli import run

from minitrain.common.errors import ArgumentError
from minitrain.course.fixtures import write_tiny_data
from minitrain.models.registry import FAMILIES, build_model, model_keys, refusal
from minitrain.runs.model_files import save_model_file

ROOT = Path(__file__).resolve().parents[2]
LLAMA = FAMILIES["llama"].example  # n_head 4, n_kv_head 2, d_model 16


def write_config(folder: Path, model: dict, **sections) -> Path:
    data = write_tiny_data(folder, baseline_ppl=1000.0)
    config = {"model": model, "optimizer": {"lr_max": 1e-3}, "scheduler": {"total_steps": 2},
              "training": {"batch_size": 4, "val_every": 2}, "monitoring": {"progress": "none"},
              "data": {"train_path": f"{data}/train.jsonl", "val_path": f"{data}/val.jsonl",
                       "vocab_path": f"{data}/vocab.json"}, **sections}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def problem_lines(err: str) -> list[str]:
    """The problems of a refused config, without the file's name and line (validate and train print the same)."""
    return [line.split(": ", 1)[1] for line in err.splitlines() if line.startswith("  ")]


@pytest.mark.parametrize(("keys", "line"), [
    ({"n_kv_head": 3}, "model.n_kv_head: n_head 4 is not a multiple of n_kv_head 3; each key/value head serves "
                       "n_head / n_kv_head query heads"),
    ({"d_model": 63}, "model.n_head: d_model 63 is not divisible by n_head 4; each head needs d_model / n_head "
                      "dimensions"),
    ({"head_dim": 7}, "model.head_dim: 7 is odd; rotary embeddings rotate pairs of dims"),
    ({"d_model": 12}, "model.n_head: d_model / n_head = 3 is odd; rotary embeddings rotate pairs of dims (or give an "
                      "even head_dim)"),
])
def test_validate_and_train_refuse_what_breaks_the_familys_rules_with_the_same_line(tmp_path, capsys, monkeypatch,
                                                                                  keys, line):
    monkeypatch.chdir(tmp_path)  # a run would go to runs/<name> here
    config = write_config(tmp_path, {**LLAMA, **keys})
    refused = [run([command, config], capsys) for command in ("validate", "train")]
    for code, _, err in refused:
        assert code == 2 and err.startswith("error: ") and "has 1 problem" in err and "Traceback" not in err
        assert problem_lines(err) == [line]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("name", "keys", "line"), [
    ("llama", {"n_kv_head": 3}, "model.n_kv_head: n_head 4 is not a multiple of n_kv_head 3; each key/value head "
                                "serves n_head / n_kv_head query heads"),
    ("llama", {"d_model": 12}, "model.n_head: d_model / n_head = 3 is odd; rotary embeddings rotate pairs of dims (or "
                               "give an even head_dim)"),
    ("minigpt", {"n_head": 3}, "model.n_head: d_model 16 is not divisible by n_head 3; each head needs d_model / "
                               "n_head dimensions"),
])
def test_a_models_constructor_refuses_what_breaks_its_familys_rules_with_the_same_line(name, keys, line):
    with pytest.raises(ArgumentError) as error:  # built from Python, with no config check before it
        build_model({**FAMILIES[name].example, **keys})
    assert str(error.value) == line


def test_a_model_file_is_held_to_the_familys_rules():
    saved = {**LLAMA, "head_dim": 4, "rope_theta": 1e4, "rms_norm_eps": 1e-5, "tie_embeddings": True,
             "attention_bias": False}
    schema = FAMILIES["llama"].file_schema
    schema.model_validate(saved)
    with pytest.raises(ValidationError, match="n_head 4 is not a multiple of n_kv_head 3"):
        schema.model_validate({**saved, "n_kv_head": 3})


@pytest.mark.parametrize("name", ["minigpt", "mlp_lm", "llama"])
@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_a_model_files_float_keys_are_finite_like_a_configs(name, value, tmp_path, capsys):
    """`rope_theta: .inf` is refused in a config (Section); a model file's config is held to it too, every float."""
    config = build_model(FAMILIES[name].example).config
    floats = [key for key, field in FAMILIES[name].file_schema.model_fields.items() if "float" in str(field.annotation)]
    for key in floats:
        with pytest.raises(ValidationError):
            FAMILIES[name].file_schema.model_validate({**config, key: value})
    if name == "llama":
        path = tmp_path / "m.safetensors"
        save_model_file(path, build_model(config).state_dict(), {**config, "rope_theta": value})
        code, _, err = run(["quantize", path, tmp_path / "q.safetensors", "--bits", "8"], capsys)
        assert code == 2 and err.count("\n") == 1 and "model_config.rope_theta: input should be" in err


OPTIONAL = {"minigpt": ["attn_scale"], "llama": ["rope_scaling", "sliding_window", "layer_types"],
            "gemma": ["rope_scaling", "rope_local_theta", "query_pre_attn_scalar", "attn_logit_softcapping",
                      "final_logit_softcapping", "sliding_window", "layer_types"]}


@pytest.mark.parametrize("name", ["minigpt", "mlp_lm", "llama", "gemma"])
def test_a_file_schema_is_derived_from_the_constructor_and_the_model_keys(name):
    """Each constructor key is in the file schema, required but for dropout and the ones the model may leave out."""
    family = FAMILIES[name]
    fields = family.file_schema.model_fields
    assert set(fields) - {"type"} == set(model_keys(name))
    optional = {key for key, field in fields.items() if not field.is_required()}
    assert optional == {"dropout", *OPTIONAL.get(name, [])}
    assert ("type" in fields) is (name != "minigpt")  # MiniGPT's files predate `type`
    config = build_model(family.example).config  # what a model file of the example holds
    assert family.file_schema.model_validate(dict(config)).model_dump(exclude_unset=True) == config
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        family.file_schema.model_validate({**config, "vocab_size": 0})


def test_a_refusal_names_the_families_whose_record_has_the_capability():
    assert refusal("llama", "packing") is None and refusal("minigpt", "gguf") is None
    assert refusal("minigpt", "packing") == (
        "model.type minigpt cannot read packed rows (it has no segment ids, so the documents packed into a row would "
        "attend to each other; only llama, gemma can)")
    assert refusal("mlp_lm", "gguf").endswith("(llama.cpp has no layout for it; only minigpt, llama, gemma can)")


# --------------------------------------------------------------------- any family: the bigram of docs/extending.md

BIGRAM_CHECK = '''
import dataclasses


def _even_context(config):
    if config["max_seq_len"] % 2:
        yield "max_seq_len", f"{config['max_seq_len']} is odd; a bigram row holds pairs"


FAMILY = dataclasses.replace(FAMILY, check=_even_context)
'''


@pytest.fixture(scope="module")
def bigram_checkout(tmp_path_factory) -> Path:
    """A copy of minitrain with the bigram family registered (one file, one line), its record given a `check`."""
    copy = tmp_path_factory.mktemp("bigram") / "checkout"
    shutil.copytree(ROOT / "minitrain", copy / "minitrain", ignore=shutil.ignore_patterns("__pycache__"))
    bigram = (ROOT / "tests" / "extending" / "bigram.py").read_text(encoding="utf-8")
    (copy / "minitrain" / "models" / "bigram.py").write_text(bigram + BIGRAM_CHECK, encoding="utf-8")
    registry = copy / "minitrain" / "models" / "registry.py"
    text = registry.read_text(encoding="utf-8")
    registry.write_text(text.replace('    "sequential",\n', '    "sequential",\n    "bigram",\n'), encoding="utf-8")
    return copy


def minitrain_in(copy: Path, *argv: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(copy), "NUMBA_DISABLE_JIT": "1"}
    done = subprocess.run([sys.executable, "-m", "minitrain", *argv], cwd=copy, env=env, capture_output=True,
                          text=True, timeout=300)
    return done.returncode, done.stderr


def test_a_new_familys_check_runs_in_validate_and_train(bigram_checkout, tmp_path):
    config = write_config(tmp_path, {"type": "bigram", "vocab_size": 64, "max_seq_len": 33})
    for command in ("validate", "train"):
        code, err = minitrain_in(bigram_checkout, command, str(config))
        assert code == 2 and "Traceback" not in err
        assert problem_lines(err) == ["model.max_seq_len: 33 is odd; a bigram row holds pairs"]


@pytest.mark.parametrize(("sections", "line"), [
    ({"output": {"model_format": "gguf"}}, "output.model_format: gguf: model.type bigram cannot be written as a GGUF "
                                           "(llama.cpp has no layout for it; only minigpt, llama, gemma can)"),
    ({"data_packing": "pack"}, "data.packing: model.type bigram cannot read packed rows (it has no segment ids, so "
                               "the documents packed into a row would attend to each other; only llama, gemma can); "
                               "packing is for a pretrained base (model.init_from)"),
])
def test_a_family_without_a_capability_is_refused_by_validate_with_the_reason(bigram_checkout, tmp_path, sections,
                                                                              line):
    packing = sections.pop("data_packing", None)
    config = write_config(tmp_path, {"type": "bigram", "vocab_size": 64, "max_seq_len": 32}, **sections)
    if packing:
        raw = yaml.safe_load(config.read_text(encoding="utf-8"))
        raw["data"]["packing"] = packing
        config.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    code, err = minitrain_in(bigram_checkout, "validate", str(config))
    assert code == 2 and problem_lines(err) == [line]
