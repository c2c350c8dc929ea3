"""Data checks (rules that read the data files) and lock files."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from minitrain.commands.lock_file import check_strict, lock_differences, lock_path_for, read_lock, write_lock
from minitrain.common.errors import UserError
from minitrain.config import ConfigError, load_config
from minitrain.config.datacheck import check_data, load_split
from minitrain.data.corpus import make_record, records_to_jsonl
from minitrain.data.tokenizer import CharTokenizer

VERBS = [("hablar", "hablo"), ("comer", "como"), ("vivir", "vivo"), ("cantar", "canto")]


def make_corpus(folder: Path, extra_val: str = "") -> Path:
    """A tiny JSONL corpus: 4 train records, 2 val (+ one line of `extra_val`), a vocab of their characters."""
    folder.mkdir(parents=True, exist_ok=True)
    train = [make_record(v, "P", 1, f) for v, f in VERBS]
    val = [make_record("bailar", "P", 1, "bailo"), make_record("bailar", "P", 2, "bailas")]
    (folder / "train.jsonl").write_text(records_to_jsonl(train), encoding="utf-8")
    (folder / "val.jsonl").write_text(records_to_jsonl(val) + extra_val, encoding="utf-8")
    CharTokenizer.from_texts(r["text"] for r in train + val).save(folder / "vocab.json")
    return folder


def config_for(folder: Path, body: str = "", name: str = "c.yaml") -> Path:
    text = textwrap.dedent(f"""\
        model:
          vocab_size: 64
          max_seq_len: 32
        training:
          total_steps: 10
          batch_size: 2
        data:
          train_path: {folder}/train.jsonl
          val_path: {folder}/val.jsonl
          vocab_path: {folder}/vocab.json
        """) + textwrap.dedent(body)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def data_problems(path: Path, overrides=()) -> str:
    cfg = load_config(path, overrides)
    with pytest.raises(ConfigError) as info:
        check_data(cfg)
    assert info.value.exit_code == 2
    return str(info.value)


def test_valid_data_passes_and_is_measured(tmp_path):
    folder = make_corpus(tmp_path / "d")
    summary = check_data(load_config(config_for(folder)))
    assert summary.records == {"train": 4, "val": 2}  # no dev file: the dev split is optional
    assert summary.longest_input == len("bailar|P2|bailas") + 1
    assert summary.longest_where == f"{folder}/val.jsonl:2"
    assert summary.steps_per_epoch == 2
    tokens = CharTokenizer.load(folder / "vocab.json")
    assert summary.tokenizer_size == tokens.vocab_size


def test_missing_files_are_all_reported_with_their_keys(tmp_path):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder)
    (folder / "train.jsonl").unlink()
    (folder / "vocab.json").unlink()
    message = data_problems(path, ["data.val_path=nowhere/val.jsonl"])
    assert f"c.yaml:8: data.train_path: file not found: {folder}/train.jsonl" in message
    assert f"c.yaml:10: data.vocab_path: file not found: {folder}/vocab.json" in message
    assert "--set data.val_path=nowhere/val.jsonl: data.val_path: file not found" in message


@pytest.mark.parametrize(("make", "what"), [
    (lambda p: p.mkdir(), "is a folder, not a regular file"),
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe), not a regular file"),
    (lambda p: (p.symlink_to(p.with_name("x")), p.with_name("x").symlink_to(p)),
     "cannot be read (a symbolic link loop)"),
])
def test_a_data_path_that_is_not_a_file_is_named_as_what_it_is(tmp_path, make, what):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder)
    (folder / "train.jsonl").unlink()
    make(folder / "train.jsonl")
    message = data_problems(path)  # a FIFO must not block it
    assert f"c.yaml:8: data.train_path: {folder}/train.jsonl {what}" in message


def test_a_val_split_that_shares_verbs_with_train_breaks_the_heldout_promise(tmp_path):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder)
    (folder / "val.jsonl").write_bytes((folder / "train.jsonl").read_bytes())  # val identical to train
    message = data_problems(path)
    assert (f"c.yaml:9: data.val_path: heldout_policy verbs_4: 4 verb(s) of {folder}/val.jsonl also occur in "
            f"{folder}/train.jsonl (cantar, comer, hablar, vivir); held-out verbs must never be trained on") in message
    check_data(load_config(path, ["data.heldout_policy=none"]))  # no promise made: accepted


def test_vocab_size_below_the_tokenizer(tmp_path):
    folder = make_corpus(tmp_path / "d")
    message = data_problems(config_for(folder), ["model.vocab_size=10"])
    assert "--set model.vocab_size=10: model.vocab_size: vocab_size 10 is smaller than the tokenizer's" in message


def test_max_seq_len_below_the_longest_record(tmp_path):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder)
    path.write_text(path.read_text().replace("max_seq_len: 32", "max_seq_len: 16"), encoding="utf-8")
    message = data_problems(path)
    assert "c.yaml:3: model.max_seq_len: max_seq_len 16 is shorter than the longest record: " in message
    assert f"{folder}/val.jsonl:2 needs 17 positions (BOS + text)" in message
    check_data(load_config(path, ["model.max_seq_len=17"]))  # exactly enough


def test_unknown_character_names_file_and_line(tmp_path):
    folder = make_corpus(tmp_path / "d", extra_val=records_to_jsonl([make_record("ñoñar", "P", 1, "ñoño")]))
    message = data_problems(config_for(folder))
    assert f"c.yaml:9: data.val_path: {folder}/val.jsonl:3: unknown character 'ñ'" in message


def test_dev_split_is_checked_when_present_and_paths_default_beside_train(tmp_path):
    folder = make_corpus(tmp_path / "d")
    path = folder / "c.yaml"
    path.write_text(f"training: {{total_steps: 5, batch_size: 2}}\ndata: {{train_path: {folder}/train.jsonl, "
                    f"val_path: {folder}/val.jsonl}}\n", encoding="utf-8")
    cfg = load_config(path)
    assert (cfg.data.dev_path, cfg.data.vocab_path) == (f"{folder}/dev.jsonl", f"{folder}/vocab.json")
    (folder / "dev.jsonl").write_text(records_to_jsonl([make_record("ñoñar", "P", 1, "ñoño")]), encoding="utf-8")
    assert f"data.dev_path: {folder}/dev.jsonl:1: unknown character 'ñ'" in data_problems(path)


def test_bad_record_and_bad_vocab(tmp_path):
    folder = make_corpus(tmp_path / "d", extra_val="{not json\n")
    (folder / "vocab.json").write_text("[]", encoding="utf-8")
    message = data_problems(config_for(folder))
    assert "data.vocab_path: " in message and "not a vocabulary file" in message
    (folder / "vocab.json").unlink()
    make_corpus(folder, extra_val="{not json\n")
    assert f"data.val_path: {folder}/val.jsonl:3: invalid JSON" in data_problems(config_for(folder))


def test_batch_larger_than_the_training_split(tmp_path):
    folder = make_corpus(tmp_path / "d")
    message = data_problems(config_for(folder), ["training.batch_size=3", "training.grad_accumulation=2"])
    assert "training.batch_size: batch_size 3 · grad_accumulation 2 is more than the 4 training records" in message


def test_warmup_longer_than_an_epoch_run(tmp_path):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder).with_name("e.yaml")
    path.write_text(config_for(folder).read_text().replace("total_steps: 10", "epochs: 3") +
                    "scheduler:\n  warmup_steps: 6\n", encoding="utf-8")
    message = data_problems(path)
    assert "scheduler.warmup_steps: warmup_steps 6 must be below the 6 steps of 3 epoch(s) × 2" in message
    assert load_config(path, ["scheduler.warmup_steps=5"]).resolve_steps(2) == 6


def test_plain_text_splits(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "train.txt").write_text("hola mundo\n\nadiós\n", encoding="utf-8")
    (folder / "val.txt").write_text("hola\n", encoding="utf-8")
    CharTokenizer.from_texts(["hola mundo", "adiós"]).save(folder / "vocab.json")
    path = folder / "c.yaml"
    path.write_text(textwrap.dedent(f"""\
        training: {{total_steps: 5, batch_size: 2}}
        data:
          format: text
          loss_on: all
          heldout_policy: none
          train_path: {folder}/train.txt
          val_path: {folder}/val.txt
          vocab_path: {folder}/vocab.json
        """), encoding="utf-8")
    cfg = load_config(path)
    assert [r["text"] for r in load_split(cfg.data, "train")] == ["hola mundo", "adiós"]
    assert [r["line"] for r in load_split(cfg.data, "train")] == [1, 3]
    assert check_data(cfg).longest_input == len("hola mundo") + 1


def test_the_committed_corpus_passes_with_lab01(tmp_path, monkeypatch):
    from test_config import LAB01

    (tmp_path / "lab01.yaml").write_text(LAB01, encoding="utf-8")
    monkeypatch.chdir(Path(__file__).parents[2])  # lab 01's paths are relative to the repository root
    summary = check_data(load_config(tmp_path / "lab01.yaml"))
    assert summary.records["train"] > 1000 and summary.longest_input <= 32 and summary.tokenizer_size <= 64


# --- lock files ---------------------------------------------------------------------------------------------------


def test_lock_pins_config_data_and_versions(tmp_path):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder)
    cfg = load_config(path)
    lock_file = lock_path_for(path)
    assert lock_file.name == "c.lock.yaml"
    contents = write_lock(cfg, lock_file)
    lock = read_lock(lock_file)
    assert lock == contents
    assert set(lock["data"]) == {f"{folder}/train.jsonl", f"{folder}/val.jsonl", f"{folder}/vocab.json"}
    assert {"python", "minitrain", "numpy", "pydantic", "pyyaml"} <= set(lock["versions"])
    check_strict(cfg, lock_file)  # nothing changed
    check_strict(load_config(lock_file), lock_file)  # a lock file is a config too


def test_strict_detects_a_changed_data_file_a_changed_key_and_a_version(tmp_path):
    folder = make_corpus(tmp_path / "d")
    path = config_for(folder)
    lock_file = tmp_path / "pinned.yaml"
    write_lock(load_config(path), lock_file)
    with (folder / "train.jsonl").open("a", encoding="utf-8") as f:
        f.write(records_to_jsonl([make_record("cantar", "P", 2, "cantas")]))
    lock = read_lock(lock_file)
    lock["versions"]["numpy"] = "0.0.1"
    found = lock_differences(load_config(path, ["training.batch_size=1"]), lock)
    assert found[0] == "config training.batch_size: locked 2, now 1"
    assert f"data {folder}/train.jsonl: content changed" in found[1]
    assert found[2].startswith("version of numpy: locked 0.0.1, now ")
    with pytest.raises(UserError, match="--strict: this run differs from") as info:
        check_strict(load_config(path), lock_file)
    assert info.value.exit_code == 2


def test_strict_without_a_lock_file(tmp_path):
    with pytest.raises(UserError, match="run `minitrain lock CONFIG` first"):
        read_lock(tmp_path / "none.lock.yaml")
    (tmp_path / "x.yaml").write_text("a: 1\n", encoding="utf-8")
    with pytest.raises(UserError, match="not a minitrain lock file"):
        read_lock(tmp_path / "x.yaml")
