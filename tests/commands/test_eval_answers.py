"""`minitrain eval --answers`: greedy answers run until EOS or --max-new-tokens (by default the longest expected
answer's tokens + eval.ANSWER_MARGIN), and the first answers are printed beside the expected ones. The tiny lab-08
base scores the answers; a scripted `generate` writes known answers (a random model writes none right)."""

from __future__ import annotations

import json

import pytest

from minitrain.cli import main
from minitrain.commands import eval as eval_command
from minitrain.course import chat_fixtures
from minitrain.hub import text_models

# Answers longer than the 8 new tokens eval once allowed; what the scripted model writes after each question.
LONG = ["treinta y siete mil cuatrocientos doce", "novecientos noventa y nueve", "ciento veintitrés mil uno"]
WRITES = [LONG[0], LONG[1] + " y más", "  " + LONG[2] + "\n"]  # right, runs on (wrong), right once stripped


@pytest.fixture
def scripted(tmp_path, monkeypatch):
    """(the data file, the tokenizer, the prompts' new-token budgets seen): the tiny base on three held-out
    questions whose answers are LONG, its `generate` writing WRITES cut at max_new_tokens, as a model stops."""
    base = chat_fixtures.write_tiny_base(tmp_path / "tiny")
    loaded = text_models.load_text_model(str(base))
    tokenizer, budgets = loaded.tokenizer, []
    records = [dict(r.data, messages=[*r.data["messages"][:-1], {"role": "assistant", "content": answer}])
               for r, answer in zip(chat_fixtures.held_out()[:3], LONG, strict=True)]
    script = {tuple(tokenizer.encode(tokenizer.apply_chat_template(r["messages"][:-1], add_generation_prompt=True))):
              text for r, text in zip(records, WRITES, strict=True)}

    def generate(prompts, max_new_tokens, **_):
        budgets.append(max_new_tokens)
        return [tokenizer.encode(script[tuple(p)])[:max_new_tokens] for p in prompts]

    monkeypatch.setattr(loaded.model, "generate", generate)
    monkeypatch.setattr(text_models, "load_text_model", lambda *_: loaded)
    data = tmp_path / "long.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return data, tokenizer, budgets


def test_answers_longer_than_8_tokens_match_and_are_shown(scripted, capsys):
    data, tokenizer, budgets = scripted
    longest = max(len(tokenizer.encode(answer)) for answer in LONG)
    assert longest > 8  # each would have been cut before its end
    assert main(["eval", "tiny", "--data", str(data), "--answers"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert budgets == [longest + eval_command.ANSWER_MARGIN]
    assert "exact match 66.7% (2 of 3, greedy, up to" in out[0]
    assert out[1:] == [f"  expected {LONG[0]!r}, wrote {LONG[0]!r}",
                       f"  expected {LONG[1]!r}, wrote {LONG[1] + ' y más'!r}",
                       f"  expected {LONG[2]!r}, wrote {LONG[2]!r}"]


def test_max_new_tokens_caps_the_answers_and_must_fit_the_context(scripted, capsys):
    data, _, budgets = scripted
    assert main(["eval", "tiny", "--data", str(data), "--answers", "--max-new-tokens", "3", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["exact_match"], printed["matched"], printed["max_new_tokens"], budgets) == (0.0, 0, 3, [3])
    assert main(["eval", "tiny", "--data", str(data), "--answers", "--max-new-tokens", "128"]) == 2
    assert capsys.readouterr().err.startswith("error: --max-new-tokens 128: the longest prompt has ")
    assert main(["eval", "tiny", "--data", str(data), "--max-new-tokens", "3"]) == 2
    assert "only --answers generates" in capsys.readouterr().err
