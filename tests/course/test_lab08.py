"""Lab 08's pieces and checker without the real model: the answer mask's rules on generated pieces (hypothesis),
`minitrain eval --answers` against answers.py, the tiny stand-in base, the run-folder checks on a tampered copy of
the committed short run, and the lab's quoted numbers against the committed results."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitrain.cli import main
from minitrain.course import chat_fixtures
from minitrain.course.labs import grade
from minitrain.data.answer_mask import answer_mask
from minitrain.evaluation.answers import answer_scores, exact_match
from minitrain.hub.text_models import load_text_model

pytestmark = pytest.mark.lab08
ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = ROOT / "experiments" / "22-smollm2-verbs"
EOS = 2
CHARACTERS = sum(len(r.data["messages"][-1]["content"]) + 1 for r in chat_fixtures.held_out())  # 1,299
pieces_strategy = st.lists(st.lists(st.integers(0, 5), max_size=6), max_size=7)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(pieces_strategy)
def test_completion_counts_each_answer_piece_up_to_its_last_end_token_and_nothing_else(pieces):
    mask = answer_mask(pieces, EOS, "completion")
    assert len(mask) == sum(map(len, pieces)) and not (mask and mask[0])
    at = 0
    for k, piece in enumerate(pieces):
        part = mask[at : at + len(piece)]
        if k % 2 == 0:
            assert not any(part[1 if at == 0 else 0 :])
        else:
            last = max((i for i, t in enumerate(piece) if t == EOS), default=len(piece) - 1)
            want = [True] * (last + 1) + [False] * (len(piece) - last - 1)
            assert part[1 if at == 0 else 0 :] == want[1 if at == 0 else 0 :]
        at += len(piece)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(pieces_strategy)
def test_all_counts_every_token_but_the_first(pieces):
    n = sum(map(len, pieces))
    assert answer_mask(pieces, EOS, "all") == ([False] + [True] * (n - 1) if n else [])


def test_the_tiny_base_is_a_chat_model_that_eval_answers_scores_as_answers_py_does(tmp_path, capsys):
    base = chat_fixtures.write_tiny_base(tmp_path / "tiny")
    loaded = load_text_model(str(base))
    records = list(chat_fixtures.held_out()[:12])
    text = loaded.tokenizer.apply_chat_template(records[0].data["messages"])
    assert text.startswith("<|im_start|>system\n") and text.endswith("camino<|im_end|>\n")
    data = tmp_path / "twelve.jsonl"
    data.write_text("".join(json.dumps(r.data, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    assert main(["eval", str(base), "--data", str(data), "--answers", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    scores = answer_scores(loaded.model, loaded.tokenizer, records)
    assert printed["answer_ppl"] == pytest.approx(scores["answer_ppl"], rel=1e-6)
    assert printed["answer_tokens"] == scores["answer_tokens"] == sum(len(loaded.tokenizer.encode(
        r.data["messages"][-1]["content"])) + 1 for r in records)  # each form and its <|im_end|>
    assert printed["exact_match"] == exact_match(loaded.model, loaded.tokenizer, records)["exact_match"]
    assert main(["eval", str(base), "--data", str(ROOT / "data" / "processed" / "val.jsonl"), "--answers"]) == 2
    assert "--answers scores chat records" in capsys.readouterr().err


def tampered(tmp_path: Path, change) -> Path:
    """A copy of the committed short run (manifest and scores) with scores.json edited by `change`."""
    run = tmp_path / "run"
    shutil.copytree(EXPERIMENT / "short", run)
    scores = json.loads((run / "scores.json").read_text(encoding="utf-8"))
    change(scores)
    (run / "scores.json").write_text(json.dumps(scores), encoding="utf-8")
    return run


def run_items(run: Path) -> dict[str, str]:
    _, outcomes = grade("08", run_dir=run, limits=None, only=lambda name: name.startswith("run folder"))
    return {o.name.split(":")[1].split(",")[0].strip(): o.reason for o in outcomes if not o.passed}


@pytest.mark.parametrize(("change", "item", "words"), [
    (lambda s: s.update(held_out_records=8), "scores.json scored the base and the run on the same 144 held-out "
     "questions", "scored 8 held-out questions"),
    (lambda s: s["after"].update(answer_ppl=s["after"]["answer_ppl"] * 2), "scores.json scored the base and the run "
     "on the same 144 held-out questions", "is not exp(answer_loss"),
    (lambda s: s["after"].update(answer_ppl=12.0, answer_loss=math.log(12.0), answer_loss_per_char=math.log(12.0) * s[
        "after"]["answer_tokens"] / CHARACTERS), "the adapters taught the held-out verbs", "expected under 10"),
    (lambda s: s["after"].pop("exact_match"), "the short run trained LoRA adapters on the answers only",
     "lacks ['exact_match']"),
])
def test_the_run_folder_checks_catch_a_tampered_scores_file(tmp_path, change, item, words):
    failed = run_items(tampered(tmp_path, change))
    assert item in failed and words in failed[item], failed


def test_the_committed_short_run_passes_and_its_numbers_are_the_labs():
    assert run_items(EXPERIMENT / "short") == {}
    short = json.loads((EXPERIMENT / "short" / "scores.json").read_text(encoding="utf-8"))
    ablation = json.loads((EXPERIMENT / "short-all-tokens" / "scores.json").read_text(encoding="utf-8"))
    full = json.loads((EXPERIMENT / "results.json").read_text(encoding="utf-8"))
    assert short["training"]["steps"] == ablation["training"]["steps"] == 40 and full["training"]["steps"] == 150
    assert ablation["training"]["set"] == ["data.loss_on=all"] and short["before"] == ablation["before"]
    # answers.py scores the base as experiment 22's scoring.py did (the last digit is float32 rounding)
    assert short["before"]["answer_ppl"] == pytest.approx(full["before"]["answer_ppl"], rel=1e-6)
    for page in ("lab/08-capstone-real-model.md", "lab/08-capstone-real-model.es.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        for scores in (short, ablation, full):
            for key in ("answer_ppl", "answer_ppl_per_char"):
                quoted = f"{scores['after'][key]:.3f}"
                if page.endswith(".es.md"):  # Spanish prose writes the decimal comma
                    quoted = quoted.replace(".", ",")
                assert re.search(rf"(?<![\d.,]){re.escape(quoted)}(?![\d])", text), f"{page} does not quote {quoted}"
