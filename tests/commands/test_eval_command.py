"""`minitrain eval`: the loss a pretrained base or a run scores on text, chat and verb records, checked against
the model run on each record alone (no batching, no windows), and its refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_hub_pretrained import hf_folder

from minitrain.autograd import functional as F
from minitrain.cli import main
from minitrain.data.text_examples import encode_records
from minitrain.data.text_records import read_file
from minitrain.evaluation import text_loss
from minitrain.hub.text_models import load_text_model
from minitrain.nn import inference

ROOT = Path(__file__).resolve().parents[2]
CHAT = [{"messages": [{"role": "user", "content": "hola"}, {"role": "assistant", "content": "hola como"}]},
        {"messages": [{"role": "user", "content": "como"}, {"role": "assistant", "content": "hola"}]}]


def one_by_one(model, examples, loss_on_all: bool) -> tuple[float, int]:
    """Σ −log p and the count, each example run alone at its full length."""
    total, count = 0.0, 0
    with inference(model):
        for ids, mask, _ in examples:
            logits, _ = model(np.array([ids[:-1]]))
            log_p = F.log_softmax(logits).data[0]
            for t, target in enumerate(ids[1:]):
                if loss_on_all or mask[t + 1]:
                    total -= float(log_p[t, target])
                    count += 1
    return total, count


def run_eval(capsys, *args: str) -> dict:
    assert main(["eval", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("loss_on", ["all", "completion"])
def test_a_base_scores_chat_records_as_each_record_run_alone(tmp_path, capsys, monkeypatch, loss_on):
    monkeypatch.setattr(text_loss, "MAX_LOGITS", 3 * 8 * 266)  # several batches of a few rows
    hf_folder(tmp_path / "base")
    data = tmp_path / "chat.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in CHAT * 3))
    result = run_eval(capsys, str(tmp_path / "base"), "--data", str(data), "--loss-on", loss_on)
    loaded = load_text_model(str(tmp_path / "base"))
    examples = encode_records(read_file(data), loaded.tokenizer, loss_on)
    total, count = one_by_one(loaded.model, examples, loss_on == "all")
    assert result["tokens"] == count > 0
    assert result["loss"] == pytest.approx(total / count, rel=1e-5)
    assert result["ppl"] == pytest.approx(math.exp(total / count), rel=1e-5)
    assert result["loss_on"] == loss_on and result["max_seq_len"] == 64


def test_a_long_document_is_scored_in_windows_every_token_once(tmp_path, capsys):
    hf_folder(tmp_path / "base")
    text = tmp_path / "doc.txt"
    text.write_text(" ".join(["hola como"] * 40))
    loaded = load_text_model(str(tmp_path / "base"))
    ids = encode_records(read_file(text), loaded.tokenizer)[0].ids
    result = run_eval(capsys, str(tmp_path / "base"), "--data", str(text), "--max-seq-len", "16")
    assert len(ids) > 16 and result["tokens"] == len(ids) - 1 and result["max_seq_len"] == 16


def test_a_character_model_scores_the_verb_corpus_as_training_does(capsys):
    from minitrain.data.corpus import load_records
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.training.scoring import score_records

    model_file = next((ROOT / "models").glob("minigpt-phase18-*.safetensors"))
    val, vocab = ROOT / "data/processed/val.jsonl", ROOT / "data/processed/vocab.json"
    result = run_eval(capsys, str(model_file), "--data", str(val), "--vocab", str(vocab), "--loss-on", "completion")
    loaded = load_text_model(str(model_file), str(vocab))
    expected = score_records(loaded.model, CharTokenizer.load(vocab), load_records(val), "answer")
    assert result["loss"] == pytest.approx(expected["loss"], rel=1e-9)
    assert result["ppl"] == pytest.approx(1.3726, abs=1e-4)  # lab 01's val PPL
    assert result["tokens"] == 1299


@pytest.mark.parametrize(("args", "message"), [
    (["nowhere/at-all.gguf", "--data", "x.jsonl"], "error: "),
    (["{base}", "--data", "{tmp}/missing.jsonl"], "missing.jsonl"),
    (["{base}", "--data", "{tmp}/bad.jsonl"], "bad.jsonl:2"),
])
def test_bad_sources_and_data_are_one_error_line(tmp_path, capsys, args, message):
    hf_folder(tmp_path / "base")
    (tmp_path / "bad.jsonl").write_text(json.dumps(CHAT[0]) + "\n{not json\n")
    args = [a.format(base=tmp_path / "base", tmp=tmp_path) for a in args]
    code = main(["eval", *args])
    err = capsys.readouterr().err
    assert code != 0 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
