"""Lab 00's checker: `encode_split`, `TrainBatcher` and `EvalBatcher` (minitrain/data/batcher.py).

The record every lab text draws, `caminar|P1|camino`, is checked position by position; the batchers are
checked on the committed training and val splits; a short training run then uses the batcher for real.
The checks run in the checker's process (checks.py `here`): the splits and the tokenizer the student's code is
given are built in the child (`lab.library`), the expected values here.
"""

from __future__ import annotations

import copy
import json

import numpy as np

from minitrain.common.errors import UserError
from minitrain.course import fixtures
from minitrain.course.checks import Checklist, Failed, is_a, raised
from minitrain.course.runs import tiny_run

CHECKS = Checklist(here=True)
BATCHER = "minitrain/data/batcher.py"
CAMINO = {"verb": "caminar", "tense": "P", "person": 1, "form": "camino", "text": "caminar|P1|camino"}


def _encode(lab, records, seq_len=32, loss_on="answer"):
    return lab.module(BATCHER).encode_split(list(records), lab.library(fixtures).tokenizer(), seq_len, loss_on)


def _row(split, i=0):
    return [np.asarray(a)[i] for a in split]


def _positions(mask) -> str:
    found = np.flatnonzero(mask).tolist()
    return "none" if not found else f"{found[0]}–{found[-1]}" if found == list(range(found[0], found[-1] + 1)) \
        else str(found)


@CHECKS.check("encode_split: input is the line without its last token, target without its first, PAD after",
              hint="e = tokenizer.encode_line(text); input = e[:-1], target = e[1:], each right-padded with "
                   "tokenizer.pad_id to seq_len columns, int64 (lab/00, section 'The batcher')")
def _inputs_and_targets(lab):
    split = _encode(lab, [CAMINO])
    line = fixtures.tokenizer().encode_line(CAMINO["text"])
    pad = [fixtures.tokenizer().pad_id] * (32 - len(line) + 1)
    for name, array, want in (("input", split.input, line[:-1] + pad), ("target", split.target, line[1:] + pad)):
        array = np.asarray(array)
        if array.shape != (1, 32):
            raise Failed(f"{name} has shape {array.shape} for one record and seq_len 32; expected (1, 32)")
        if array.dtype != np.int64:
            raise Failed(f"{name} is {array.dtype}; token ids are int64")
        if array[0].tolist() != want:
            raise Failed(f"{name} of caminar|P1|camino is {array[0].tolist()}, expected {want}")


@CHECKS.check("encode_split: attn_pad_mask marks exactly the real input tokens",
              hint="attn_pad_mask[t] is True where input[t] is BOS or a character, False on padding "
                   "(a bool array of the same shape)")
def _attention_mask(lab):
    mask = np.asarray(_encode(lab, [CAMINO]).attn_pad_mask)
    if mask.dtype != np.bool_:
        raise Failed(f"attn_pad_mask is {mask.dtype}; masks are bool")
    if _positions(mask[0]) != "0–17":
        raise Failed(f"attn_pad_mask of caminar|P1|camino is True at positions {_positions(mask[0])}; the input "
                     "holds BOS + 17 characters at positions 0–17")


@CHECKS.check("encode_split: loss_mask counts the form and EOS, on target positions (loss_on='answer')",
              hint="the loss mask lives on TARGET positions: for caminar|P1|camino, targets 11–17 are "
                   "c a m i n o EOS. Everything after the last '|' counts, plus EOS; never the prompt or padding")
def _loss_mask_answer(lab):
    mask = np.asarray(_encode(lab, [CAMINO]).loss_mask)
    if mask.dtype != np.bool_:
        raise Failed(f"loss_mask is {mask.dtype}; masks are bool")
    got = _positions(mask[0])
    if got == "12–17":
        raise Failed("your loss_mask marks where the INPUT holds the form (positions 12–17), not where the "
                     "target does (11–17): the form's first character, where copying the stem starts, is never "
                     "scored")
    if got.startswith("11") and mask[0, 18:].any():
        raise Failed(f"your loss_mask is True at {got}: it counts padding positions after EOS (18 on)")
    if got == "0–17":
        raise Failed("your loss_mask counts the prompt too (positions 0–17): that is loss_on='all'")
    if got != "11–17":
        raise Failed(f"loss_mask of caminar|P1|camino is True at {got}; expected targets 11–17 (camino + EOS)")


