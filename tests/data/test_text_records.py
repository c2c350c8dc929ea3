"""Text records from every file people have: kinds told by keys, one error naming the file and line for a bad
record, documents one per file, split folders, hf:// datasets, and `describe_text_data` writing nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.csv
import pyarrow.feather
import pyarrow.parquet
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minitrain.common.errors import UserError
from minitrain.data.text_records import describe_text_data, locate_text, read_file, read_files

CHAT = [
    {"messages": [{"role": "user", "content": "Conjuga «vender»."}, {"role": "assistant", "content": "vendo"}]},
    {"messages": [{"role": "system", "content": "Eres breve."}, {"role": "user", "content": "Hola"},
                  {"role": "assistant", "content": "¡Hola!"}], "id": 7},
]
PAIRS = [{"prompt": "2 + 2 =", "completion": " 4"}, {"prompt": "", "completion": "Érase una vez", "score": 0.5}]
TEXTS = [{"text": "uno\n\ndos"}, {"text": "tres", "source": "x"}]


def jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), "utf-8")
    return path


def datas(records) -> list[dict]:
    return [r.data for r in records]


@pytest.mark.parametrize("rows, kind", [(TEXTS, "text"), (PAIRS, "prompt_completion"), (CHAT, "chat")])
def test_the_kind_comes_from_the_keys_and_other_keys_are_dropped(tmp_path, rows, kind):
    records = read_file(jsonl(tmp_path / "a.jsonl", rows))
    assert [r.kind for r in records] == [kind, kind]
    assert [r.where for r in records] == [f"{tmp_path / 'a.jsonl'}:1", f"{tmp_path / 'a.jsonl'}:2"]
    keys = {"text": ["text"], "prompt_completion": ["completion", "prompt"], "chat": ["messages"]}[kind]
    assert all(sorted(r.data) == keys for r in records)
    assert datas(records)[0] == rows[0]


@pytest.mark.parametrize("rows", [TEXTS, PAIRS, CHAT])
def test_every_format_reads_the_same_records(tmp_path, rows):
    expected = datas(read_file(jsonl(tmp_path / "a.jsonl", rows)))
    (tmp_path / "b.json").write_text(json.dumps(rows), "utf-8")
    (tmp_path / "lines.json").write_text((tmp_path / "a.jsonl").read_text("utf-8"), "utf-8")  # JSON Lines named .json
    table = pa.Table.from_pylist(rows)
    pyarrow.parquet.write_table(table, tmp_path / "c.parquet")
    pyarrow.feather.write_feather(table, tmp_path / "d.arrow")
    for name in ("b.json", "lines.json", "c.parquet", "d.arrow"):
        assert datas(read_file(tmp_path / name)) == expected, name
    if rows is not CHAT:
        pyarrow.csv.write_csv(table, tmp_path / "e.csv")
        assert datas(read_file(tmp_path / "e.csv")) == expected
    assert read_file(tmp_path / "c.parquet")[1].where == f"{tmp_path / 'c.parquet'}: row 2"


def test_a_null_table_cell_is_an_absent_key(tmp_path):
    table = pa.table({"text": ["uno", None], "prompt": [None, "p"], "completion": [None, "c"]})
    pyarrow.parquet.write_table(table, tmp_path / "mixed.parquet")
    with pytest.raises(UserError, match=r"mixed\.parquet: row 2: a prompt_completion record, but .*row 1 is a text"):
        read_file(tmp_path / "mixed.parquet")


def test_blank_lines_crlf_and_a_byte_order_mark_are_read(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"text": "uno"}\r\n\r\n{"text": "dos"}\r\n')
    records = read_file(path)
    assert datas(records) == [{"text": "uno"}, {"text": "dos"}] and records[1].where.endswith("a.jsonl:3")


BAD_LINES = [
    ('{"text": "uno"', r"invalid JSON"),
    ("[1, 2]", r"expected one JSON object per line, got a list"),
    ('{"id": 3}', r"holds none of the keys text, prompt \+ completion, messages, conversations, instruction \+ output "
                    r"\(its keys: \['id'\]\)"),
    ('{"prompt": "p"}', r"has 'prompt' but no 'completion'"),
    ('{"completion": "c"}', r"has 'completion' but no 'prompt'"),
    ('{"text": "t", "messages": []}', r"keys of two shapes of record \(messages, text\)"),
    ('{"text": 3}', r"'text' must be a string, got an integer"),
    ('{"text": "  \\n"}', r"'text' is empty"),
    ('{"prompt": "p", "completion": ""}', r"'completion' is empty"),
    ('{"text": "\\ud800"}', r"lone surrogate"),
    ('{"messages": []}', r"'messages' must be a non-empty list .* got an empty list"),
    ('{"messages": "hola"}', r"'messages' must be a non-empty list .* got a string"),
    ('{"messages": [["user", "hola"]]}', r"messages\[0\] must be an object \{role, content\}, got a list"),
    ('{"messages": [{"role": "tool", "content": "x"}]}', r"messages\[0\]: role 'tool' is not one of system, user"),
    ('{"messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "y"}]}',
     r"messages\[1\]: a system message may only come first"),
    ('{"messages": [{"role": "user", "content": "x", "name": "ana"}]}', r"exactly the keys role and content"),
    ('{"messages": [{"role": "user", "content": null}]}', r"messages\[0\]: content must be a string, got null"),
    ('{"messages": [{"role": "user", "content": "x"}]}', r"a chat record, but .*:1 is a text record"),
]


@pytest.mark.parametrize("line, message", BAD_LINES)
def test_a_bad_line_is_one_error_naming_the_file_and_line(tmp_path, line, message):
    path = tmp_path / "data.jsonl"
    path.write_text('{"text": "bien"}\n\n' + line + "\n", "utf-8")
    with pytest.raises(UserError, match=message) as caught:
        read_file(path)
    assert str(caught.value).startswith(f"{path}:3: ") and caught.value.exit_code == 2


@pytest.mark.parametrize("content, message", [
    (b"", "holds no records"), (b"\n\n", "holds no records"), (b'{"text": "\xff"}\n', r"not UTF-8"),
    (b'[{"text": "a"}, 3]', r"row 2: expected a JSON object, got an integer"), (b"[{", r"invalid JSON"),
])  # fmt: skip
def test_an_empty_or_broken_file_is_one_error(tmp_path, content, message):
    path = tmp_path / ("data.json" if content.startswith(b"[") else "data.jsonl")
    path.write_bytes(content)
    with pytest.raises(UserError, match=message) as caught:
        read_file(path)
    assert str(caught.value).startswith(str(path))


def test_unknown_extensions_and_missing_files_are_refused(tmp_path):
    (tmp_path / "notes.docx").write_bytes(b"PK")
    with pytest.raises(UserError, match=r"notes\.docx: not a text data file \(known extensions: .*\.jsonl"):
        read_file(tmp_path / "notes.docx")
    with pytest.raises(UserError, match="not found"):
        read_file(tmp_path / "gone.jsonl")
    with pytest.raises(UserError, match="no such file or folder"):
        locate_text(tmp_path / "gone")


def test_a_text_file_is_one_document_and_a_folder_is_one_per_file(tmp_path):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "b.md").write_text("# Título\n\nPárrafo uno.\n\nPárrafo dos.\n", "utf-8")
    (docs / "sub" / "a.txt").write_bytes("\ufeffUna línea\r\nOtra\n".encode())
    (docs / "README.md").write_text("the folder's description", "utf-8")
    (docs / ".hidden.txt").write_text("no", "utf-8")
    (docs / "LICENSE").write_text("no", "utf-8")
    records = read_files(locate_text(docs)["all"])
    assert [Path(r.where).name for r in records] == ["b.md", "a.txt"]  # path order: docs/b.md < docs/sub/a.txt
    assert datas(records) == [{"text": "# Título\n\nPárrafo uno.\n\nPárrafo dos.\n"}, {"text": "Una línea\r\nOtra\n"}]
    assert read_file(docs / "README.md")[0].data == {"text": "the folder's description"}  # named: read
    (docs / "empty.txt").write_text(" \n", "utf-8")
    with pytest.raises(UserError, match=r"empty\.txt: the document is empty"):
        read_files(locate_text(docs)["all"])


def test_documents_mixed_with_chat_files_are_two_kinds(tmp_path):
    (tmp_path / "a.txt").write_text("un documento", "utf-8")
    jsonl(tmp_path / "b.jsonl", CHAT)
    with pytest.raises(UserError, match=r"b\.jsonl:1: a chat record, but .*a\.txt is a text record"):
        read_files(locate_text(tmp_path)["all"])


def test_a_folder_of_split_files_is_grouped_by_split(tmp_path):
    jsonl(tmp_path / "train.jsonl", CHAT)
    jsonl(tmp_path / "validation-00000-of-00001.jsonl", CHAT[:1])
    jsonl(tmp_path / "test.jsonl", CHAT[1:])
    assert describe_text_data(tmp_path)["splits"] == {"test": 1, "train": 2, "val": 1}
    jsonl(tmp_path / "extra.jsonl", CHAT)
    with pytest.raises(UserError, match=r"named after a split .* but .*extra\.jsonl is not"):
        locate_text(tmp_path)
    (tmp_path / "extra.jsonl").unlink()
    (tmp_path / "train.jsonl").unlink()
    with pytest.raises(UserError, match="has test, val files but no train file"):
        locate_text(tmp_path)


def test_splits_of_two_kinds_are_refused(tmp_path):
    jsonl(tmp_path / "train.jsonl", CHAT)
    jsonl(tmp_path / "test.jsonl", TEXTS)
    with pytest.raises(UserError, match=r"test\.jsonl:1: a text record, but .*train\.jsonl:1 is a chat record"):
        describe_text_data(tmp_path)


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


def test_describe_counts_samples_and_writes_nothing(tmp_path):
    data = tmp_path / "my-data"
    data.mkdir()
    jsonl(data / "train.jsonl", CHAT * 3)
    pyarrow.parquet.write_table(pa.Table.from_pylist(CHAT), data / "test.parquet")
    before = snapshot(data), sorted(os.listdir(data))
    described = describe_text_data(data)
    assert described == {"kind": "chat", "shape": "chat", "format": "jsonl+parquet", "samples": 8,
                         "files": [str(data / "train.jsonl"), str(data / "test.parquet")],
                         "splits": {"train": 6, "test": 2}}
    assert (snapshot(data), sorted(os.listdir(data))) == before
    (tmp_path / "one.md").write_text("hola", "utf-8")
    assert describe_text_data(tmp_path / "one.md") == {"kind": "text", "shape": "text", "format": "documents",
                                                       "samples": 1, "files": [str(tmp_path / "one.md")],
                                                       "splits": {"all": 1}}


def test_an_hf_dataset_is_read_from_the_cache(hub):
    lines = "".join(json.dumps(row) + "\n" for row in CHAT).encode()
    hub.add_dataset("alice/chats", {"data/train.jsonl": lines, "data/test.jsonl": lines, "README.md": b"# chats\n"})
    described = describe_text_data("hf://datasets/alice/chats")
    assert (described["kind"], described["samples"], described["splits"]) == ("chat", 4, {"train": 2, "test": 2})


# Damage, generated: any change to a valid JSONL file either leaves records to read or is one UserError naming
# the file (and, for a line's fault, the line), never another exception.
VALID = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in CHAT * 2).encode()
damage = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, len(VALID) - 1), st.integers(0, 255)),
    st.tuples(st.just("cut"), st.integers(0, len(VALID) - 1), st.integers(0, 0)),
    st.tuples(st.just("insert"), st.integers(0, len(VALID)), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(0, len(VALID) - 1), st.integers(1, 40)),
)


def damaged(changes) -> bytes:
    data = bytearray(VALID)
    for how, at, what in changes:
        at = min(at, len(data))
        if how == "flip" and at < len(data):
            data[at] = what
        elif how == "cut":
            del data[at:]
        elif how == "insert":
            data[at:at] = what
        elif how == "delete":
            del data[at : at + what]
    return bytes(data)


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(damage, min_size=1, max_size=3), st.sampled_from(["data.jsonl", "data.json"]))
def test_damaged_jsonl_is_read_or_one_user_error_naming_the_file(tmp_path, changes, name):
    path = tmp_path / name
    path.write_bytes(damaged(changes))
    try:
        records = read_file(path)
    except UserError as e:
        assert str(e).startswith(str(path)) and "\n" not in str(e) and e.exit_code == 2
    else:
        assert records and len({r.kind for r in records}) == 1
        assert all(r.where.startswith(str(path)) for r in records)


def test_a_json_file_of_one_pretty_printed_object_is_one_record(tmp_path):
    path = tmp_path / "one.json"
    path.write_text(json.dumps(CHAT[0], indent=2), "utf-8")
    assert datas(read_file(path)) == [CHAT[0]]
    path.write_text(json.dumps({"data": CHAT}, indent=2), "utf-8")
    with pytest.raises(UserError, match=r"one\.json: holds none of the keys .*\['data'\]"):
        read_file(path)
