"""The character tokenizer: fixed special ids, sorted characters, round trip, clear errors."""

from __future__ import annotations

import json
import re

import pytest

from minitrain.common.errors import UserError
from minitrain.data.tokenizer import MAX_VOCAB_SIZE, CharTokenizer

TEXTS = ["caminar|P1|camino", "cerrar|S4|cerremos", "oír|P4|oímos", "averiguar|R1|averigüé"]


@pytest.mark.lab00
def test_specials_come_first_then_sorted_characters():
    tok = CharTokenizer.from_texts(TEXTS)
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2)
    chars = sorted(set("".join(TEXTS)))
    assert tok.vocab_size == 3 + len(chars)
    assert tok.encode("".join(chars)) == list(range(3, 3 + len(chars)))


@pytest.mark.lab00
def test_round_trip_and_line_framing():
    tok = CharTokenizer.from_texts(TEXTS)
    for text in TEXTS:
        ids = tok.encode(text)
        assert len(ids) == len(text)
        assert tok.decode(ids) == text
        line = tok.encode_line(text)
        assert line == [tok.bos_id, *ids, tok.eos_id]
        assert tok.decode([*line, tok.pad_id, tok.pad_id]) == text


@pytest.mark.lab00
def test_unknown_character_names_the_character_and_record():
    tok = CharTokenizer.from_texts(TEXTS)
    with pytest.raises(UserError, match=r"'x'.*'caminar\|P1\|xamino'"):
        tok.encode("caminar|P1|xamino")


def test_decode_rejects_ids_outside_the_vocabulary():
    tok = CharTokenizer.from_texts(TEXTS)
    with pytest.raises(UserError, match="out of range"):
        tok.decode([1, tok.vocab_size])


def test_save_load_round_trip(tmp_path):
    tok = CharTokenizer.from_texts(TEXTS)
    path = tmp_path / "vocab.json"
    tok.save(path)
    loaded = CharTokenizer.load(path)
    assert loaded.chars == tok.chars and loaded.vocab_size == tok.vocab_size
    assert json.loads(path.read_text(encoding="utf-8"))["vocab_size"] == tok.vocab_size


def test_vocab_size_is_capped():
    chars = [chr(0x100 + i) for i in range(MAX_VOCAB_SIZE - 3)]
    assert CharTokenizer(chars).vocab_size == MAX_VOCAB_SIZE
    with pytest.raises(UserError, match="exceeds the maximum of 64"):
        CharTokenizer([*chars, chr(0x200)])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "the vocabulary file is not valid JSON"),
        ('{"format": "other"}', "not a vocabulary file"),
        ('{"format": "minitrain-char-vocab-v1", "specials": ["<pad>"], "chars": []}', "specials"),
        (
            '{"format": "minitrain-char-vocab-v1", "specials": ["<pad>", "<bos>", "<eos>"], '
            '"chars": ["b", "a"], "vocab_size": 5}',
            "sorted",
        ),
        (
            '{"format": "minitrain-char-vocab-v1", "specials": ["<pad>", "<bos>", "<eos>"], '
            '"chars": ["a", "b"], "vocab_size": 4}',
            "vocab_size 4 != 5",
        ),
        (
            '{"format": "minitrain-char-vocab-v1", "specials": ["<pad>", "<bos>", "<eos>"], '
            '"chars": ["a", "b"], "vocab_size": "5"}',
            "vocab_size '5' != 5 ids listed",  # a string, not the number it spells
        ),
        (
            '{"format": "minitrain-char-vocab-v1", "specials": ["<pad>", "<bos>", "<eos>"], '
            '"chars": ["a", null, [1]], "vocab_size": 6}',
            "'chars' must hold one-character strings, found None",
        ),
        (b"\xff\xfe", "the vocabulary file is not UTF-8 text"),
    ],
)
def test_bad_vocab_file_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / "vocab.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(UserError, match=re.escape(message)) as info:
        CharTokenizer.load(path)
    assert str(info.value).startswith(f"{path}: ") and info.value.exit_code == 2


def test_missing_vocab_file(tmp_path):
    with pytest.raises(UserError, match="not found"):
        CharTokenizer.load(tmp_path / "nope.json")
