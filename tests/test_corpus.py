"""The JSONL record format: writing, loading, and one clear error per bad line."""

from __future__ import annotations

import pytest

from minitrain.data.corpus import format_text, load_records, make_record, records_to_jsonl
from minitrain.errors import UserError

RECORDS = [make_record("caminar", "P", 1, "camino"), make_record("cerrar", "S", 4, "cerremos")]


def test_text_format():
    assert format_text("caminar", "P", 1, "camino") == "caminar|P1|camino"
    assert RECORDS[1] == {
        "verb": "cerrar", "tense": "S", "person": 4, "form": "cerremos", "text": "cerrar|S4|cerremos",
    }


def test_jsonl_round_trip_keeps_utf8(tmp_path):
    records = [*RECORDS, make_record("oír", "P", 4, "oímos")]
    text = records_to_jsonl(records)
    assert "oímos" in text and text.count("\n") == 3
    path = tmp_path / "split.jsonl"
    path.write_text(text, encoding="utf-8")
    assert load_records(path) == records


@pytest.mark.lab00
@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"verb": "caminar", "tense": "P", ', "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"verb": "caminar", "tense": "P", "person": 1, "form": "camino"}', "expected the fields"),
        ('{"verb": "caminar", "tense": "X", "person": 1, "form": "camino", "text": "caminar|X1|camino"}', "tense"),
        ('{"verb": "caminar", "tense": "P", "person": 7, "form": "camino", "text": "caminar|P7|camino"}', "person"),
        ('{"verb": "caminar", "tense": "P", "person": 1, "form": "camino", "text": "caminar|P2|camino"}',
         "does not match"),
        ("", "invalid JSON"),
    ],
)
def test_corrupted_line_names_file_and_line(tmp_path, bad_line, message):
    lines = records_to_jsonl(RECORDS).splitlines()
    lines.insert(1, bad_line)
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match=message) as info:
        load_records(path)
    assert str(info.value).startswith(f"{path}:2: ")


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_bytes(records_to_jsonl(RECORDS).encode() + b'{"verb": "\xff"}\n')
    with pytest.raises(UserError, match=r"train\.jsonl:3: not valid UTF-8"):
        load_records(path)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_records(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(UserError, match="no records"):
        load_records(tmp_path / "empty.jsonl")


def test_overlong_line_is_rejected(tmp_path):
    form = "x" * 25
    path = tmp_path / "long.jsonl"
    path.write_text(records_to_jsonl([make_record("caminar", "P", 1, form)]), encoding="utf-8")
    with pytest.raises(UserError, match="more than 32"):
        load_records(path)
