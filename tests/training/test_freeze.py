"""`model.freeze` from YAML: validation, counts in the dry run, info and the manifest, frozen tensors bitwise
unchanged after training, no optimizer state for them in checkpoints, and an exact resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import safetensors.numpy
from test_run import train_tiny, write_tiny_run

from minitrain.cli import main
from minitrain.config import load_config
from minitrain.models.registry import build_model
from minitrain.training.plan import plan_run

pytestmark = pytest.mark.slow

FREEZE = """\
model: {n_layer: 1, n_head: 2, d_model: 16, d_ff: 32, vocab_size: 64, max_seq_len: 32,
        freeze: ["transformer.wte.*", "transformer.h.0.attn.*"]}
"""
TINY_MODEL = "model: {n_layer: 1, n_head: 2, d_model: 16, d_ff: 32, vocab_size: 64, max_seq_len: 32}\n"
FROZEN = ["transformer.wte.weight", "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias",
          "transformer.h.0.attn.c_proj.weight", "transformer.h.0.attn.c_proj.bias"]


@pytest.fixture
def config(tmp_path):
    path = write_tiny_run(tmp_path)
    path.write_text(path.read_text(encoding="utf-8").replace(TINY_MODEL, FREEZE), encoding="utf-8")
    return path


def initial_state(config):
    cfg = load_config(config)
    return build_model(cfg.model.architecture(), rng=np.random.Generator(np.random.PCG64(42))).state_dict()


def test_frozen_tensors_are_bitwise_unchanged_and_have_no_optimizer_state(config, tmp_path):
    results = train_tiny(config, tmp_path / "run")
    start, final = initial_state(config), safetensors.numpy.load_file(tmp_path / results["model_path"])
    for name, value in start.items():
        assert np.array_equal(final[name], value) == (name in FROZEN), name
    checkpoint = safetensors.numpy.load_file(tmp_path / "run" / "checkpoints" / "step-24.safetensors")
    optimizer_params = {name.split(".", 2)[2] for name in checkpoint if name.startswith("optimizer.")}
    assert optimizer_params == set(start) - set(FROZEN)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    total = sum(v.size for v in start.values())
    frozen = sum(start[n].size for n in FROZEN)
    assert (manifest["parameters"], manifest["trainable_parameters"], manifest["frozen_parameters"]) == (
        total, total - frozen, frozen)


def test_resume_of_a_frozen_run_is_exact(config, tmp_path):
    straight = train_tiny(config, tmp_path / "straight")
    resumed = train_tiny(config, tmp_path / "resumed",
                         resume=tmp_path / "straight" / "checkpoints" / "step-12.safetensors")
    assert resumed["model_path"] == straight["model_path"]  # the file is named after its content hash
    assert (tmp_path / "resumed" / "train_log.jsonl").read_bytes() == (
        tmp_path / "straight" / "train_log.jsonl").read_bytes()


def test_dry_run_and_info_show_trainable_and_frozen_counts(config, tmp_path, capsys):
    plan = plan_run(load_config(config))
    assert plan["parameters"] == plan["trainable_parameters"] + plan["frozen_parameters"]
    assert plan["frozen_parameters"] == 64 * 16 + 16 * 48 + 48 + 16 * 16 + 16
    train_tiny(config, tmp_path / "run")
    assert main(["info", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert f"  trainable_parameters: {plan['trainable_parameters']}" in out
    assert "freeze ['transformer.wte.*', 'transformer.h.0.attn.*']" in out


@pytest.mark.parametrize(("freeze", "message"), [
    ('["transformer.h.9.*"]', "model.freeze[0]: pattern 'transformer.h.9.*' matches no parameter"),
    ('["*"]', "model.freeze: freezes every parameter: nothing would be trained"),
])
def test_a_bad_freeze_pattern_is_a_validation_error(config, capsys, freeze, message):
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('["transformer.wte.*", "transformer.h.0.attn.*"]', freeze), encoding="utf-8")
    assert main(["validate", str(config), "--no-data"]) == 2
    err = capsys.readouterr().err
    assert message in err and f"{config}:" in err