@CHECKS.check("encode_split: loss_on='all' counts every real target; with 'answer' the whole val split counts "
              "1,299 tokens", hint="with loss_on='all' the loss mask equals attn_pad_mask; with 'answer', "
                                   "each of the 144 val records counts its form's characters plus EOS")
def _loss_mask_all(lab):
    every = _encode(lab, [CAMINO], loss_on="all")
    if _positions(np.asarray(every.loss_mask)[0]) != "0–17":
        raise Failed(f"with loss_on='all' loss_mask is True at {_positions(np.asarray(every.loss_mask)[0])}; "
                     "expected every real target, 0–17")
    counted = int(np.asarray(_encode(lab, fixtures.records("val")).loss_mask).sum())
    if counted != 1299:
        raise Failed(f"the val split's loss_mask counts {counted:,} tokens; expected 1,299 (the n-gram baseline "
                     "is scored on exactly those)")


@CHECKS.check("encode_split: a line that does not fit, or an unknown loss_on, is a UserError",
              hint="raise minitrain.common.errors.UserError naming the record when BOS + text + EOS needs more than "
                   "seq_len + 1 tokens, and for a loss_on other than 'answer' or 'all'")
def _encode_errors(lab):
    for what, call in (("a record longer than seq_len + 1 tokens", lambda: _encode(lab, [CAMINO], seq_len=10)),
                       ("loss_on='everything'", lambda: _encode(lab, [CAMINO], loss_on="everything"))):
        error = raised(Exception, call)
        if error is None:
            raise Failed(f"{what} was accepted; expected a UserError")
        if not is_a(error, UserError):
            raise Failed(f"{what} raised {getattr(error, 'kind', type(error).__name__)}: {error}; expected a "
                         "UserError")


def _batches(batcher, n):
    return [np.asarray(next(batcher).input).copy() for _ in range(n)]


@CHECKS.check("TrainBatcher: full batches; one epoch is a permutation of the rows",
              hint="each epoch draws rng.permutation(N) and hands out N // batch_size batches of exactly "
                   "batch_size rows; leftover rows wait for a later epoch")
def _train_epoch(lab):
    # 42 rows in batches of 4: 10 batches per epoch, 2 rows left over
    batcher = lab.module(BATCHER).TrainBatcher(lab.library(fixtures).split("train", 42), 4, 7)
    rows = {tuple(r): i for i, r in enumerate(fixtures.split("train", 42).input.tolist())}
    seen = []
    for _ in range(10):
        batch = next(batcher)
        if np.asarray(batch.input).shape != (4, 32):
            raise Failed(f"a batch has shape {np.asarray(batch.input).shape}; expected (4, 32)")
        seen += [rows[tuple(r)] for r in np.asarray(batch.input).tolist()]
    if len(set(seen)) != 40:
        raise Failed(f"the 10 batches of one epoch hold {len(set(seen))} distinct rows of 42; an epoch is a "
                     "permutation, so 40 distinct rows")
    if seen == sorted(seen):
        raise Failed("the first epoch is in file order: the rows are not shuffled")


@CHECKS.check("TrainBatcher: the data seed alone decides the order (its own RNG, not np.random)",
              hint="create np.random.Generator(np.random.PCG64(data_seed)) inside the batcher and draw only from "
                   "it; never the global np.random")
def _train_seed(lab):
    split = lab.library(fixtures).split("train", 40)
    make = lab.module(BATCHER).TrainBatcher
    global_rng = lab.library(np.random)  # the one the student's code would draw from
    before = global_rng.get_state()
    global_rng.seed(1)
    a = _batches(make(split, 4, 7), 15)
    global_rng.seed(2)
    b = _batches(make(split, 4, 7), 15)
    c = _batches(make(split, 4, 8), 15)
    global_rng.set_state(before)
    if any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True)):
        raise Failed("the same data_seed gave different batches when np.random's global seed changed: the "
                     "batcher draws from the global RNG")
    if all(np.array_equal(x, y) for x, y in zip(a, c, strict=True)):
        raise Failed("data_seed 7 and 8 gave the same batches: the seed is not used")


