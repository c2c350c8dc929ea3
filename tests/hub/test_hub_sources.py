"""`model.init_from` and `init --base`: weights from files, folders and (stand-in) Hub repos, checked first."""

from __future__ import annotations

import json

import numpy as np
import pytest
import safetensors.numpy
from fakehub import TINY_MODEL
from huggingface_hub import constants
from test_damage import run_cli

from minitrain.common.errors import UserError
from minitrain.data.tokenizer import CharTokenizer
from minitrain.formats.gpt2 import from_gpt2_config
from minitrain.hub.export_hf import export_model
from minitrain.hub.sources import init_model_from, load_pretrained, model_section_from_base
from minitrain.hub.upload import publish
from minitrain.models.minigpt import MiniGPT
from minitrain.runs.model_files import load_model_file

REPO = "alice/minigpt"


def trained_state(run) -> dict[str, np.ndarray]:
    return load_model_file(run.parent / "models" / "minigpt-test.safetensors")[0]


def assert_loaded(model: MiniGPT, state: dict[str, np.ndarray]) -> None:
    loaded = model.state_dict()
    assert loaded.keys() == state.keys()
    for name, array in state.items():
        np.testing.assert_array_equal(loaded[name], array)


@pytest.mark.parametrize("kind", ["run folder", "model file", "export folder", "export weights"])
def test_init_from_local_sources(run, tmp_path, kind):
    export_model(run, tmp_path / "export")
    spec = {"run folder": run, "model file": run.parent / "models" / "minigpt-test.safetensors",
            "export folder": tmp_path / "export", "export weights": tmp_path / "export" / "model.safetensors"}[kind]
    model = MiniGPT(**TINY_MODEL, rng=5)
    init_model_from(model, str(spec))
    assert_loaded(model, trained_state(run))


def test_init_from_a_hub_repo_downloads_into_the_hf_cache_and_then_works_offline(hub, run, tmp_path, monkeypatch):
    publish(run, REPO)
    model = MiniGPT(**TINY_MODEL, rng=5)
    where = init_model_from(model, REPO, vocab_path=run.parent / "data" / "vocab.json")
    assert_loaded(model, trained_state(run))
    cache = tmp_path / "hf" / "hub" / "models--alice--minigpt"
    assert where.startswith(str(cache / "snapshots")) and where.endswith("model.safetensors")
    assert {p.name for p in (cache / "snapshots").glob("*/*")} == {"config.json", "model.safetensors", "vocab.json"}

    # Offline: the cached copy is used and the Hub is not asked anything.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub.requests.clear()
    other = MiniGPT(**TINY_MODEL, rng=6)
    init_model_from(other, REPO)
    assert_loaded(other, trained_state(run))
    assert hub.requests == []


