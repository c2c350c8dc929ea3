"""The hint under the FIRST ✗ item names the bug that caused it (issue 28, item 4): each typical bug of
test_course_labs.BUGS, plus a forgotten loss.backward(), is injected into the library's own files and the
checklist is run until its first failure."""

from __future__ import annotations

import pytest
from test_course_i18n import english_left
from test_course_labs import BUGS, LOOP, workspace_with_reference

from minitrain.course.labs import grade

FORGOTTEN_BACKWARD = ("01", (LOOP, ("            loss.backward()\n", ""),
                             ("            loss.backward(np.asarray(weight, dtype=loss.dtype))\n", "")),
                      "train_step fills the gradient: backward() on the loss", "loss.backward() was never called")

# the bug's reason words (BUGS' last field) -> words the first ✗ item's hint must hold: the cause, by name
HINT_NAMES = {
    "marks where the INPUT holds the form (positions 12–17)": "TARGET positions",
    "counts padding positions after EOS": "Everything after the",
    "Saving the RNG state after the permutation makes a resume draw the NEXT epoch's order": "BEFORE the current",
    "(the last, partial batch was dropped)": "the last batch keeps what is left",
    "returned the norm AFTER clipping": "returns the norm BEFORE it clips",
    "summed the micro-batch losses": "weight n_i / N",
    "the gradient left from before the step was still in .grad": "optimizer.zero_grad()",
    "your evaluate() counted padding positions: expected the mean over 1,299 counted tokens, got the mean over "
    "all 4,608 positions": "where loss_mask is True",
    "counted the prompt too": "where loss_mask is True",
    "operations on the tape": "minitrain.nn.inference",
    "dropout was on": "model.eval()",
    "after loading, the next batch differs": "batcher.load_state_dict",
    "AdamW's bias correction restarts": "step",
    "is no longer a view of the model's flat buffer": "rebinding `p.data = ...`",
    "left a changed file behind": "io.atomic_write_bytes",
    "must be refused": "config_hash",
    "is centred": "only values up to i",
    "the mean of the two rows' perplexities": "never the mean of exp(loss)",
    "it used the row of step 30, after the validation": "rows after s are the future",
    "(the last step)": "lowest val_ppl",
    "ties are not improvements": "a tie is not better",
    "each improvement (2.0, 1.5) starts": "the count of bad evaluations back to 0",
    "neither drop beats 2.0 by more than 0.1": "min_delta is subtracted in 'min'",
    "did not stop at the third evaluation without improvement": "the count",
    "lora_B is not all zeros": "lora_B (rank, out) all zeros",
    "your update was scaled by alpha (6), not alpha/rank (3)": "alpha / rank",
    "the scale alpha/rank is missing": "forgetting the scale",
    "by up to nan": "ΔW = (alpha / rank) · A @ B",
    "the update was computed off the tape": "never on their .data",
    "divided by 2^(bits−1) = 8": "qmax = 2^(bits−1) − 1",
    "you truncated w / s": "np.round, not int()",
    "the scale of column c was applied to row c": "scale[:, None, :]",
    "you left out the zero point": "zero point",
    "loss.backward() was never called": "call loss.backward()",
    "it joins `x` and `|`, two words": "never over a whole line",
    "your counts took each distinct word once": "counting each distinct word once",
    "'b' + 'a' was seen first": "not the pair seen first",
    "as bytes C3 A0 < C3 A9": "ids, not byte values",
    "counted once per word they tie": "`aaa` adds 2 to (a, a)",
    "your train made no merge 3 (new id 262); expected 'abcd' + 'e' (ids 261, 71): 'abcd' + 'e' is the last pair":
        "its LAST one too",
    "your merge 3 (new id 262) is 'abcd' + 'e' (ids 261, 71): one merge too many": "`<` and not `<=`",
    "your merge 2 (new id 261) is 'ab' + 'd' (ids 259, 70); expected 'abc' + 'd' (ids 260, 70): id 259 is merge 0's":
        "next_id += 1",
    "; tokenizers gives": "LEARNED EARLIEST",
    "encode('<bos>hablo<eos>')": "find the special tokens first",
    "decode(encode(": "decoding each token on its own",
    "your rows are centred first": "subtracts no mean",
    "eps is missing": "eps goes inside the root",
    "calls functional.rms_norm": "from Tensor ops",
    "every pair turned the other way": "the minus on the SECOND half",
    "v was rotated too": "rotate q and k only, never v",
    "gate and up are swapped": "silu goes on gate_proj's output, not up_proj's",
    "(tiled)": "h // (H/H_kv)",
    "new token 1 (5 cached) raised": "attend over what it returns, every position so far",
    "each rotated at its own position": "the cache stores ROTATED keys",
    "a softmax over a row of −inf is 0/0": "not −inf",
    "it counted the question (the system and user turns) too": "every context piece",
    "it missed the first token of each answer": "from its FIRST token",
    "it missed the end token <|im_end|>": "the model must learn to stop",
    "it counted the newline after <|im_end|>": "not the template's newline",
    "it skipped answer 2": "three turns has three answers",
    "you averaged the records' losses": "never the mean of per-record losses",
    "without the +1 for each end": "the +1 is the end",
    "you compared without stripping": ".strip()",
    "are not the chat template's generation prompt": "add_generation_prompt=True",
    "passed a threshold": "never a threshold",
    "the contract keeps the earlier ones": "a stable sort of −|τ|",
    "of |τ| = 0.3 you kept positions [2, 4, 5, 7, 9, 10, 13, 14]": "np.argsort's default sort is not stable",
    "int() truncates": "k = round(density · τ.size)",
    "elected by count": "counting signs",
    "the mean over all 3 models": "the models of the other sign",
    "the models that left it at 0 counted": "those that left the entry at 0",
    "sum to exactly 0: no sign is elected": "np.sign gives 0 for a sum of 0",
    "(0/0": "never 0/0",
    "7/3": "the vote is sgn(Σ w_i τ_i)",
    "λ was not applied": "base + lam · elect_and_mean",
    "cast the merge back": "cast back to base.dtype",
    "seeded by the seed alone": "zlib.crc32(name.encode('utf-8'))",
    "were not divided by density": "divide the kept by density",
    "those are the dropped ones": "keep where u < density",
    "; expected [0,": "draw u = rng.random(delta.shape) once",
    "one generator for all the models": "never one shared",
    "trimmed as well": "no trim after it",
    "the task vectors have the wrong sign": "θ_i − θ_base",
    "τ was taken in float32, where 0.5 + 2⁻²⁵ rounds to 0.5": "in float64 (linear.task_vectors)",
    "equal to float32's precision only": "in float64 (linear.task_vectors)",
}
MASK, ANSWERS = "minitrain/data/answer_mask.py", "minitrain/evaluation/answers.py"
# More of lab 08's typical bugs, checked here only (in this process: each costs a fraction of a second), by their
# first ✗ item's reason as well as its hint (test_course_labs.BUGS has the others).
LAB08_MORE = [
    ("08", (MASK, ("counted = len(piece) - list(piece)[::-1].index(eos_id)",
                   "counted = len(piece) - list(piece)[::-1].index(eos_id) - 1")),
     "answer_mask counts the answer and its end token, nothing of the question (a SmolLM2 conversation)",
     "it missed the end token <|im_end|>"),
    ("08", (ANSWERS, ('characters = sum(len(r.data["messages"][-1]["content"]) + 1 for r in records)',
                      'characters = sum(len(r.data["messages"][-1]["content"]) for r in records)')),
     "answer_scores per character: the same total −log p over the answers' characters + 1 each",
     "without the +1 for each end"),
    ("08", (ANSWERS, ('r.data["messages"][:-1], add_generation_prompt=True',
                      'r.data["messages"], add_generation_prompt=True')),
     "exact_match: the greedy answer to the generation prompt, stripped, equals the answer",
     "are not the chat template's generation prompt"),
]
CASES = [*BUGS, *LAB08_MORE, FORGOTTEN_BACKWARD]


