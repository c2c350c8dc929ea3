"""Export to the Hugging Face GPT-2 layout: config.json, weights, tokenizer files, determinism, bad input."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import safetensors
import safetensors.numpy
from fakehub import TINY_MODEL, make_run
from test_run_dir import dead_pid

from minitrain.common.errors import UserError
from minitrain.data.tokenizer import CharTokenizer
from minitrain.formats.gpt2 import from_gpt2_config, to_gpt2_config
from minitrain.hub.export_hf import EXPORT_FILES, export_model
from minitrain.models.registry import parameter_shapes
from minitrain.runs.model_files import load_model_file, save_model_file
from minitrain.runs.run_lock import RunLock


def test_export_writes_the_gpt2_folder(run, tmp_path):
    out = tmp_path / "export"
    written = export_model(run, out)
    assert [p.name for p in written] == sorted(EXPORT_FILES)
    assert sorted(p.name for p in out.iterdir()) == sorted(EXPORT_FILES)

    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"]
    assert (config["n_layer"], config["n_head"], config["n_embd"], config["n_inner"]) == (2, 2, 8, 16)
    assert (config["vocab_size"], config["n_positions"]) == (24, 16)
    assert config["activation_function"] == "gelu_new" and config["layer_norm_epsilon"] == 1e-5
    assert config["tie_word_embeddings"] is True
    assert (config["pad_token_id"], config["bos_token_id"], config["eos_token_id"]) == (0, 1, 2)
    assert from_gpt2_config(config, "config.json") == TINY_MODEL  # the mapping inverts


def test_weights_are_the_model_file_under_gpt2_names(run, tmp_path):
    out = tmp_path / "export"
    export_model(run, out)
    original, _, _ = load_model_file(run.parent / "models" / "minigpt-test.safetensors")
    with safetensors.safe_open(out / "model.safetensors", "numpy") as f:
        assert f.metadata() == {"format": "pt"}
    exported = safetensors.numpy.load_file(out / "model.safetensors")
    assert set(exported) == set(dict(parameter_shapes(TINY_MODEL)))  # no lm_head (tied), no attn.bias buffers
    for name, array in original.items():
        assert exported[name].dtype == np.float32
        np.testing.assert_array_equal(exported[name], array)


def test_tokenizer_files_match_the_char_vocabulary(run, tmp_path):
    out = tmp_path / "export"
    export_model(run, out)
    ours = CharTokenizer.load(run.parent / "data" / "vocab.json")
    assert CharTokenizer.load(out / "vocab.json").chars == ours.chars
    tok = json.loads((out / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    assert tok["model"]["type"] == "WordLevel" and tok["normalizer"] is None
    assert [vocab[t] for t in ("<pad>", "<bos>", "<eos>")] == [0, 1, 2]
    assert all(vocab[c] == ours.encode(c)[0] for c in ours.chars)
    assert tok["model"]["unk_token"] not in vocab  # unknown characters fail, as in CharTokenizer
    assert [t["content"] for t in tok["added_tokens"] if t["special"]] == ["<pad>", "<bos>", "<eos>"]
    special = json.loads((out / "tokenizer_config.json").read_text())
    assert (special["bos_token"], special["eos_token"], special["pad_token"]) == ("<bos>", "<eos>", "<pad>")


def test_export_is_byte_identical_when_repeated(run, tmp_path):
    export_model(run, tmp_path / "a")
    export_model(run, tmp_path / "b")
    for name in EXPORT_FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_export_from_a_checkpoint_finds_its_run(run, tmp_path):
    state, config, _ = load_model_file(run.parent / "models" / "minigpt-test.safetensors")
    checkpoint = run / "checkpoints" / "step-40.safetensors"
    save_model_file(checkpoint, state, config)
    export_model(checkpoint, tmp_path / "export")
    assert "62.5 %" in (tmp_path / "export" / "README.md").read_text()  # the run's results reached the card


def test_a_bare_model_file_needs_a_vocabulary(tmp_path):
    make_run(tmp_path)
    bare = tmp_path / "models" / "minigpt-test.safetensors"
    with pytest.raises(UserError, match="--vocab"):
        export_model(bare, tmp_path / "export")
    assert not (tmp_path / "export").exists()
    export_model(bare, tmp_path / "export", vocab_path=tmp_path / "data" / "vocab.json")
    assert "not recorded" in (tmp_path / "export" / "README.md").read_text()


def test_weights_that_do_not_fit_the_config_are_refused(run, tmp_path):
    state, config, _ = load_model_file(run.parent / "models" / "minigpt-test.safetensors")
    state["transformer.h.1.mlp.c_fc.weight"] = np.zeros((8, 32), np.float32)
    save_model_file(run.parent / "models" / "minigpt-test.safetensors", state, config)
    with pytest.raises(UserError, match=r"transformer\.h\.1\.mlp\.c_fc\.weight has shape \(8, 32\)"):
        export_model(run, tmp_path / "export")


def test_missing_source_and_unfinished_run_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="no such run folder"):
        export_model(tmp_path / "nope", tmp_path / "export")
    (tmp_path / "empty-run").mkdir()
    with pytest.raises(UserError, match="no model file found") as info:
        export_model(tmp_path / "empty-run", tmp_path / "export")
    assert info.value.exit_code == 2  # a run folder that lacks what it should hold is bad input (docs/yaml-mode.md)


@pytest.mark.parametrize("pointer", [None, "step-7.safetensors\n"])
def test_an_unfinished_run_exports_its_latest_checkpoint(run, tmp_path, pointer):
    folder = tmp_path / "stopped" / "checkpoints"
    folder.mkdir(parents=True)
    model_file = run.parent / "models" / "minigpt-test.safetensors"
    shutil.copy(model_file, folder / "step-3.safetensors")
    shutil.copy(model_file, folder / "step-7.safetensors")
    (folder / "step-3.safetensors").write_bytes(b"older, and unreadable")
    if pointer is not None:
        (folder / "latest").write_text(pointer)
    # Without a pointer, the newest step file; with one, the file it names.
    export_model(tmp_path / "stopped", tmp_path / "export", vocab_path=run.parent / "data" / "vocab.json")
    exported = safetensors.numpy.load_file(tmp_path / "export" / "model.safetensors")
    trained = load_model_file(model_file)[0]
    assert all(np.array_equal(exported[name], array) for name, array in trained.items())


def test_a_vocabulary_larger_than_the_embedding_is_refused(run, tmp_path):
    CharTokenizer(sorted(set("abcdefghijklmnopqrstuvwxyz"))).save(run.parent / "data" / "vocab.json")
    with pytest.raises(UserError, match="embedding rows"):
        export_model(run, tmp_path / "export")


def test_attn_scale_one_is_gpt2_without_scaled_attention_and_other_scales_are_refused():
    config = to_gpt2_config({**TINY_MODEL, "attn_scale": 1.0}, 0, 1, 2)
    assert config["scale_attn_weights"] is False
    assert from_gpt2_config(config, "config.json") == {**TINY_MODEL, "attn_scale": 1.0}
    with pytest.raises(UserError, match=r"attn_scale 0\.5: GPT-2 scales attention by 1/sqrt"):
        to_gpt2_config({**TINY_MODEL, "attn_scale": 0.5}, 0, 1, 2)


def test_a_failed_export_leaves_the_previous_one_whole(run, tmp_path, monkeypatch):
    export_model(run, tmp_path / "out")
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    other = make_run(tmp_path / "other", seed=1)  # another model: every file but the vocabulary differs

    def disk_full(path, data):
        raise UserError(f"{path}: cannot write (No space left on device)")

    monkeypatch.setattr("minitrain.formats.safetensors_folder.atomic_write_bytes", disk_full)  # the weights
    with pytest.raises(UserError, match="No space left on device"):
        export_model(other, tmp_path / "out")
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "out", "work"]  # no staging folder left

    monkeypatch.undo()
    export_model(other, tmp_path / "out")  # over an earlier export: replaced as a whole
    assert (tmp_path / "out" / "model.safetensors").read_bytes() != before["model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "out", "work"]


def test_export_refuses_a_folder_holding_other_files_and_clears_what_a_kill_left(run, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match=r"out: holds files an export does not write \(notes\.txt\)"):
        export_model(run, tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["notes.txt"]

    stale = tmp_path / f".fresh.export-{dead_pid()}.tmp"
    stale.mkdir()
    (stale / "config.json").write_text("{}")
    export_model(run, tmp_path / "fresh")
    assert not stale.exists() and sorted(p.name for p in (tmp_path / "fresh").iterdir()) == sorted(EXPORT_FILES)


@pytest.mark.parametrize(("file", "change", "problem"), [
    ("results.json", {"run_id": "b" * 32}, f"results.json is from run {'b' * 32}, manifest.json from run {'a' * 32}"),
    ("manifest.json", {"status": "interrupted"}, "results.json exists but manifest.json says the run is 'interrupted'"),
    ("results.json", {"model_sha256": "0" * 64}, "is not the one results.json names (sha256 differs)"),
    ("manifest.json", {"seed": 5}, "has rng_seed 42, manifest.json seed 5"),
])
def test_export_refuses_results_manifest_and_model_of_different_runs(tmp_path, file, change, problem):
    run = make_run(tmp_path / "w")
    results, manifest = (json.loads((run / name).read_text()) for name in ("results.json", "manifest.json"))
    model = tmp_path / "w" / "models" / "minigpt-test.safetensors"
    state, config, _ = load_model_file(model)
    sha = save_model_file(model, state, config, {"rng_seed": 42, "config_hash": "c" * 64})
    results.update(run_id="a" * 32, model_sha256=sha)
    manifest.update(run_id="a" * 32, seed=42, config_hash="c" * 64)
    (run / "results.json").write_text(json.dumps(results))
    (run / "manifest.json").write_text(json.dumps(manifest))
    export_model(run, tmp_path / "good")  # one run: fine

    data = json.loads((run / file).read_text())
    (run / file).write_text(json.dumps({**data, **change}))
    with pytest.raises(UserError) as info:
        export_model(run, tmp_path / "bad")
    assert str(info.value).startswith(f"{run}: its files are not from one run: ") and problem in str(info.value)
    assert info.value.exit_code == 2 and not (tmp_path / "bad").exists()


def test_export_waits_for_a_run_being_written(run, tmp_path):
    with RunLock(run), pytest.raises(UserError, match=rf"a run is being written there now \(PID {os.getpid()}\)"):
        export_model(run, tmp_path / "out")
    export_model(run, tmp_path / "out")
