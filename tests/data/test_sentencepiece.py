"""SentencePiece tokenizers (a GGUF's `tokenizer.ggml.model = llama`, a Hugging Face folder's tokenizer.json)
against the committed ids of transformers and of sentencepiece itself (tests/data/spm/, made by
scripts/make_spm_fixtures.py from two tiny BPE models with byte fallback: Gemma's style and Llama 2's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_pretrained_tokenizer import tiny_fields

from minitrain.common.errors import UserError
from minitrain.data.pretrained_tokenizer import GGUF_TOKENIZER_MODELS, PretrainedTokenizer
from minitrain.data.sentencepiece import cut_merges
from minitrain.formats.gguf_read import open_gguf, tokenizer_fields

SPM = Path(__file__).parent / "spm"
ORACLE = json.loads((SPM / "ids.json").read_text(encoding="utf-8"))
STYLES = ("gemma", "llama")


def gguf_tokenizer(style: str, **change) -> PretrainedTokenizer:
    path = SPM / f"{style}.gguf"
    return PretrainedTokenizer.from_gguf_fields(**{**tokenizer_fields(open_gguf(path), path), **change})


def texts(style: str) -> list[str]:
    return [t.format(**ORACLE[style]["specials"]) for t in ORACLE["texts"]]


@pytest.mark.parametrize("source", ["gguf", "folder"])
@pytest.mark.parametrize("style", STYLES)
def test_ids_and_decodes_are_transformers(style, source):
    tok = gguf_tokenizer(style) if source == "gguf" else PretrainedTokenizer.from_folder(SPM / f"{style}-hf")
    for text, want in zip(texts(style), ORACLE[style][source]["rows"], strict=True):
        with_special, plain = tok.encode(text, add_special_tokens=True), tok.encode(text)
        assert (with_special, plain) == (want["ids"], want["plain"]), text
        assert tok.decode(plain) == want["decode"], text
        assert tok.decode(with_special, skip_special_tokens=True) == want["decode_skip"], text


@pytest.mark.parametrize("style", STYLES)
def test_ids_are_sentencepieces_own_where_transformers_agrees_with_it(style):
    """sentencepiece is a second oracle, on the texts without special tokens; on a text that starts with spaces
    transformers' Llama tokenizer (and so minitrain) puts its prefix space differently: those two are named."""
    tok = gguf_tokenizer(style)
    differ = [text for text, ids in zip(texts(style), ORACLE[style]["sentencepiece"], strict=True)
              if ids is not None and tok.encode(text) != ids]
    assert differ == ([] if style == "gemma" else [ORACLE["texts"][4], " "])


def test_byte_fallback_spells_an_unknown_character_in_its_utf8_bytes():
    tok = gguf_tokenizer("gemma")
    vocab = tok.tokenizer.get_vocab()
    assert tok.encode("🙂") == [vocab[f"<0x{b:02X}>"] for b in "🙂".encode()]
    assert tok.decode(tok.encode("漢🙂")) == "漢🙂"


def test_special_ids_and_flags_come_from_the_file():
    gemma, llama = gguf_tokenizer("gemma"), gguf_tokenizer("llama")
    assert (gemma.bos_id, gemma.eos_id, gemma.pad_id) == (2, 1, 0)
    assert (llama.bos_id, llama.eos_id, llama.pad_id) == (1, 2, None)
    assert gemma.encode("hola", True) == [2, *gemma.encode("hola")]  # add_bos_token
    assert gguf_tokenizer("gemma", add_bos=False).encode("hola", True) == gemma.encode("hola")
    assert gguf_tokenizer("gemma", add_eos=True).encode("hola", True) == [2, *gemma.encode("hola"), 1]
    assert gguf_tokenizer("gemma", add_bos=None).encode("hola", True)[0] == 2  # unsaid: BOS, as llama.cpp
    # add_space_prefix: Llama 2's "▁hola" for "hola" at the start; Gemma's none
    vocab = llama.tokenizer.get_vocab()
    def first_piece(tok: PretrainedTokenizer) -> str:
        return tok.tokenizer.encode("hola", add_special_tokens=False).tokens[0]

    assert first_piece(llama).startswith("▁")
    assert not first_piece(gguf_tokenizer("llama", add_space_prefix=False)).startswith("▁")
    assert vocab["<unk>"] == 0 and llama.encode("<unk>") == [0]  # the unknown piece is matched whole


