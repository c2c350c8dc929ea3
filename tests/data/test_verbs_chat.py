"""The verb corpus in chat form (scripts/verbs_to_chat.py): the committed files are what the script writes, byte
for byte; the held-out verbs stay held out; the text readers see three splits of chat records."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from text_fixtures import TinyTokenizer

from minitrain.data.split import DEV_VERBS, VAL_VERBS
from minitrain.data.text_examples import encode_record
from minitrain.data.text_records import describe_text_data, read_file

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "data" / "chat" / "verbs"
_spec = importlib.util.spec_from_file_location("verbs_to_chat", ROOT / "scripts" / "verbs_to_chat.py")
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)


def verbs_of(path: Path) -> set[str]:
    return {re.search("«(.+?)»", line).group(1) for line in path.read_text("utf-8").splitlines()}


def test_rerunning_the_script_writes_the_committed_bytes(tmp_path, capsys):
    assert script.main(["--out-dir", str(tmp_path)]) == 0
    for name in ("val.jsonl", "test.jsonl", "README.md"):  # the README holds train.jsonl's sha256: it pins it too
        assert (tmp_path / name).read_bytes() == (COMMITTED / name).read_bytes(), name
    assert verbs_of(tmp_path / "test.jsonl") == set(VAL_VERBS) and verbs_of(tmp_path / "val.jsonl") == set(DEV_VERBS)
    assert not verbs_of(tmp_path / "train.jsonl") & {*VAL_VERBS, *DEV_VERBS}
    data = describe_text_data(tmp_path)  # every record read, all of one kind
    assert data["splits"] == {"train": 16128, "val": 144, "test": 144} and data["kind"] == "chat"
    assert "test.jsonl      144 conversations" in capsys.readouterr().out


def test_a_question_reads_as_spanish_and_the_answer_is_the_form():
    assert script.question("vender", "C", 4) == "Conjuga «vender» en condicional, primera persona del plural."
    first = json.loads((COMMITTED / "test.jsonl").read_text("utf-8").splitlines()[0])
    assert first == {"messages": [
        {"role": "user", "content": "Conjuga «caminar» en presente de indicativo, primera persona del singular."},
        {"role": "assistant", "content": "camino"}]}
    record = read_file(COMMITTED / "test.jsonl")[99]  # line 100
    tok = TinyTokenizer()
    example = encode_record(record, tok, "completion")
    counted = [i for i, keep in zip(example.ids, example.loss_mask, strict=True) if keep]
    assert tok.decode(counted) == "dividiríamos<|im_end|>"
