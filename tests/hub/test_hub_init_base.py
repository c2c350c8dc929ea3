"""`minitrain init --base PATH|user/repo`: the model section comes from a trained model (init_from included),
the config still validates against the data, and a base that does not fit the data is a clear error."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from fakehub import RECORDS, TINY_MODEL, make_run, serving
from test_cli import run
from test_config_data import make_corpus

from minitrain.common.paths import course_file
from minitrain.data.corpus import make_record, records_to_jsonl
from minitrain.hub.export_hf import export_model
from minitrain.hub.upload import publish

TOKEN = "hf_initBaseToken7Lm"
REPO = "alice/minigpt-base"


@pytest.fixture
def base(tmp_path):
    """A finished run (tiny random model) and its export; returns the export folder."""
    export_model(make_run(tmp_path / "work"), tmp_path / "export")
    return tmp_path / "export"


@pytest.fixture
def data(tmp_path, base):
    """Records the base's vocabulary covers, with that vocabulary."""
    return data_folder(tmp_path / "data", RECORDS, vocab_from=base / "vocab.json")


def data_folder(folder, texts, vocab_from=None):
    """train/val corpus records of `texts` ("verb|T#|form"; the last two are val), with a copy of `vocab_from`."""
    folder.mkdir(parents=True)
    records = [make_record(verb, code[0], int(code[1]), form) for verb, code, form in (t.split("|") for t in texts)]
    for split, chosen in (("train", records[:-2]), ("val", records[-2:])):
        (folder / f"{split}.jsonl").write_text(records_to_jsonl(chosen), "utf-8")
    if vocab_from is not None:
        shutil.copy(vocab_from, folder / "vocab.json")
    return folder


def model_section(config) -> dict:
    return yaml.safe_load(config.read_text(encoding="utf-8"))["model"]


@pytest.mark.parametrize("template", ["minimal", "lab01"])
def test_init_from_an_export_folder_writes_its_model_section_and_validates(base, data, tmp_path, capsys, template):
    out = tmp_path / "c.yaml"
    code, _, err = run(["init", "--template", template, "--base", base, "--data", data, "-o", out], capsys)
    assert code == 0, err
    assert model_section(out) == {**TINY_MODEL, "init_from": str(base)}
    code, checked, _ = run(["validate", out], capsys)
    assert code == 0 and "vocab_size 24" in checked and "max_seq_len 16" in checked


@pytest.mark.slow
def test_the_config_trains_from_the_base_weights(base, data, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MINITRAIN_MODELS_DIR", raising=False)
    out = tmp_path / "c.yaml"
    assert run(["init", "--base", base, "--data", data, "-o", out], capsys)[0] == 0
    code, _, err = run(["train", out, "--set", "training.total_steps=2", "--out-dir", tmp_path / "run", "--quiet"],
                       capsys)
    assert code == 0, err
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["init_from"] == str(base / "model.safetensors") and manifest["status"] == "completed"


def test_init_from_a_hub_id_and_a_folder_without_vocabulary_takes_the_bases(base, tmp_path, capsys, monkeypatch):
    with serving(monkeypatch, tmp_path / "hf", TOKEN, {TOKEN: "alice"}):
        publish(tmp_path / "work" / "run", REPO)
        data = data_folder(tmp_path / "mine", ["vivir|P1|vivo", "comer|R1|comí", "mover|P1|muevo", "vivir|R1|viví"])
        out = tmp_path / "c.yaml"
        code, _, err = run(["init", "--base", REPO, "--data", data, "-o", out], capsys)
    assert code == 0, err
    assert f"wrote {data / 'vocab.json'} (the base model's vocabulary)" in err
    assert (data / "vocab.json").read_bytes() == (base / "vocab.json").read_bytes()
    assert model_section(out) == {**TINY_MODEL, "init_from": REPO}
    assert run(["validate", out], capsys)[0] == 0


def test_a_base_model_file_without_vocabulary_uses_the_datas(tmp_path, capsys):
    make_run(tmp_path / "work")
    model_file = tmp_path / "work" / "models" / "minigpt-test.safetensors"
    data = data_folder(tmp_path / "mine", RECORDS)  # no vocab.json: built from the data, as without --base
    code, printed, err = run(["init", "--base", model_file, "--data", data], capsys)
    assert code == 0 and "the characters of the splits" in err
    assert yaml.safe_load(printed)["model"] == {**TINY_MODEL, "init_from": str(model_file)}


def test_a_base_too_small_for_the_data_is_refused_with_both_reasons(base, tmp_path, capsys):
    (base / "vocab.json").unlink()  # a base without a vocabulary: the data's own (47 ids) is used
    data = data_folder(tmp_path / "corpus", ["caminar|P1|camino", "comer|P2|comes", "vivir|R3|vivió", "ir|P1|voy"],
                       vocab_from=course_file("data/processed/vocab.json"))
    out = tmp_path / "c.yaml"
    code, _, err = run(["init", "--base", base, "--data", data, "-o", out], capsys)
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"error: --base {base} does not fit the data: ")
    assert "its vocab_size 24 is smaller than the 47 ids" in err
    assert f"its max_seq_len 16 is shorter than the longest record, {data / 'train.jsonl'}:1, which needs 18" in err
    assert not out.exists()


def test_a_different_vocabulary_is_refused(base, tmp_path, capsys):
    data = make_corpus(tmp_path / "corpus")  # its own vocab.json, of other characters
    code, _, err = run(["init", "--base", base, "--data", data], capsys)
    assert code == 2 and f"its vocabulary ({base / 'vocab.json'}, 13 characters) differs from" in err


def test_characters_the_base_cannot_encode_are_refused_and_nothing_is_written(base, tmp_path, capsys):
    data = data_folder(tmp_path / "mine", ["comer|P1|como", "beber|P1|bebo", "vivir|P1|vivo", "comer|R1|comí"])
    code, _, err = run(["init", "--base", base, "--data", data, "-o", tmp_path / "c.yaml"], capsys)
    assert code == 2 and "the data has characters its vocabulary" in err and "'b'" in err
    assert not (data / "vocab.json").exists() and not (tmp_path / "c.yaml").exists()
