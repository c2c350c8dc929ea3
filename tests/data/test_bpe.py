"""The byte-level BPE tokenizer (minitrain/data/bpe.py, lab 06): the same merges and ids as the `tokenizers`
library, round trips of any text, tokenizer.json both ways, and `data.tokenizer: bpe` in a run."""

from __future__ import annotations

import json
import math
import sys
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from minitrain.cli import main
from minitrain.common.errors import UserError
from minitrain.config import config_from_dict
from minitrain.course.lab06 import ADVERSARIAL, SPECIALS, reference_tokenizer
from minitrain.data.bpe import BPETokenizer, pretokenize
from minitrain.data.bpe_json import load_bpe, save_bpe, token_names

pytestmark = pytest.mark.lab06
REPO = Path(__file__).resolve().parents[2]
TIED = [*ADVERSARIAL, "hablar|P1|hablo", "comer|I3|comía", "ñ ñ ñ ññ"]


@cache
def _trained() -> BPETokenizer:
    return BPETokenizer.train(TIED, 259 + 30, SPECIALS)


@pytest.fixture
def trained() -> BPETokenizer:
    return _trained()


def test_the_merges_and_vocabulary_are_tokenizers_own(trained):
    theirs = json.loads(reference_tokenizer(TIED, 259 + 30).to_str())["model"]
    names = token_names(trained)
    assert {name: i for i, name in enumerate(names)} == theirs["vocab"]
    assert [[names[a], names[b]] for a, b in trained.merges] == [m.split(" ") if isinstance(m, str) else m
                                                                 for m in theirs["merges"]]


def test_tokenizers_reads_our_file_and_we_read_theirs(trained, tmp_path):
    save_bpe(trained, tmp_path / "ours.json")
    theirs = Tokenizer.from_file(str(tmp_path / "ours.json"))
    for text in [*TIED, "<bos>vivir|P2|vives<eos>", "x<eos", "日本🙂 \t\n"]:
        assert theirs.encode(text).ids == trained.encode(text)
    reference_tokenizer(TIED, 259 + 30).save(str(tmp_path / "theirs.json"))
    assert load_bpe(tmp_path / "theirs.json").merges == trained.merges


def test_a_damaged_tokenizer_json_is_one_error_naming_the_file(trained, tmp_path):
    save_bpe(trained, tmp_path / "t.json")
    obj = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    obj["model"]["vocab"]["zz"] = 9999
    (tmp_path / "t.json").write_text(json.dumps(obj), encoding="utf-8")
    with pytest.raises(UserError, match=r"t\.json: its ids are not"):
        load_bpe(tmp_path / "t.json")
    obj["pre_tokenizer"] = None
    (tmp_path / "t.json").write_text(json.dumps(obj), encoding="utf-8")
    with pytest.raises(UserError, match="not a byte-level BPE"):
        load_bpe(tmp_path / "t.json")


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_decode_inverts_encode_for_any_text(text):
    tokenizer = _trained()
    assert tokenizer.decode(tokenizer.encode(text)) == text
    assert "".join(pretokenize(text)) == text


def test_special_tokens_are_never_split_and_vocab_size_must_hold_the_bytes():
    tokenizer = BPETokenizer.train(["<eos><eos> ab ab"], 259 + 5, SPECIALS)
    assert tokenizer.encode("ab<eos>ab") == [*tokenizer.encode("ab"), 2, *tokenizer.encode("ab")]
    with pytest.raises(UserError, match="vocab_size 100 is below"):
        BPETokenizer.train(["ab"], 100, SPECIALS)


@pytest.mark.parametrize(("tokenizer", "words"), [({"type": "bpe"}, "needs vocab_size >= 259"),
                                                  ({"type": "bpe", "vocab_size": 258}, "got 258"),
                                                  ({"type": "char", "vocab_size": 300}, "leave vocab_size out"),
                                                  ({"type": "wordpiece"}, "data.tokenizer.type")])
def test_bad_tokenizer_settings_are_refused(tokenizer, words):
    with pytest.raises(Exception, match=words.replace(".", r"\.")):
        config_from_dict({"data": {"tokenizer": tokenizer}})


def _tiny_corpus(folder: Path) -> None:
    def lines(verbs):
        return "".join(json.dumps({"verb": v, "tense": "P", "person": p, "form": v[:-2] + e,
                                   "text": f"{v}|P{p}|{v[:-2] + e}"}) + "\n"
                       for v in verbs for p, e in ((1, "o"), (2, "as"), (3, "a")))
    folder.mkdir()
    (folder / "train.jsonl").write_text(lines(["hablar", "cantar", "bailar", "nadar"]), encoding="utf-8")
    (folder / "val.jsonl").write_text(lines(["saltar"]), encoding="utf-8")


def test_a_run_with_a_bpe_tokenizer_trains_and_keeps_its_tokenizer(tmp_path, capsys):
    _tiny_corpus(tmp_path / "data")
    base = ["--set", f"data.train_path={tmp_path / 'data/train.jsonl'}", "--set",
            f"data.val_path={tmp_path / 'data/val.jsonl'}", "--set", "scheduler.total_steps=3", "--set",
            "scheduler.warmup_steps=1", "--set", "training.batch_size=2", "--set", "training.val_every=3",
            "--set", "model.vocab_size=280", "--quiet"]
    run = tmp_path / "run"
    small = ["--set", "data.tokenizer={type: bpe, vocab_size: 300}"]
    assert main(["train", str(REPO / "experiments/26-bpe-verbs/bpe.yaml"), "--out-dir", str(run), *base,
                 *small]) == 2
    # 12 lines hold too few pairs for 300 ids: training stops when no pair is left, at 292
    assert "vocab_size 280 is smaller than the tokenizer's 292 ids (the BPE trained on" in capsys.readouterr().err
    assert main(["train", str(REPO / "experiments/26-bpe-verbs/bpe.yaml"), "--out-dir", str(run), "--models-dir",
                 str(tmp_path / "models"), *base, "--set", "data.tokenizer.vocab_size=270"]) == 0
    tokenizer = load_bpe(run / "tokenizer.json")
    assert tokenizer.vocab_size == 270
    assert Tokenizer.from_file(str(run / "tokenizer.json")).encode("hablar|P1|hablo").ids == tokenizer.encode(
        "hablar|P1|hablo")
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert results["ngram_baseline_val_ppl"] is None  # a per-character baseline says nothing of token PPL
    assert results["status"] == "completed" and math.isfinite(results["val_ppl"])


def test_bits_per_character_of_a_char_model_is_its_val_loss_in_bits(tmp_path):
    """On characters, every answer token is one character (and EOS the +1): bits/char = val_loss / ln 2."""
    sys.path.insert(0, str(REPO / "experiments" / "26-bpe-verbs"))
    from run import bits_per_character

    from minitrain.data.batcher import EvalBatcher, encode_split
    from minitrain.data.corpus import load_records
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.loop import evaluate
    from minitrain.models.registry import build_model

    records = load_records(REPO / "data/processed/val.jsonl")[:20]
    tokenizer = CharTokenizer.load(REPO / "data/processed/vocab.json")
    model = build_model({"type": "minigpt", "n_layer": 1, "n_head": 2, "d_model": 16, "d_ff": 32, "vocab_size": 64,
                         "max_seq_len": 32})
    bpc, tokens, characters = bits_per_character(model, tokenizer, records)
    val_loss, _ = evaluate(model, EvalBatcher(encode_split(records, tokenizer, 32), 8))
    assert tokens == characters == sum(len(r["form"]) + 1 for r in records)
    assert bpc == pytest.approx(val_loss / math.log(2), rel=1e-6)