def test_control_and_user_defined_pieces_are_matched_whole():
    tok = gguf_tokenizer("gemma")
    ids = tok.encode("<start_of_turn>user\n\nhola<end_of_turn>")
    assert ids[0] == 5 and ids[-1] == 6 and 8 in ids  # '\n\n' is user-defined piece 8
    assert tok.decode(ids, skip_special_tokens=True) == "user\n\nhola"  # control pieces skipped, '\n\n' kept


def test_merges_rank_by_position_then_longer_left_part():
    assert cut_merges(["a", "b", "c", "ab", "abc", "bc"]) == [("a", "b"), ("ab", "c"), ("a", "bc"), ("b", "c")]


def test_pieces_of_spaces_stored_with_spaces_join_runs_of_spaces():
    """Gemma's GGUF stores '  ' (score -1000) with real spaces; ranked by position, a run of spaces is one piece."""
    tok = gguf_tokenizer("gemma")
    fields = tokenizer_fields(open_gguf(SPM / "gemma.gguf"), SPM / "gemma.gguf")
    assert fields["tokens"][9] == "  " and tok.encode("a  b")[1] == 9


def test_gemma_chat_template_from_the_folder_is_transformers():
    tok = PretrainedTokenizer.from_folder(SPM / "gemma-hf")
    assert tok.apply_chat_template(ORACLE["chat"]) == ORACLE["gemma"]["chat"]
    assert tok.apply_chat_template(ORACLE["chat"][:4], add_generation_prompt=True) == ORACLE["gemma"]["chat_prompt"]
    assert ORACLE["gemma"]["chat_prompt"].endswith("<end_of_turn>\n<start_of_turn>model\n")


def test_a_gguf_without_chat_template_refuses_chat_rendering():
    with pytest.raises(UserError, match="no chat template"):
        gguf_tokenizer("gemma").apply_chat_template(ORACLE["chat"])


@pytest.mark.parametrize("model", ["bert", "rwkv", None])
def test_a_tokenizer_model_minitrain_cannot_build_is_refused_naming_file_and_value(model):
    with pytest.raises(UserError, match=rf"gemma\.gguf \(tokenizer\): tokenizer\.ggml\.model = {model!r}: "
                                        r"minitrain builds the tokenizers of 'gpt2' and 'llama' GGUF files only") as e:
        gguf_tokenizer("gemma", model=model)
    assert e.value.exit_code == 2 and tuple(GGUF_TOKENIZER_MODELS) == ("gpt2", "llama")


@pytest.mark.parametrize("style", STYLES)
def test_the_saved_folder_reads_back_with_the_same_ids(tmp_path, style):
    """What a run keeps in RUN/tokenizer/ and exports (transformers loads it alike: scripts/check_spm_tokenizer.py)."""
    gguf_tokenizer(style).save(tmp_path)
    tok = PretrainedTokenizer.from_folder(tmp_path)
    for text, want in zip(texts(style), ORACLE[style]["gguf"]["rows"], strict=True):
        assert tok.encode(text, add_special_tokens=True) == want["ids"], text
        assert tok.decode(want["plain"]) == want["decode"], text


def test_the_turn_end_is_the_token_the_template_closes_an_answer_with():
    """Gemma closes a turn with <end_of_turn> (6 here), not its EOS <eos> (1): a chat answer stops there."""
    gemma = PretrainedTokenizer.from_folder(SPM / "gemma-hf")
    assert (gemma.turn_end_id(), gemma.eos_id) == (6, 1)
    assert gguf_tokenizer("gemma").turn_end_id() is None  # no template in the GGUF
    assert PretrainedTokenizer.from_gguf_fields(**tiny_fields()).turn_end_id() == 2  # ChatML's <|im_end|>: its EOS
