"""The base's own tokenizer: byte-level BPE from GGUF fields, a Hugging Face folder, chat templates in the sandbox."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer

from minitrain.common.errors import UserError
from minitrain.data.chat_template import render_chat
from minitrain.data.pretrained_tokenizer import PretrainedTokenizer, bytes_to_unicode

TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
            "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def tiny_fields() -> dict:
    """A byte-level BPE vocabulary as a GGUF stores it: 3 control tokens, the 256 byte symbols, a few merges."""
    byte_tokens = list(bytes_to_unicode().values())
    merges = ["h o", "l a", "ho la", "Ġ hola", "c o", "m o", "co mo"]
    merged = [m.replace(" ", "") for m in merges]
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *byte_tokens, *merged]
    types = [3, 3, 3] + [1] * (len(tokens) - 3)
    return {"tokens": tokens, "merges": merges, "token_types": types, "bos_id": 1, "eos_id": 2, "pad_id": 2,
            "chat_template": TEMPLATE, "unk_id": 0}


def test_bytes_to_unicode_is_gpt2s_table():
    table = bytes_to_unicode()
    assert len(table) == 256 and len(set(table.values())) == 256
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("a")] == "a"


def test_gguf_byte_level_bpe_encodes_with_its_merges_and_round_trips():
    tok = PretrainedTokenizer.from_gguf_fields(**tiny_fields())
    vocab = tok.tokenizer.get_vocab()
    assert tok.encode("hola") == [vocab["hola"]]
    assert tok.encode("hola hola") == [vocab["hola"], vocab["Ġhola"]]
    assert tok.encode("como") == [vocab["como"]]
    text = "¿Cómo estás? ñandú 🙂\n\tfin"
    assert tok.decode(tok.encode(text)) == text  # every byte has a token: nothing is lost
    assert (tok.bos_id, tok.eos_id, tok.pad_id, tok.vocab_size) == (1, 2, 2, len(tiny_fields()["tokens"]))


def test_control_tokens_are_matched_whole_and_skippable():
    tok = PretrainedTokenizer.from_gguf_fields(**tiny_fields())
    ids = tok.encode("<|im_start|>hola<|im_end|>")
    assert ids[0] == 1 and ids[-1] == 2 and len(ids) == 3
    assert tok.decode(ids, skip_special_tokens=True) == "hola"
    assert tok.encode("hola", add_special_tokens=True) == tok.encode("hola")  # add_bos_token false: nothing added


def test_add_bos_puts_bos_in_front_only_with_special_tokens():
    tok = PretrainedTokenizer.from_gguf_fields(**tiny_fields(), add_bos=True)
    assert tok.encode("hola", add_special_tokens=True) == [1, *tok.encode("hola")]


def test_llama3_split_regex_is_used_for_its_pre_type():
    fields = tiny_fields()
    plain = PretrainedTokenizer.from_gguf_fields(**fields)
    llama3 = PretrainedTokenizer.from_gguf_fields(**fields, pre="llama-bpe")
    # Llama 3's regex groups digits by three; GPT-2's keeps a run of digits whole: different pieces, same text.
    assert plain.decode(plain.encode("12345")) == llama3.decode(llama3.encode("12345")) == "12345"
    assert llama3.tokenizer.pre_tokenizer.pre_tokenize_str("12345")[0][0] == "123"
    assert plain.tokenizer.pre_tokenizer.pre_tokenize_str("12345")[0][0] == "12345"


def test_a_gguf_tokenizer_model_without_a_record_is_refused_with_the_choices():
    with pytest.raises(UserError, match=r"tokenizer\.ggml\.model = 'bert': minitrain builds the "
                                        r"tokenizers of 'gpt2' and 'llama' GGUF files only"):
        PretrainedTokenizer.from_gguf_fields(**tiny_fields(), model="bert")


@pytest.mark.parametrize(("change", "message"), [
    ({"bos_id": 10_000}, "outside the vocabulary"),
    ({"merges": ["a b c"]}, "not two tokens"),
    ({"token_types": [1, 2]}, "token types for"),
    ({"merges": ["h o", "x yz"]}, "do not fit together"),
])
def test_malformed_gguf_fields_are_user_errors(change, message):
    with pytest.raises(UserError, match=message):
        PretrainedTokenizer.from_gguf_fields(**{**tiny_fields(), **change})


def test_chat_template_renders_like_transformers_and_is_sandboxed():
    tok = PretrainedTokenizer.from_gguf_fields(**tiny_fields())
    text = tok.apply_chat_template([{"role": "user", "content": "hola"}], add_generation_prompt=True)
    assert text == "<|im_start|>user\nhola<|im_end|>\n<|im_start|>assistant\n"
    assert render_chat("{{ bos_token }}{{ messages | tojson }}", [{"role": "user", "content": "ñ<b>"}],
                       special_tokens={"bos_token": "<s>"}) == '<s>[{"role": "user", "content": "ñ<b>"}]'
    # trim_blocks / lstrip_blocks: a block tag on its own line leaves nothing behind
    assert render_chat("  {% if true %}\nx\n  {% endif %}\n", []) == "x\n"
    with pytest.raises(UserError, match="roles must alternate"):
        render_chat("{{ raise_exception('roles must alternate') }}", [])
    with pytest.raises(UserError, match="chat template"):
        render_chat("{{ ''.__class__.__mro__ }}", [])  # the sandbox refuses Python internals
    with pytest.raises(UserError, match="not valid Jinja"):
        render_chat("{% for %}", [])


def test_no_chat_template_is_a_clear_error():
    tok = PretrainedTokenizer.from_gguf_fields(**{**tiny_fields(), "chat_template": None})
    with pytest.raises(UserError, match="no chat template"):
        tok.apply_chat_template([{"role": "user", "content": "x"}])


def test_folder_tokenizer_reads_config_and_saves_byte_for_byte(tmp_path):
    gguf_tok = PretrainedTokenizer.from_gguf_fields(**tiny_fields())
    base = tmp_path / "base"
    base.mkdir()
    (base / "tokenizer.json").write_text(gguf_tok.tokenizer.to_str(pretty=False) + "\n")  # not our own formatting
    config = {"bos_token": {"content": "<|im_start|>", "special": True}, "eos_token": "<|im_end|>",
              "chat_template": [{"name": "default", "template": TEMPLATE}, {"name": "tool_use", "template": "x"}]}
    (base / "tokenizer_config.json").write_text(json.dumps(config, indent=4))
    (base / "special_tokens_map.json").write_text(json.dumps({"pad_token": "<|endoftext|>"}))
    tok = PretrainedTokenizer.from_folder(base)
    assert (tok.bos_id, tok.eos_id, tok.pad_id) == (1, 2, 0)
    assert tok.chat_template == TEMPLATE
    assert tok.encode("hola hola") == gguf_tok.encode("hola hola")
    tok.save(tmp_path / "out")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert (tmp_path / "out" / name).read_bytes() == (base / name).read_bytes()


def test_gguf_tokenizer_saves_a_folder_that_reads_back_the_same(tmp_path):
    tok = PretrainedTokenizer.from_gguf_fields(**tiny_fields())
    tok.save(tmp_path)
    back = PretrainedTokenizer.from_folder(tmp_path)
    text = "hola como <|im_end|> ¿qué?"
    assert back.encode(text) == tok.encode(text)
    assert (back.bos_id, back.eos_id, back.pad_id, back.chat_template) == (1, 2, 2, TEMPLATE)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert Tokenizer.from_file(str(tmp_path / "tokenizer.json")).get_vocab_size() == tok.vocab_size


def test_a_broken_tokenizer_json_is_a_user_error(tmp_path):
    (tmp_path / "tokenizer.json").write_text('{"model": {"type": "Nope"}}')
    with pytest.raises(UserError, match=r"tokenizer\.json: not a tokenizer"):
        PretrainedTokenizer.from_folder(tmp_path)
    (tmp_path / "tokenizer.json").write_text(PretrainedTokenizer.from_gguf_fields(**tiny_fields()).tokenizer.to_str())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<nope>"}))
    with pytest.raises(UserError, match="eos_token '<nope>' is not in the vocabulary"):
        PretrainedTokenizer.from_folder(tmp_path)
