"""The JSONL record format: writing, loading, and one clear error per bad line."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from minitrain.common.errors import UserError
from minitrain.data.build import build_corpus, data_manifest_hash
from minitrain.data.corpus import PERSONS, TENSES, format_text, load_records, make_record, records_to_jsonl
from minitrain.data.split import DEV_VERBS, SPLITS, VAL_VERBS
from minitrain.data.tokenizer import CharTokenizer
from minitrain.data.verbs import load_verbs

_spec = importlib.util.spec_from_file_location(
    "build_corpus_script", Path(__file__).resolve().parents[2] / "scripts" / "build_corpus.py"
)
build_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_script)

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
    assert str(info.value).startswith(f"{path}:2: ") and info.value.exit_code == 2  # invalid data: bad input


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_bytes(records_to_jsonl(RECORDS).encode() + b'{"verb": "\xff"}\n')
    with pytest.raises(UserError, match=r"train\.jsonl:3: not valid UTF-8"):
        load_records(path)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_records(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(UserError, match="no records") as info:
        load_records(tmp_path / "empty.jsonl")
    assert info.value.exit_code == 2


def test_overlong_line_is_rejected(tmp_path):
    form = "x" * 25
    path = tmp_path / "long.jsonl"
    path.write_text(records_to_jsonl([make_record("caminar", "P", 1, form)]), encoding="utf-8")
    with pytest.raises(UserError, match="more than 32"):
        load_records(path)


# ---------------------------------------------------------------------------------------- the committed corpus

ROOT = Path(__file__).resolve().parents[2]
VERBS_TSV = ROOT / "data" / "raw" / "verbs.tsv"
PROCESSED = ROOT / "data" / "processed"
CORPUS_FILES = ("train.jsonl", "dev.jsonl", "val.jsonl", "vocab.json", "manifest.json")


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[dict]]:
    return {name: load_records(PROCESSED / f"{name}.jsonl") for name in SPLITS}


@pytest.fixture(scope="module")
def fresh_build(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    build_corpus(VERBS_TSV, out)
    return out


@pytest.mark.lab00
def test_committed_files_equal_a_fresh_build(fresh_build):
    for name in CORPUS_FILES:
        assert (PROCESSED / name).read_bytes() == (fresh_build / name).read_bytes(), (
            f"data/processed/{name} is stale: run scripts/build_corpus.py"
        )


def test_build_twice_gives_identical_bytes(fresh_build, tmp_path):
    build_corpus(VERBS_TSV, tmp_path)
    for name in CORPUS_FILES:
        assert (tmp_path / name).read_bytes() == (fresh_build / name).read_bytes()


@pytest.mark.lab00
def test_manifest_hashes_and_counts_match_the_files(corpus):
    manifest = json.loads((PROCESSED / "manifest.json").read_text(encoding="utf-8"))
    for name, info in manifest["files"].items():
        assert info["sha256"] == hashlib.sha256((PROCESSED / name).read_bytes()).hexdigest(), name
    for name, records in corpus.items():
        info = manifest["files"][f"{name}.jsonl"]
        assert info["records"] == len(records) == 36 * info["verbs"]
        assert info["characters"] == sum(len(r["text"]) for r in records)
    assert manifest["source"]["sha256"] == hashlib.sha256(VERBS_TSV.read_bytes()).hexdigest()
    assert manifest["val_verbs"] == list(VAL_VERBS) and manifest["dev_verbs"] == list(DEV_VERBS)
    assert manifest["heldout_policy"] == "verbs_4"
    assert data_manifest_hash(PROCESSED) == hashlib.sha256((PROCESSED / "manifest.json").read_bytes()).hexdigest()


@pytest.mark.lab00
def test_no_heldout_verb_in_train_or_dev(corpus):
    verbs = {name: {r["verb"] for r in records} for name, records in corpus.items()}
    assert verbs["val"] == set(VAL_VERBS)
    assert verbs["dev"] == set(DEV_VERBS)
    assert not verbs["train"] & (verbs["val"] | verbs["dev"])
    # No other verb carries a held-out stem either (encerrar would leak cerr-, revender vend-).
    for held_out in (*VAL_VERBS, *DEV_VERBS):
        others = (verbs["train"] | verbs["dev"] | verbs["val"]) - {held_out}
        assert not [v for v in others if held_out[:-2] in v], held_out


@pytest.mark.lab00
def test_every_record_fits_in_32_tokens(corpus):
    tok = CharTokenizer.load(PROCESSED / "vocab.json")
    assert tok.vocab_size <= 64
    for records in corpus.values():
        for r in records:
            line = tok.encode_line(r["text"])
            assert len(line) <= 32, r["text"]
            assert tok.decode(line) == r["text"]  # and the vocabulary round-trips every record


def test_every_verb_has_all_36_cells_in_order(corpus):
    for records in corpus.values():
        for start in range(0, len(records), 36):
            block = records[start : start + 36]
            assert len({r["verb"] for r in block}) == 1
            assert [(r["tense"], r["person"]) for r in block] == [(t, p) for t in TENSES for p in PERSONS]


def test_heldout_trigrams_all_occur_in_training(corpus):
    # Held-out lines are made of pieces the model has seen; what it has not seen is the whole stem.
    def trigrams(records):
        return {t[i : i + 3] for r in records for t in ["^" + r["text"] + "$"] for i in range(len(t) - 2)}

    seen = trigrams(corpus["train"])
    for name in ("val", "dev"):
        assert not trigrams(corpus[name]) - seen, name


def test_verb_list_is_big_and_mostly_regular():
    verbs = load_verbs(VERBS_TSV)
    regular = [v for v in verbs if v.verb_class == "regular"]
    assert len(verbs) >= 300
    assert len(regular) >= len(verbs) / 2


def test_build_script_writes_the_corpus_and_reports_bad_input(tmp_path, capsys):
    assert build_script.main(["--out-dir", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(CORPUS_FILES)
    bad = tmp_path / "verbs.tsv"
    bad.write_text("hablar\tregular\nencerrar\te-ie\n", encoding="utf-8")
    assert build_script.main(["--verbs", str(bad), "--out-dir", str(tmp_path / "bad")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert not (tmp_path / "bad").exists()  # nothing half-written
    (tmp_path / "a-file").write_text("")
    assert build_script.main(["--out-dir", str(tmp_path / "a-file" / "out")]) == 1  # cannot write there
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "a-file" in err and "Traceback" not in err
