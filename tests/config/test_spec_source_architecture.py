"""A spec manifest's model.source decides its model's family (issue 44, item 2): Appendix B as written, with a
local Llama GGUF, a Hugging Face folder or a Hub repo as the source, is a Llama LoRA run; what the user writes in
`architecture:` must agree with the source, and a source that cannot be read is one error line."""

from __future__ import annotations

import json

import pytest
from test_damage_model_files import write_crafted_gguf
from test_hub_pretrained import hf_folder
from test_spec_coverage import snippet

from minitrain import cli
from minitrain.config import ConfigError, load_config

# The YAML-mode spec's Appendix B ("After: Declarative YAML"), as written; manifest() swaps in the source.
APPENDIX_B = snippet("yaml", "Appendix B")


def manifest(tmp_path, monkeypatch, source: str, architecture: str = ""):
    """Appendix B in tmp_path (the working directory), with the text records its default data paths name."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "processed").mkdir(parents=True)
    for split in ("train", "val"):  # enough rows for Appendix A's batch of 32 once packed
        records = "".join(json.dumps({"text": f"hola mundo {i}"}) + "\n" for i in range(300))
        (tmp_path / "data" / "processed" / f"{split}.jsonl").write_text(records)
    path = tmp_path / "config.yaml"
    written = '  source: "hf://meta-llama/Llama-2-7b"\n'
    assert written in APPENDIX_B
    path.write_text(APPENDIX_B.replace(written, f'  source: "{source}"\n{architecture}'))
    return path


def assert_a_llama_lora_run(path, capsys) -> None:
    cfg = load_config(path)
    assert cfg.model.type == "llama" and cfg.lora.enabled and cfg.lora.target_modules == ["q_proj", "v_proj"]
    assert cli.main(["validate", str(path)]) == 0
    assert "model.init_from" in capsys.readouterr().out
    assert cli.main(["train", "--dry-run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "trainable_parameters: 3584" in out and "parameters: 30688" in out  # rank 16 on q, v of 2 layers
    assert not (path.parent / "output").exists()


def test_appendix_b_with_a_local_llama_gguf_is_a_llama_lora_run(tmp_path, monkeypatch, capsys):
    write_crafted_gguf(tmp_path / "tiny.gguf", {})
    assert_a_llama_lora_run(manifest(tmp_path, monkeypatch, "./tiny.gguf"), capsys)


def test_appendix_b_with_a_hugging_face_folder_is_a_llama_lora_run(tmp_path, monkeypatch, capsys):
    hf_folder(tmp_path / "tiny-llama")
    assert_a_llama_lora_run(manifest(tmp_path, monkeypatch, "./tiny-llama"), capsys)


def test_appendix_b_with_its_hub_source_reads_the_repos_config(hub, tmp_path, monkeypatch, capsys):
    from fakehub import TOKEN
    from huggingface_hub import HfApi

    hf_folder(tmp_path / "base")
    api = HfApi(endpoint=hub.url, token=TOKEN)
    api.create_repo("alice/tiny-llama")
    api.upload_folder(repo_id="alice/tiny-llama", folder_path=str(tmp_path / "base"))
    cfg = load_config(manifest(tmp_path, monkeypatch, "hf://alice/tiny-llama"))
    assert (cfg.model.type, cfg.model.init_from) == ("llama", "alice/tiny-llama")


def test_what_architecture_says_still_counts(tmp_path, monkeypatch):
    write_crafted_gguf(tmp_path / "tiny.gguf", {})
    agreed = load_config(manifest(tmp_path, monkeypatch, "./tiny.gguf", "  architecture: {type: llama}\n"))
    assert agreed.model.type == "llama"


@pytest.mark.parametrize(("architecture", "line", "message"), [
    ("  architecture: {type: transformer}\n", 7, "model.architecture.type: the minigpt family, but model.source "
                                                 "./tiny.gguf is a llama model"),
    ("  architecture: {num_layers: 3}\n", 7, "model.architecture.num_layers: 3, but the base ./tiny.gguf has 2"),
])
def test_a_contradiction_is_one_error_naming_both(tmp_path, monkeypatch, capsys, architecture, line, message):
    write_crafted_gguf(tmp_path / "tiny.gguf", {})
    assert cli.main(["validate", str(manifest(tmp_path, monkeypatch, "./tiny.gguf", architecture))]) == 2
    problems = capsys.readouterr().err.strip().splitlines()[1:]
    assert len(problems) == 1 and f"config.yaml:{line}: {message}" in problems[0], problems


@pytest.mark.parametrize(("source", "message"), [
    ("./bad.gguf", "model.source: bad.gguf: not a readable GGUF file"),
    ("./gone.gguf", "model.source: gone.gguf: not a readable GGUF file (FileNotFoundError"),
    ("./broken", "model config is not valid JSON"),
])
def test_a_source_that_cannot_be_read_is_one_error_line(tmp_path, monkeypatch, capsys, source, message):
    (tmp_path / "bad.gguf").write_bytes(b"not a gguf")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{nope")
    assert cli.main(["validate", str(manifest(tmp_path, monkeypatch, source))]) == 2
    err = capsys.readouterr().err
    assert message in err and "GPT-2" not in err and "needs model.architecture" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 or (len(lines) == 2 and "has 1 problem" in lines[0]), lines


def test_appendix_b_offline_names_its_hub_source_first(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))  # the conftest keeps it offline
    with pytest.raises(ConfigError) as info:
        load_config(manifest(tmp_path, monkeypatch, "hf://meta-llama/Llama-2-7b"))
    first = str(info.value).splitlines()[1]
    assert "config.yaml:6: model.source: hf://meta-llama/Llama-2-7b: no config.json to read its architecture" in first