def test_offline_without_a_cached_copy_is_a_clear_error(hub, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(UserError, match="not in the local Hugging Face cache"):
        load_pretrained(REPO)


def test_a_missing_hub_repo_is_a_clear_error(hub):
    with pytest.raises(UserError, match=r"model\.init_from alice/nothing: no such model repo"):
        load_pretrained("alice/nothing")


def test_weights_that_do_not_fit_the_config_are_refused_before_loading(run, tmp_path):
    # The export's config.json claims d_ff 32, as the run's config does, but its weights have d_ff 16.
    export_model(run, tmp_path / "export")
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    (tmp_path / "export" / "config.json").write_text(json.dumps({**config, "n_inner": 32}))
    model = MiniGPT(**{**TINY_MODEL, "d_ff": 32}, rng=5)
    before = model.state_dict()
    with pytest.raises(UserError, match=r"weights do not fit the model config \(.*\): transformer\.h\.0\.mlp\.c_fc\."
                                        r"weight has shape \(8, 16\), the config needs \(8, 32\)"):
        init_model_from(model, str(tmp_path / "export"))
    assert_loaded(model, before)  # nothing was half-loaded


@pytest.mark.parametrize(("key", "value"), [("n_head", 4), ("n_head", 1), ("d_ff", 32), ("n_layer", 3)])
def test_a_source_of_another_architecture_is_refused_by_name(run, key, value):
    # n_head changes no tensor shape: without this check 2-head weights would load into a 4-head model.
    model = MiniGPT(**{**TINY_MODEL, key: value}, rng=5)
    before = model.state_dict()
    with pytest.raises(UserError, match=rf"model\.init_from {run}: a model of another architecture: "
                                        rf"{key} {TINY_MODEL[key]} \(this config: {value}\); make the model"):
        init_model_from(model, str(run))
    assert_loaded(model, before)


def test_a_different_vocabulary_is_refused(run, tmp_path):
    export_model(run, tmp_path / "export")
    other = tmp_path / "other-vocab.json"
    CharTokenizer(sorted(set("abcdefghij|"))).save(other)
    with pytest.raises(UserError, match=r"its vocabulary .* differs from data\.vocab_path"):
        init_model_from(MiniGPT(**TINY_MODEL), str(tmp_path / "export"), vocab_path=other)


@pytest.mark.parametrize("spec", ["missing/folder/model.safetensors", "nope.safetensors", "./alice/x"])
def test_nonexistent_paths_are_user_errors(spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="no such file or folder"):
        load_pretrained(spec)


def test_transformers_style_gpt2_weights_are_accepted(run, tmp_path):
    """A file saved by transformers from GPT2Model: no `transformer.` prefix, causal-mask buffers, lm_head."""
    export_model(run, tmp_path / "export")
    state = trained_state(run)
    foreign = {name.removeprefix("transformer."): a for name, a in state.items()}
    foreign["h.0.attn.bias"] = np.tril(np.ones((1, 1, 16, 16), np.float32))
    foreign["lm_head.weight"] = state["transformer.wte.weight"]
    safetensors.numpy.save_file(foreign, tmp_path / "export" / "model.safetensors", metadata={"format": "pt"})
    model = MiniGPT(**TINY_MODEL, rng=5)
    init_model_from(model, str(tmp_path / "export"))
    assert_loaded(model, state)


def test_model_section_from_a_base_model(hub, run, tmp_path):
    export_model(run, tmp_path / "export")
    section, vocab = model_section_from_base(str(tmp_path / "export"))
    assert section == {**TINY_MODEL, "init_from": str(tmp_path / "export")}
    assert vocab == tmp_path / "export" / "vocab.json"
    publish(run, REPO)
    section, vocab = model_section_from_base(REPO)
    assert section == {**TINY_MODEL, "init_from": REPO}
    assert vocab.read_bytes() == (run.parent / "data" / "vocab.json").read_bytes()
    model_file = run.parent / "models" / "minigpt-test.safetensors"
    assert model_section_from_base(str(model_file)) == ({**TINY_MODEL, "init_from": str(model_file)}, None)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("model_type", "llama", "only GPT-2"),
    ("activation_function", "gelu", "tanh approximation"),
    ("layer_norm_epsilon", 1e-6, "eps"),
    ("tie_word_embeddings", False, "ties the output layer"),
    ("n_head", 3, "must divide n_embd"),
    ("n_layer", 0, "positive integer"),
])
def test_gpt2_configs_minigpt_cannot_represent_are_refused(run, tmp_path, key, value, message):
    export_model(run, tmp_path / "export")
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    with pytest.raises(UserError, match=rf"config.json: {key} = .*{message}"):
        from_gpt2_config({**config, key: value}, "config.json")



@pytest.mark.parametrize("place", ["checkpoints/best.safetensors", "models/minigpt-x.safetensors"])
def test_a_model_file_in_its_run_folder_brings_the_runs_vocabulary_and_a_copy_elsewhere_does_not(run, tmp_path,
                                                                                               place, capsys):
    import shutil

    from minitrain import cli

    model_file = next((run.parent / "models").glob("*.safetensors"))
    inside, loose = run / place, tmp_path / "loose.safetensors"
    inside.parent.mkdir(exist_ok=True)
    shutil.copy(model_file, inside)
    shutil.copy(model_file, loose)
    assert load_pretrained(str(inside)).vocab_path == run.parent / "data" / "vocab.json"
    assert load_pretrained(str(loose)).vocab_path is None
    assert cli.main(["sample", str(inside), "--prompt", "comer|P1|", "--max-new-tokens", "2"]) == 0  # no --vocab
    assert cli.main(["sample", str(loose), "--prompt", "comer|P1|"]) == 2
    assert "pass --vocab" in capsys.readouterr().err


def test_a_file_that_holds_no_model_is_named_as_such_not_as_missing(run):
    with pytest.raises(UserError, match=r"results\.json: not a model: give a run folder") as error:
        load_pretrained(str(run / "results.json"))
    assert error.value.exit_code == 2


@pytest.mark.parametrize("command", [["sample", "--prompt", "hola"], ["eval", "--data", "val.jsonl"]])
def test_a_mistyped_local_path_shaped_like_a_hub_id_is_missing_not_asked_for(hub, tmp_path, monkeypatch, command):
    # `experiments/18-train-mix` with experiments/ here is a local path one letter off, not the Hub repo of user
    # `experiments` (issue 43: a minute of retries, then an error about the Hub that never said the path is missing).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "experiments").mkdir()
    (tmp_path / "val.jsonl").write_text('{"text": "hola"}\n', encoding="utf-8")
    code, _, err = run_cli([command[0], "experiments/18-train-mix", *command[1:]])
    assert code == 2 and hub.requests == [], err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [err.strip()], err
    assert "experiments/18-train-mix: no such file or folder (experiments/ is here" in err, err
