"""A run's text records from one data.source: the source's own splits, or ratios over what has no validation
split (one file, a folder of documents, only a train file); a run on a pretrained base trains from a folder and
from an hf:// dataset, and its checkpoints fingerprint every file read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_pretrained_runs import CHATS, LORA, base, chat_lines, train  # noqa: F401 (base: a fixture)

from minitrain.common.errors import UserError
from minitrain.config import load_config
from minitrain.config.problems import ConfigError
from minitrain.data.text_sources import source_files, source_records


def texts(records) -> list[str]:
    return [r.data["text"] for r in records]


def test_named_splits_are_kept_and_an_unsplit_source_needs_ratios(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("train.txt", "val.md", "test.txt"):
        (docs / name).write_text(f"el documento {name}", "utf-8")
    found = source_records(docs, None, 0)
    assert {k: texts(v) for k, v in found.items()} == {"train": ["el documento train.txt"],
                                                       "val": ["el documento val.md"],
                                                       "test": ["el documento test.txt"]}
    assert [p.name for p in source_files(docs)] == ["train.txt", "val.md", "test.txt"]  # split order
    one = tmp_path / "one.jsonl"
    one.write_text("".join(json.dumps({"text": f"línea {i}"}) + "\n" for i in range(20)), "utf-8")
    with pytest.raises(UserError, match=r"one\.jsonl: its files are not named after splits; give data\.split"):
        source_records(one, None, 0)
    split = source_records(one, {"train": 0.8, "val": 0.2}, 7)
    assert len(split["train"]) == 16 and len(split["val"]) == 4
    assert sorted(texts(split["train"]) + texts(split["val"])) == sorted(f"línea {i}" for i in range(20))
    assert texts(split["val"]) == sorted(texts(split["val"]), key=lambda t: int(t.split()[1]))  # file order
    assert source_records(one, {"train": 0.8, "val": 0.2}, 7) == split  # seeded
    assert source_records(one, {"train": 0.8, "val": 0.2}, 8) != split


def test_only_a_train_file_is_split_and_a_kept_test_file_is_not_split_again(tmp_path):
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"text": f"t{i}"}) + "\n" for i in range(10)), "utf-8")
    (tmp_path / "test.jsonl").write_text(json.dumps({"text": "prueba"}) + "\n", "utf-8")
    with pytest.raises(UserError, match=r"it has train, test files but no validation file; give data\.split"):
        source_records(tmp_path, None, 0)
    split = source_records(tmp_path, {"train": 0.9, "val": 0.1}, 0)
    assert (len(split["train"]), len(split["val"]), texts(split["test"])) == (9, 1, ["prueba"])
    with pytest.raises(UserError, match=r"it has a test file; leave data\.split\.test out"):
        source_records(tmp_path, {"train": 0.8, "val": 0.1, "test": 0.1}, 0)


def source_config(tmp_path: Path, base_dir: Path, source: str, split: str = ", split: {train: 0.8, val: 0.2}") -> str:
    return (f"name: tiny\nmodel: {{type: llama, init_from: {base_dir}, max_seq_len: 48}}\n"
            f"data: {{source: {source}{split}, loss_on: completion}}\n"
            "optimizer: {lr_max: 0.01}\n"
            "training: {batch_size: 2, total_steps: 2, val_every: 2, log_every: 1}\n"
            f"output: {{models_dir: {tmp_path}/models}}\n" + LORA)


def test_a_lora_run_trains_from_a_folder_with_only_a_train_file(tmp_path, base):  # noqa: F811
    data = tmp_path / "my-data"
    data.mkdir()
    (data / "train.jsonl").write_text(chat_lines(CHATS * 2), "utf-8")
    with pytest.raises(ConfigError) as info:  # the files are read when the data is checked, not at load
        from minitrain.training.text_run import check_text_data, complete_config

        check_text_data(complete_config(load_config(_write(tmp_path, source_config(tmp_path, base, data, "")))))
    assert [p.path for p in info.value.problems] == [("data", "source")]
    assert "give data.split" in info.value.problems[0].message
    results = train(tmp_path, source_config(tmp_path, base, data), "run")
    assert results["status"] == "completed" and results["steps"] == 2
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert json.dumps(manifest).count(str(data / "train.jsonl")) >= 1


def test_an_hf_dataset_source_trains(tmp_path, base, hub):  # noqa: F811
    hub.add_dataset("alice/chats", {"data/train.jsonl": chat_lines(CHATS * 2).encode(),
                                    "data/validation.jsonl": chat_lines(CHATS[:2]).encode()})
    results = train(tmp_path, source_config(tmp_path, base, "hf://datasets/alice/chats", ""), "run")
    assert results["status"] == "completed" and results["val_loss"] > 0


def test_stratify_is_refused_for_text_records(tmp_path, base):  # noqa: F811
    text = source_config(tmp_path, base, tmp_path, ", split: {train: 0.8, val: 0.2, stratify: label}")
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, text))
    assert [p.path for p in info.value.problems] == [("data", "split", "stratify")]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text, "utf-8")
    return path
