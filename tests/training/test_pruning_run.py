"""`minitrain prune` and the `pruning:` section end to end: the file's zeros are exactly what was asked per layer,
the pruned file is read by eval and sample, bad input is one `error:` line with exit code 2 and nothing written,
and a run that prunes while it trains keeps its masks in its checkpoints and resumes bit for bit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_cli import run
from test_damage import metadata_of, with_metadata
from test_lora_run import LORA, lora_config, train
from test_lora_run import base as base  # the fixture: a tiny run folder with verb records

from minitrain.common.errors import UserError
from minitrain.config import load_config, resolved_dict
from minitrain.hub.run_folder import read_run
from minitrain.models.registry import build_model
from minitrain.pruning.gradual import GradualPruner
from minitrain.pruning.masks import prunable_paths
from minitrain.runs.model_files import load_model_file
from minitrain.training.parts import training_config_hash

pytestmark = pytest.mark.slow


def linear_weights(path: Path) -> dict[str, np.ndarray]:
    state, _, _ = load_model_file(path)
    return {name: w for name, w in state.items() if w.ndim == 2 and ".h." in name}


@pytest.mark.parametrize(("method", "structure", "sparsity"), [
    ("magnitude", "unstructured", "0.3"), ("wanda", "unstructured", "0.7"), ("wanda", "2:4", None)])
def test_prune_writes_exactly_the_asked_zeros_per_layer_and_eval_reads_the_file(tmp_path, base, capsys, method,
                                                                                  structure, sparsity):
    out = tmp_path / "pruned.safetensors"
    argv = ["prune", base, out, "--method", method, "--structure", structure,
            *(["--sparsity", sparsity] if sparsity else [])]
    code, printed, err = run(argv, capsys)
    assert code == 0, err
    s = float(sparsity or 0.5)
    lines = printed.splitlines()
    assert lines[1].startswith("dense") and lines[2].startswith(f"{method} {structure} {100 * s:g} %")
    _, _, meta = load_model_file(out)
    assert meta["pruning"]["method"] == method and meta["evaluation"]["val_ppl"] > 1
    dense = linear_weights(read_run(base).model_path)
    weights = linear_weights(out)
    for name, w in weights.items():
        assert int((w == 0).sum()) == round(s * w.size), name
        assert np.array_equal(w[w != 0], dense[name][w != 0])  # the kept weights are unchanged
        if structure == "2:4":
            assert ((w.reshape(-1, 4, w.shape[1]) != 0).sum(axis=1) == 2).all()
    assert meta["pruning"]["layers"] == {name.removesuffix(".weight"): int((w == 0).sum())
                                         for name, w in weights.items()}
    vocab = base.parent / "data" / "vocab.json"
    code, printed, err = run(["eval", out, "--data", base.parent / "data" / "val.jsonl", "--vocab", vocab], capsys)
    assert code == 0 and "ppl" in printed, err
    assert run(["sample", out, "--prompt", "comer|R1|", "--vocab", vocab], capsys)[0] == 0


def test_prune_writes_the_same_bytes_twice(tmp_path, base, capsys):
    for name in ("a", "b"):
        assert run(["prune", base, tmp_path / f"{name}.safetensors", "--method", "wanda", "--sparsity", "0.5",
                    "--calibration-samples", "2"], capsys)[0] == 0
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()


def test_wanda_reads_its_calibration_records_from_the_file_given(tmp_path, base, capsys):
    val = base.parent / "data" / "val.jsonl"  # 2 records; the training split has 3
    outs = {}
    for name, extra in (("train", []), ("val", ["--calibration", val])):
        outs[name] = tmp_path / f"{name}.safetensors"
        assert run(["prune", base, outs[name], "--method", "wanda", "--sparsity", "0.5", *extra], capsys)[0] == 0
    assert load_model_file(outs["train"])[2]["pruning"]["calibration_samples"] == 3
    assert load_model_file(outs["val"])[2]["pruning"]["calibration_samples"] == 2
    masks = {name: {k: w == 0 for k, w in linear_weights(path).items()} for name, path in outs.items()}
    assert any(not np.array_equal(masks["train"][k], masks["val"][k]) for k in masks["train"])  # other norms


@pytest.mark.parametrize(("extra", "message"), [
    (["--method", "magnitude", "--sparsity", "1.2"], "--sparsity must be in [0, 1)"),
    (["--method", "magnitude"], "--sparsity is needed"),
    (["--method", "magnitude", "--structure", "2:4", "--sparsity", "0.3"], "prunes exactly 0.5"),
    (["--method", "magnitude", "--sparsity", "0.5", "--calibration-samples", "4"], "reads the weights alone"),
    (["--method", "wanda", "--sparsity", "0.5", "--exclude", "c_atn"], "--exclude c_atn names no linear layer"),
    (["--method", "wanda", "--sparsity", "0.5", "--calibration", "missing.jsonl"], "missing.jsonl"),
])
def test_bad_prune_arguments_are_one_error_line_and_write_nothing(tmp_path, base, capsys, monkeypatch, extra,
                                                                 message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["prune", base, tmp_path / "out.safetensors", *extra], capsys)
    assert code == 2 and err.startswith("error: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "out.safetensors").exists()


def test_a_lora_run_is_merged_before_it_is_pruned(tmp_path, base, capsys):
    lora = train(lora_config(tmp_path, base), tmp_path / "lora", capsys)
    code, _, err = run(["prune", Path(lora["model_path"]), tmp_path / "p.safetensors", "--method", "magnitude",
                        "--sparsity", "0.5"], capsys)
    assert code == 2 and "`minitrain merge-adapters` it first" in err


GRADUAL = "pruning:\n  sparsity: 0.6\n  initial_sparsity: 0.1\n  start_step: 1\n  end_step: 4\n  every: 1\n"


def test_gradual_pruning_reaches_its_sparsity_keeps_masks_in_checkpoints_and_resumes_bit_for_bit(tmp_path, base,
                                                                                               capsys):
    config = lora_config(tmp_path, base, GRADUAL)  # full fine-tuning of the base (no lora: section), 6 steps
    whole = train(config, tmp_path / "whole", capsys)
    for name, w in linear_weights(Path(whole["model_path"])).items():
        assert int((w == 0).sum()) == round(0.6 * w.size), name
    checkpoint = tmp_path / "whole" / "checkpoints" / "step-3.safetensors"
    state, _, meta = load_model_file(checkpoint)
    masks = meta["extra"]["pruning"]["masks"]
    model = build_model(meta["model_config"])
    pruner = GradualPruner(prunable_paths(model)[0], 0.6)
    pruner.load_state_dict(meta["extra"]["pruning"], model)
    assert set(masks) == set(pruner.paths)
    for path, mask in pruner.masks.items():  # mid-schedule: the mask of boundary 3, and the weights follow it
        assert np.array_equal(state[f"{path}.weight"] == 0, ~mask)
        assert 0.1 * mask.size < int((~mask).sum()) < 0.6 * mask.size
    resumed = train(config, tmp_path / "resumed", capsys, "--resume", checkpoint)
    assert Path(resumed["model_path"]).read_bytes() == Path(whole["model_path"]).read_bytes()
    assert (tmp_path / "resumed" / "train_log.jsonl").read_bytes() == (tmp_path / "whole" /
                                                                         "train_log.jsonl").read_bytes()


@pytest.mark.parametrize("record", [None, {"masks": {"transformer.h.0.attn.c_attn": {"shape": [8, 24], "bits": ""}}}])
def test_a_checkpoint_without_its_masks_or_with_damaged_ones_does_not_resume(tmp_path, base, capsys, record):
    config = lora_config(tmp_path, base, GRADUAL)
    train(config, tmp_path / "whole", capsys)
    data = (tmp_path / "whole" / "checkpoints" / "step-3.safetensors").read_bytes()
    extra = json.loads(metadata_of(data)["extra"])
    if record is None:
        del extra["pruning"]
    else:
        extra["pruning"] = record
    crafted = tmp_path / "crafted.safetensors"
    crafted.write_bytes(with_metadata(data, {"extra": extra}))
    code, _, err = run(["train", config, "--out-dir", tmp_path / "resumed", "--quiet", "--resume", crafted], capsys)
    assert code == 2 and err.startswith(f"error: {crafted}: its pruning ") and "Traceback" not in err


def test_a_pruned_file_fine_tuned_with_its_own_sparsity_keeps_exactly_its_mask(tmp_path, base, capsys):
    pruned = tmp_path / "wanda.safetensors"
    assert run(["prune", base, pruned, "--method", "wanda", "--sparsity", "0.5"], capsys)[0] == 0
    config = lora_config(tmp_path, base, "pruning:\n  sparsity: 0.5\n")
    results = train(config, tmp_path / "recover", capsys, "--set", f"model.init_from={pruned}")
    before, after = linear_weights(pruned), linear_weights(Path(results["model_path"]))
    for name in before:
        assert np.array_equal(before[name] == 0, after[name] == 0), name
        assert not np.array_equal(before[name], after[name])  # the kept weights trained


def test_a_given_section_is_on_and_a_left_out_one_changes_no_hash(tmp_path, base):
    plain = load_config(lora_config(tmp_path, base, ""))
    off = load_config(lora_config(tmp_path, base, "pruning:\n  enabled: false\n  sparsity: 0.3\n", name="off.yaml"))
    on = load_config(lora_config(tmp_path, base, "pruning:\n  sparsity: 0.3\n", name="on.yaml"))
    assert on.pruning.enabled and not off.pruning.enabled and not plain.pruning.enabled
    assert "pruning" not in resolved_dict(plain)
    assert training_config_hash(plain) != training_config_hash(on)


@pytest.mark.parametrize(("body", "key"), [
    ("pruning:\n  sparsity: 1.0\n", "pruning.sparsity"),
    ("pruning:\n  sparsity: 0.3\n  initial_sparsity: 0.5\n", "pruning.initial_sparsity"),
    ("pruning:\n  start_step: 4\n  end_step: 2\n", "pruning.end_step"),
    ("pruning:\n  exclude: [c_atn]\n", "pruning.exclude[0]"),
    ("pruning:\n  method: wanda\n", "pruning.method"),
    ("pruning:\n  sparsty: 0.5\n", "pruning.sparsty"),
    (LORA + "pruning:\n  sparsity: 0.5\n", "pruning.enabled"),
])
def test_bad_pruning_keys_are_exit_2_naming_the_key_with_nothing_written(tmp_path, base, capsys, body, key):
    code, _, err = run(["train", lora_config(tmp_path, base, body), "--out-dir", tmp_path / "run", "--quiet"], capsys)
    assert code == 2 and f": {key}: " in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_a_schedule_that_ends_after_the_run_is_refused_before_anything_is_written(tmp_path, base, capsys):
    config = lora_config(tmp_path, base, "pruning:\n  end_step: 7\n")  # 6 steps: the last boundary is 6
    code, _, err = run(["train", config, "--out-dir", tmp_path / "run", "--quiet"], capsys)
    assert code == 2 and "pruning.end_step: 7 is after the run's end (total_steps 6)" in err
    # with epochs, the steps are known only once the data is counted: refused then, still before any file
    code, _, err = run(["train", config, "--out-dir", tmp_path / "run", "--quiet", "--set", "training.epochs=1",
                        "--set", "training.total_steps=null", "--set", "pruning.end_step=2"], capsys)
    assert code == 2 and "pruning.end_step 2 is after the run's end (total steps 1)" in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("damage", [
    {"masks": {"transformer.h.9.attn.c_attn": {}}},
    {"masks": {"transformer.h.0.attn.c_attn": {"shape": [8, 24], "bits": "AAAA"}}},
    {"masks": {"transformer.h.0.attn.c_attn": {"shape": [8, 2], "bits": "not base64!"}}},
    [],
])
def test_a_damaged_mask_record_is_one_user_error(base, damage):
    info = read_run(base)
    model = build_model(info.model_config)
    with pytest.raises(UserError, match="pruning") as caught:
        GradualPruner(prunable_paths(model)[0], 0.5).load_state_dict(damage, model)
    assert caught.value.exit_code == 2


def test_the_prune_command_prints_what_it_wrote(tmp_path, base, capsys):
    out = tmp_path / "m.safetensors"
    code, printed, _ = run(["prune", base, out, "--method", "magnitude", "--sparsity", "0.5"], capsys)
    assert code == 0 and printed.rstrip().endswith(f"wrote {out}")
    rows = [line.split() for line in printed.splitlines()[4:-1]]
    assert rows and all(row[3] == "50.00%" for row in rows)
    assert json.loads(json.dumps(load_model_file(out)[2]["evaluation"]))["sparsity"] == 0.5


def test_a_schedule_ending_at_the_last_step_prunes_after_the_last_update(tmp_path, base, capsys):
    config = lora_config(tmp_path, base, "pruning:\n  sparsity: 0.4\n  start_step: 6\n")  # 6 steps: boundary 6
    results = train(config, tmp_path / "run", capsys)
    for name, w in linear_weights(Path(results["model_path"])).items():
        assert int((w == 0).sum()) == round(0.4 * w.size), name