@CHECKS.check("TrainBatcher: a state_dict taken mid-epoch resumes the very same batches",
              hint="keep the RNG state from BEFORE the current epoch's permutation; load_state_dict restores it, "
                   "redraws the same permutation and skips to `position`. The state must survive json.dumps")
def _train_resume(lab):
    split = lab.library(fixtures).split("train", 40)
    make = lab.module(BATCHER).TrainBatcher
    for taken_after in (3, 10, 13, 27):  # inside epoch 0, at its end, inside epoch 1, inside epoch 2
        original = make(split, 4, 7)
        _batches(original, taken_after)
        state = json.loads(json.dumps(original.state_dict()))
        expected = _batches(original, 12)
        resumed = make(split, 4, 99)  # another seed: everything must come from the state
        resumed.load_state_dict(copy.deepcopy(state))
        got = _batches(resumed, 12)
        first_bad = next((i for i, (x, y) in enumerate(zip(expected, got, strict=True))
                          if not np.array_equal(x, y)), None)
        if first_bad is not None:
            raise Failed(f"state saved after {taken_after} batches: batch {first_bad + 1} after the resume differs "
                         "from the original's. Saving the RNG state after the permutation makes a resume draw the "
                         "NEXT epoch's order for the current one")


@CHECKS.check("TrainBatcher: a state for another split or batch size is refused, and nothing changes",
              hint="load_state_dict compares num_records and batch_size with its own and raises UserError first")
def _train_refuses(lab):
    make = lab.module(BATCHER).TrainBatcher
    small = make(lab.library(fixtures).split("train", 36), 4, 7)
    big = make(lab.library(fixtures).split("train", 40), 4, 7)
    next(big)
    before = big.state_dict()
    if raised(UserError, big.load_state_dict, small.state_dict()) is None:
        raise Failed("a state saved for 36 records was loaded into a batcher of 40 records")
    if json.dumps(big.state_dict()) != json.dumps(before):
        raise Failed("the refused load_state_dict changed the batcher's state")


@CHECKS.check("EvalBatcher: one pass in file order, the last batch smaller, every record once",
              hint="yield rows start..start+B for start = 0, B, 2B, ... < N; the last batch keeps what is left. "
                   "Iterating again starts a new pass; len() is ceil(N / B)")
def _eval_pass(lab):
    split = fixtures.split("val")  # 144 records: 7 batches of 20 and one of 4
    batcher = lab.module(BATCHER).EvalBatcher(lab.library(fixtures).split("val"), 20)
    for attempt in ("the first pass", "the second pass"):
        batches = list(batcher)
        sizes = [len(np.asarray(b.input)) for b in batches]
        if sizes != [20] * 7 + [4]:
            hint = " (the last, partial batch was dropped)" if sizes == [20] * 7 else ""
            raise Failed(f"{attempt} over 144 records in batches of 20 gave batch sizes {sizes}{hint}")
        if not np.array_equal(np.concatenate([np.asarray(b.input) for b in batches]), np.asarray(split.input)):
            raise Failed(f"{attempt} is not the split's rows in file order")
    if len(batcher) != 8:
        raise Failed(f"len() of the val batcher is {len(batcher)}; 144 records in batches of 20 make 8 batches")


@CHECKS.check("a short training run works with this batcher",
              hint="the reason above says how the run went wrong; to see all of its output, run it yourself with "
                   "MINITRAIN_LAB_DIR=<your folder> "
                   ".venv/bin/minitrain train experiments/18-train-mini/config.yaml --out-dir runs/try",
              needs=(_inputs_and_targets, _loss_mask_answer, _train_epoch, _train_resume, _eval_pass))
def _short_run(lab):
    out = tiny_run(lab, "-m", "minitrain.cli", "train")
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    if not results["val_ppl"] < 64:
        raise Failed(f"after 24 steps val PPL is {results['val_ppl']:.2f}, no better than a uniform guess (64)")