class _First(Exception):
    """Stops the checklist at its first ✗ (the items after it cost time and say nothing here)."""


def first_failure(lab: str, workspace):
    def stop(outcome):
        if not outcome.passed:
            raise _First(outcome)

    try:
        grade(lab, workspace, limits=None, report=stop, only=lambda name: not name.startswith("run folder"))
    except _First as first:
        return first.args[0]
    return None


def test_every_bug_has_the_words_its_hint_must_hold():
    assert sorted(HINT_NAMES) == sorted({words for *_, words in CASES})  # two bugs may share their words


@pytest.mark.parametrize(("lab", "bug", "check", "words"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_the_first_failed_items_hint_names_the_bug(lab, bug, check, words, tmp_path):
    outcome = first_failure(lab, workspace_with_reference(lab, tmp_path / "ws", bug))
    assert outcome is not None, f"no item caught {bug}"
    assert HINT_NAMES[words] in outcome.hint, (outcome.name, outcome.reason, outcome.hint)
    for text in (outcome.name, outcome.reason, outcome.hint):  # and the Spanish checker says it all too
        assert not english_left(lab, text), (text, english_left(lab, text))
    if (lab, bug, check, words) in LAB08_MORE:
        assert (outcome.name, words in outcome.reason) == (check, True), outcome.reason
