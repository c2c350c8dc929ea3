"""Checkpoints forged by someone who knows the format: a metadata value changed and the checksum recomputed, so
only the schema and the consistency checks stand between the file and a traceback (or a hang)."""

from __future__ import annotations

import json

import pytest
from test_damage import DELETE, hang_guard, metadata_of, with_metadata
from test_run import train_tiny, write_tiny_run

from minitrain.cli import main
from minitrain.common.errors import UserError
from minitrain.runs.model_files import load_model_file

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("crafted")
    config = write_tiny_run(root)
    train_tiny(config, root / "run", ["monitoring.alerts=['val_loss > 100: warn']"])
    return root, config


def forge(path, changes):
    path.write_bytes(with_metadata(path.read_bytes(), changes))


def model_config(path, **changes):
    return {**json.loads(metadata_of(path.read_bytes())["model_config"]), **changes}


@pytest.mark.parametrize(("changes", "message"), [
    ({"n_head": 0}, "model_config.n_head: input should be greater than or equal to 1, got an integer (0)"),
    ({"n_head": 3}, "d_model 16 is not divisible by n_head 3"),
    ({"n_layer": 10**6}, ": 16 tensors, the config needs 12000004"),  # was a hang: a million layers built
    ({"d_model": "16"}, "model_config.d_model: input should be a valid integer, got a string ('16')"),
    ({"dropout": 1.5}, "model_config.dropout: input should be less than 1"),
    ({"type": "transformer_xl"}, "model_config: type must name a model family (minigpt, mlp_lm, sequential, llama, gemma, rnn_lm)"),
])
def test_a_forged_model_config_is_one_error_for_every_reader(trained, tmp_path, changes, message, capsys):
    root, _ = trained
    model = next((root / "models").glob("minigpt-*.safetensors"))
    forged = tmp_path / "forged.safetensors"
    forged.write_bytes(model.read_bytes())
    forge(forged, {"model_config": model_config(forged, **changes)})
    for argv in (["sample", str(forged), "--prompt", "caminar|P1|", "--vocab", str(root / "data" / "vocab.json")],
                 ["export", str(forged), str(tmp_path / "out"), "--vocab", str(root / "data" / "vocab.json")]):
        with hang_guard(120, f"minitrain {argv[0]}"):
            code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and err.startswith(f"error: {forged}") and message in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(("changes", "message"), [
    ({"optimizer": DELETE}, "metadata: optimizer: field required"),
    ({"format_version": "1"}, "metadata: format_version: input should be a valid integer, got a string ('1')"),
    ({"extra": {"loop": {"best_val_loss": "low"}}}, "cannot restore the loop's state (best_val_loss: input should be"),
    ({"extra": {"loop": {}, "alerts": {"active": [], "best": []}}},
     "cannot restore the loop's state (alert state is for 0 alerts, this run has 1)"),
    ({"batcher": {"epoch": "x", "position": 0}}, "cannot restore the training state (batcher state must have"),
    ({"step": -4}, "metadata: step: input should be greater than or equal to 0"),
])
def test_a_forged_checkpoint_cannot_resume_and_changes_nothing(trained, changes, message):
    root, config = trained
    checkpoint = root / "run" / "checkpoints" / "step-8.safetensors"
    original = checkpoint.read_bytes()
    before = {p.name: p.read_bytes() for p in (root / "run").iterdir() if p.is_file()}
    try:
        forge(checkpoint, changes)
        with pytest.raises(UserError) as info:
            train_tiny(config, root / "run", ["monitoring.alerts=['val_loss > 100: warn']"], resume=checkpoint)
    finally:
        checkpoint.write_bytes(original)
    assert info.value.exit_code == 2 and message in str(info.value), str(info.value)
    after = {p.name: p.read_bytes() for p in (root / "run").iterdir() if p.is_file()}
    assert after == before


def test_the_forgery_helper_keeps_a_valid_file_valid(trained, tmp_path):
    root, _ = trained
    checkpoint = root / "run" / "checkpoints" / "step-8.safetensors"
    forged = tmp_path / "same.safetensors"
    forged.write_bytes(with_metadata(checkpoint.read_bytes(), {"step": 8}))
    assert load_model_file(forged)[2]["step"] == 8  # the checksum was recomputed: it loads
