"""`minitrain export` and `minitrain sample` of a pretrained Llama-family base (tiny GGUF, tiny HF folder): the
export is a LlamaForCausalLM folder with the base's tokenizer byte for byte and a Llama card; sample continues a
prompt, or answers a chat turn, through the KV cache with the base's own tokenizer."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_cli import run as cli
from test_hub_pretrained import HF_CONFIG, MINITRAIN, hf_folder, random_hf_state, write_gguf

from minitrain.hub.export_hf import export_model
from minitrain.hub.pretrained import load_pretrained_base
from minitrain.hub.text_models import load_text_model


@pytest.fixture
def folder(tmp_path):
    hf_folder(tmp_path / "base")
    return tmp_path / "base"


def test_a_hf_base_exports_as_llama_with_its_tokenizer_byte_for_byte_and_a_llama_card(folder, tmp_path):
    files = export_model(folder, tmp_path / "out", repo_id="alice/tiny")
    names = {p.name for p in files}
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md", "generation_config.json"} <= names
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / "out" / name).read_bytes() == (folder / name).read_bytes()
    assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    card = (tmp_path / "out" / "README.md").read_text()
    assert "LlamaForCausalLM" in card and "GPT-2" not in card and "minigpt" not in card.lower()
    assert f"`{folder.name}`" in card and 'AutoModelForCausalLM.from_pretrained("alice/tiny")' in card
    assert str(tmp_path) not in card  # the base by its folder's name, not this machine's path
    theirs, ours = load_pretrained_base(folder), load_pretrained_base(tmp_path / "out")
    assert ours[0] == theirs[0] and all(np.array_equal(ours[1][n], theirs[1][n]) for n in theirs[1])
    export_model(folder, tmp_path / "out")  # into an earlier export: replaced whole
    assert "alice/tiny" not in (tmp_path / "out" / "README.md").read_text()


def test_export_command_of_a_gguf_base(tmp_path, capsys):
    write_gguf(tmp_path / "tiny.gguf", random_hf_state(MINITRAIN), HF_CONFIG)
    code, out, err = cli(["export", tmp_path / "tiny.gguf", tmp_path / "out"], capsys)
    assert code == 0, err
    assert str(tmp_path / "out" / "config.json") in out
    again = load_pretrained_base(tmp_path / "out")
    assert again[0] == MINITRAIN and again[2].chat_template is not None
    assert "with its chat template" in (tmp_path / "out" / "README.md").read_text()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    code, _, err = cli(["export", tmp_path / "tiny.gguf", tmp_path / "mine"], capsys)
    assert code == 2 and "holds files an export does not write (notes.txt)" in err


def test_sample_continues_a_prompt_and_answers_a_chat_turn_with_the_kv_cache(folder, capsys):
    loaded = load_text_model(str(folder))
    tok, model = loaded.tokenizer, loaded.model
    code, out, err = cli(["sample", folder, "--prompt", "hola", "--max-new-tokens", "5"], capsys)
    assert code == 0, err
    expected = tok.decode(model.generate(tok.encode("hola", add_special_tokens=True), 5, eos_id=tok.eos_id,
                                         vocab_limit=tok.vocab_size)[0], skip_special_tokens=True)
    assert out == f"hola{expected}\n"
    code, out, err = cli(["sample", folder, "--chat", "--prompt", "hola", "--max-new-tokens", "5"], capsys)
    chat = tok.encode(tok.apply_chat_template([{"role": "user", "content": "hola"}], add_generation_prompt=True))
    answer = tok.decode(model.generate(chat, 5, eos_id=tok.eos_id, vocab_limit=tok.vocab_size)[0],
                        skip_special_tokens=True)
    assert code == 0 and out == f"hola\n{answer}\n"
    code, out, _ = cli(["sample", folder, "--prompt", "hola", "--temperature", "1", "--top-p", "0.9", "--seed", "3",
                        "-n", "2", "--max-new-tokens", "4"], capsys)
    code2, out2, _ = cli(["sample", folder, "--prompt", "hola", "--temperature", "1", "--top-p", "0.9", "--seed",
                          "3", "-n", "2", "--max-new-tokens", "4"], capsys)
    assert code == code2 == 0 and out == out2 and out.count("\nhola") == 1 and out.startswith("hola")


@pytest.mark.parametrize("top_p", ["0", "1.5", "nan"])
def test_a_top_p_outside_0_1_is_a_bad_argument(folder, capsys, top_p):
    with pytest.raises(SystemExit) as exit_:
        cli(["sample", folder, "--prompt", "hola", "--top-p", top_p], capsys)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"must be a number in (0, 1], got {top_p}" in err and "Traceback" not in err


def test_chat_and_top_p_are_refused_for_a_character_model(run, capsys):
    code, _, err = cli(["sample", run, "--chat", "--prompt", "comer|R1|"], capsys)
    assert code == 2 and "--chat and --top-p are for a pretrained model" in err
