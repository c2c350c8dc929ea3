"""Lab 01's checker: `train_step` and `evaluate` (minitrain/loop.py), `parse_args` and `main`
(scripts/train_mini.py), then the lab's stop conditions on the run folder.

Expected numbers are computed here the plain way (one forward, one backward, float64 sums) on a tiny MiniGPT and
the committed val split; a wrong answer is compared with the usual mistakes to say which one it is. The checks
decide here (checks.py `here`) on models and batches built in the child (`lab.library`); the run folder's model is
scored here (runs.py `scored_model`).
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from minitrain.autograd.tensor import TAPE
from minitrain.common.paths import course_file
from minitrain.course import fixtures
from minitrain.course.checks import Checklist, Failed, raised
from minitrain.course.runs import RUN_FILES, check_manifest, read_run, scored_model, tiny_run
from minitrain.data import batch as batch_module
from minitrain.data.batch import Batch, take

CHECKS = Checklist(here=True)  # the checker decides here; the calls go to the child (checks.py)
LOOP, SCRIPT = "minitrain/loop.py", "scripts/train_mini.py"
CONFIG, BASELINE = "experiments/18-train-mini/config.yaml", "experiments/14-ngram-baseline/results.json"
CHILD = sys.modules[__name__]  # its child-side helpers (the end of this file), for `lab.library`


def _gradient(model, batch: Batch) -> tuple[float, np.ndarray]:
    """(token-mean loss, flat gradient) of one batch, computed the plain way on `model`."""
    model.zero_grad()
    _, loss = model(*batch)
    loss.backward()
    return loss.item(), model.buffer.grad.astype(np.float64)


def _reference() -> tuple[Batch, float, np.ndarray]:
    """The batch the train_step checks use (the split's first 8 records) with its plain (loss, gradient)."""
    batch = take(fixtures.split("train", 48), slice(0, 8))
    return (batch, *_gradient(fixtures.tiny_model(0), batch))


def _norm(g: np.ndarray) -> float:
    return float(np.sqrt((g.astype(np.float64) ** 2).sum()))


def _step(lab, micro: list[Batch], clip_norm=None, model=None):
    """The student's train_step on `model` (default: a fresh fixtures.tiny_model(0)) with a fresh AdamW, both
    built where the student's code runs, as `micro` is rebuilt: (loss, norm, the gradient it left)."""
    model = lab.library(fixtures).tiny_model(0) if model is None else model
    optimizer, _ = lab.library(fixtures).adamw(model)
    sent = [lab.library(batch_module).Batch(*b) for b in micro]
    loss, norm = lab.module(LOOP).train_step(model, optimizer, sent, clip_norm)
    return float(loss), float(norm), model.buffer.grad.astype(np.float64)


def _close(a: float, b: float, rel: float = 1e-5) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


def _arrays_close(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, rtol=1e-4, atol=1e-7))


# ------------------------------------------------------------------------------------------------ train_step


@CHECKS.check("train_step returns the batch's token-mean loss",
              hint="_, loss = model(batch.input, batch.target, batch.attn_pad_mask, batch.loss_mask) is already "
                   "the mean over counted tokens; return loss.item() (Block A)")
def _step_loss(lab):
    batch, expected, _ = _reference()
    loss, _, _ = _step(lab, [batch])
    counted = int(batch.loss_mask.sum())
    if _close(loss, expected * counted):
        raise Failed(f"your train_step returned {loss:.6g}, the SUM over the {counted} counted tokens; the loss is "
                     f"their mean, {expected:.6g}")
    if not _close(loss, expected):
        raise Failed(f"your train_step returned loss {loss:.6g}; the batch's token-mean loss is {expected:.6g}")


@CHECKS.check("train_step fills the gradient: backward() on the loss",
              hint="call loss.backward() on each micro-batch's loss (Block A): it fills model.buffer.grad, which "
                   "the norm, the clipping and the optimizer all read; without it they see zeros")
def _step_backward(lab):
    batch, _, g = _reference()
    _, _, got = _step(lab, [batch])
    if not got.any():
        raise Failed("after your train_step, model.buffer.grad is all zeros: loss.backward() was never called")
    if not _arrays_close(got, g):
        raise Failed(f"after your train_step the gradient has norm {_norm(got):.4g}; the batch's gradient has "
                     f"norm {_norm(g):.4g}")


@CHECKS.check("train_step returns the gradient norm measured before clipping",
              hint="norm = clip_grad_norm_(model.buffer, clip_norm) returns the norm BEFORE it clips; log that "
                   "one, or the log would sit at clip_norm and hide the spikes (theory 02)")
def _step_norm(lab):
    batch, _, g = _reference()
    norm = _norm(g)
    _, got, _ = _step(lab, [batch], clip_norm=norm / 10)
    if _close(got, norm / 10, 1e-3):
        raise Failed(f"your train_step returned the norm AFTER clipping ({got:.6g} = clip_norm); before clipping "
                     f"it is {norm:.6g}")
    if not _close(got, norm, 1e-4):
        raise Failed(f"your train_step returned grad_norm {got:.6g}; the global norm of the gradient is "
                     f"{norm:.6g}, sqrt of Σ (g·g).sum() over every parameter")


@CHECKS.check("train_step clips the gradient to clip_norm, and leaves it alone when clip_norm is None",
              hint="after backward: clip_grad_norm_(model.buffer, clip_norm) scales the whole gradient so its "
                   "norm is at most clip_norm; skip it when clip_norm is None")
def _step_clips(lab):
    batch, _, g = _reference()
    norm = _norm(g)
    _, _, clipped = _step(lab, [batch], clip_norm=norm / 10)
    if _close(_norm(clipped), norm, 1e-4):
        raise Failed(f"with clip_norm {norm / 10:.4g} the gradient left in model.buffer.grad still has norm "
                     f"{norm:.4g}: it was not clipped (or was clipped after the caller's update)")
    if not (_close(_norm(clipped), norm / 10, 1e-3) and _arrays_close(clipped * 10, g)):
        raise Failed(f"with clip_norm {norm / 10:.4g} the gradient's norm is {_norm(clipped):.4g}; clipping scales "
                     "every element by the same factor, clip_norm / norm")
    _, _, unclipped = _step(lab, [batch], clip_norm=None)
    if not _arrays_close(unclipped, g):
        raise Failed("with clip_norm=None the gradient in model.buffer.grad is not the batch's gradient")


@CHECKS.check("train_step starts from a zero gradient",
              hint="call optimizer.zero_grad() first: backward() ADDS into .grad, so without it each step also "
                   "carries every earlier step's gradient")
def _step_zeroes(lab):
    batch, _, g = _reference()
    model = lab.library(fixtures).tiny_model(0)
    lab.library(CHILD).fill_gradient(model, 1.0)  # what an earlier step left behind
    _, _, got = _step(lab, [batch], model=model)
    if _arrays_close(got, g + 1.0):
        raise Failed("the gradient left from before the step was still in .grad: your train_step added the new "
                     "gradient onto it")
    if not _arrays_close(got, g):
        raise Failed("after train_step, model.buffer.grad is not the batch's gradient")


@CHECKS.check("train_step leaves the update to the caller",
              hint="do not call optimizer.step() in train_step: the engine calls it after checking that the loss "
                   "and the norm are finite (a NaN step is then never applied)")
def _step_no_update(lab):
    model = lab.library(fixtures).tiny_model(0)
    before = model.buffer.data
    _step(lab, [take(fixtures.split("train", 48), slice(0, 8))], clip_norm=1.0, model=model)
    if not np.array_equal(model.buffer.data, before):
        raise Failed("your train_step changed the weights (it updated them itself); the engine would then update "
                     "twice per step")


@CHECKS.check("train_step weights micro-batches by their counted tokens (gradient accumulation)",
              hint="with k micro-batches, backward micro-batch i with weight n_i / N (n_i of its N counted tokens): "
                   "loss.backward(np.asarray(n_i / N, dtype=loss.dtype)); the result equals one batch of all rows")
def _step_accumulates(lab):
    split = fixtures.split("train", 48)
    micro = [take(split, slice(0, 4)), take(split, slice(4, 12))]
    counts = [int(b.loss_mask.sum()) for b in micro]
    whole_loss, whole = _gradient(fixtures.tiny_model(0), take(split, slice(0, 12)))
    parts = [_gradient(fixtures.tiny_model(0), b)[1] for b in micro]
    loss, _, got = _step(lab, micro, None)
    mistakes: list[tuple[str, Callable[[], np.ndarray]]] = [
        ("summed the micro-batch losses: the gradient is the sum of the two batches' mean gradients",
         lambda: sum(parts)),
        ("averaged the micro-batch means equally: a batch of 4 rows weighs as much as one of 8",
         lambda: sum(parts) / 2),
        ("kept only the last micro-batch's gradient", lambda: parts[-1]),
    ]
    if not _arrays_close(got, whole):
        found = next((what for what, value in mistakes if _arrays_close(got, value())), None)
        raise Failed(f"two micro-batches with {counts[0]} and {counts[1]} counted tokens: your train_step "
                     + (found or "gives a gradient that differs from that of one batch holding both"))
    if not _close(loss, whole_loss, 1e-4):
        raise Failed(f"two micro-batches: your train_step returned loss {loss:.6g}; one batch holding both has "
                     f"token-mean loss {whole_loss:.6g}")


# ------------------------------------------------------------------------------------------------ evaluate


def _val_batches(lab, size: int, n: int | None = None) -> Any:
    """The library's EvalBatcher over the first `n` val records (None: all), built in the child."""
    return lab.library(fixtures).val_batches(size, n)


def _opinionated(lab, dropout: float = 0.0) -> Any:
    """fixtures.opinionated_model(1), built in the child."""
    return lab.library(fixtures).opinionated_model(1, dropout=dropout)


def _val_losses(model, split: Batch) -> np.ndarray:
    """−log p(target) at every position of the split, float64, in eval mode (no dropout)."""
    was_training = model.training
    model.eval()
    logits, _ = model(split.input, attn_pad_mask=split.attn_pad_mask)
    if was_training:
        model.train()
    z = logits.data.astype(np.float64)
    top = z.max(-1, keepdims=True)
    log_probs = z - top - np.log(np.exp(z - top).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probs, split.target[..., None], axis=-1)[..., 0]


@CHECKS.check("evaluate averages over exactly the loss_mask positions of the whole split",
              hint="sum −log p(target) over the positions where loss_mask is True, over ALL batches, and divide "
                   "by how many there are (metrics.PerplexityMeter does it); not a mean of batch means")
def _evaluate_counts(lab):
    split = fixtures.split("val")
    nll = _val_losses(fixtures.opinionated_model(1), split)
    counted = int(split.loss_mask.sum())
    expected = float(nll[split.loss_mask].mean())
    val_loss, _ = lab.module(LOOP).evaluate(_opinionated(lab), _val_batches(lab, 20))  # 7 batches of 20, one of 4
    val_loss = float(val_loss)
    if _close(val_loss, expected):
        return
    real = int(split.attn_pad_mask.sum())
    batches = [slice(i, i + 20) for i in range(0, 144, 20)]
    mistakes = [
        (float(nll.mean()), f"counted padding positions: expected the mean over {counted:,} counted tokens, got "
                            f"the mean over all {nll.size:,} positions"),
        (float(nll[split.attn_pad_mask].mean()), f"counted the prompt too: expected the mean over {counted:,} "
                                                 f"counted tokens, got the mean over all {real:,} real targets"),
        (float(np.mean([nll[b][split.loss_mask[b]].mean() for b in batches])),
         "averaged the 8 batch means: the last batch has 4 records, not 20, so each token must weigh the same"),
        (float(nll[split.loss_mask].sum()), f"summed the {counted:,} token losses instead of averaging them"),
    ]
    found = next((what for value, what in mistakes if _close(val_loss, value)), None)
    raise Failed(f"your evaluate() {found}" if found else
                 f"your evaluate() returned val_loss {val_loss:.6g}; the mean over the {counted:,} counted val "
                 f"tokens is {expected:.6g}")


@CHECKS.check("evaluate returns val_ppl = exp(val_loss)",
              hint="return (val_loss, math.exp(val_loss)): perplexity is the exponential of the mean loss")
def _evaluate_ppl(lab):
    val_loss, val_ppl = lab.module(LOOP).evaluate(_opinionated(lab), _val_batches(lab, 48))
    if not _close(float(val_ppl), math.exp(float(val_loss))):
        raise Failed(f"val_ppl {float(val_ppl):.6g} is not exp(val_loss) = {math.exp(float(val_loss)):.6g}")


@CHECKS.check("evaluate runs in eval mode (no dropout) and puts the model back in its mode",
              hint="model.eval() before the pass and model.train() after it, even on an error (try/finally), or "
                   "`with minitrain.nn.inference(model):`, which also turns the tape off")
def _evaluate_mode(lab):
    model = _opinionated(lab, dropout=0.5)
    evaluate = lab.module(LOOP).evaluate
    model.eval()
    expected = float(evaluate(model, _val_batches(lab, 48))[0])  # dropout off: the student's own number
    if model.training:
        raise Failed("evaluate() switched a model that was in eval mode to train mode")
    model.train()
    first, second = (float(evaluate(model, _val_batches(lab, 48))[0]) for _ in range(2))
    if not model.training:
        raise Failed("after evaluate() the model is still in eval mode: training would go on without dropout")
    if not (_close(first, expected) and _close(second, expected)):
        raise Failed(f"with dropout 0.5, a model in train mode gave val_loss {first:.6g}, then {second:.6g}; the "
                     f"same model in eval mode gives {expected:.6g}: dropout was on during evaluation")


@CHECKS.check("evaluate records nothing on the tape",
              hint="run the pass inside `with no_grad():` (minitrain.autograd.tensor): otherwise every activation of "
                   "the val pass stays alive on the tape until the next backward")
def _evaluate_tape(lab):
    tape = lab.library(CHILD).tape_length
    before = tape()
    lab.module(LOOP).evaluate(_opinionated(lab), _val_batches(lab, 16, n=48))
    added = tape(cut=before) - before
    if added:
        raise Failed(f"evaluate() left {added} operations on the tape, with their activations")


# ------------------------------------------------------------------------------------------------ the script


@CHECKS.check("scripts/train_mini.py: parse_args reads the lab's flags",
              hint="argparse: --config (required), --out-dir, --models-dir, --seed (int), --resume, --set "
                   "(action='append', dest='overrides', default []), --quiet (store_true); see its docstring")
def _parse_args(lab):
    parse = lab.module(SCRIPT).parse_args
    fields = lab.library(builtins).vars  # the Namespace's attributes, as data
    args = fields(parse(["--config", "c.yaml", "--out-dir", "o", "--models-dir", "m", "--seed", "3", "--resume",
                         "r", "--set", "a=1", "--set", "b=2", "--quiet"]))
    want = {"config": "c.yaml", "out_dir": "o", "models_dir": "m", "seed": 3, "resume": "r",
            "overrides": ["a=1", "b=2"], "quiet": True}
    wrong = {k: args.get(k, "(missing)") for k, v in want.items() if args.get(k, "(missing)") != v}
    if wrong:
        raise Failed(f"parse_args(...) gave {wrong}; expected {({k: want[k] for k in wrong})}")
    plain = fields(parse(["--config", "c.yaml"]))
    defaults = {"out_dir": None, "models_dir": None, "seed": None, "resume": None, "overrides": [], "quiet": False}
    wrong = {k: plain.get(k, "(missing)") for k, v in defaults.items() if plain.get(k, "(missing)") != v}
    if wrong:
        raise Failed(f"with only --config, parse_args gave {wrong}; expected {({k: defaults[k] for k in wrong})}")
    stop = raised(SystemExit, lab.library(CHILD).quietly, parse, ["--out-dir", "o"])
    if stop is None or stop.code != 2:
        raise Failed("parse_args without --config did not stop with a usage error (exit code 2)")


@CHECKS.check("scripts/train_mini.py trains a short run end to end on these pieces",
              hint="the reason above says how the run went wrong; to see all of its output, run the script yourself "
                   "on experiments/18-train-mini/config.yaml with MINITRAIN_LAB_DIR set",
              needs=(_step_loss, _step_backward, _step_norm, _step_no_update, _evaluate_counts, _parse_args))
def _script_runs(lab):
    out = tiny_run(lab, str(lab.file(SCRIPT)))
    missing = [name for name in RUN_FILES if not (out / name).is_file()]
    if missing:
        raise Failed(f"the run folder lacks {missing}")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    if lab.workspace is not None and LOOP not in manifest.get("lab_files", {}).get("files", []):
        raise Failed("the run did not train with your minitrain/loop.py (manifest.json has no lab_files entry)")


# ------------------------------------------------------------------------------------------------ run folder


@CHECKS.check("run folder: manifest.json is complete, the run went all the way with lab 01's model",
              hint="train experiments/18-train-mini/config.yaml into the run folder (the workspace README has the "
                   "command); no early stopping in this lab: the manifest is completed when the last step is done")
def _run_manifest(lab):
    manifest = check_manifest(lab, files=(LOOP,))
    if manifest.get("steps_done") != manifest.get("total_steps"):
        raise Failed(f"the run did {manifest.get('steps_done')} of its {manifest.get('total_steps')} steps")
    if manifest["config"]["model"] != fixtures.lab01_model_config():
        raise Failed(f"the run's model is {manifest['config']['model']}, not lab 01's")


def _baseline() -> float:
    """The n-gram baseline's val PPL: the course's committed run, never the number a run folder copied."""
    return float(json.loads(course_file(BASELINE).read_text(encoding="utf-8"))["val_ppl"])


@CHECKS.check("run folder: its model file, scored here on the val split, has a val PPL under the n-gram's",
              hint="val_ppl must be below ngram_baseline_val_ppl (5.80); if it is not, read the lab's pitfalls",
              needs=(_run_manifest,))
def _run_beats(lab):
    steps = read_run(lab, "manifest.json")["total_steps"]  # a run cut short may pass: the PPL is the gate
    ppl = scored_model(lab, CONFIG, exact_below=0, steps=steps)["ppl"]  # the weights on the val split, here
    if not ppl < _baseline():
        raise Failed(f"scored here from its model file, the run's val PPL is {ppl:.4g}, not below the n-gram "
                     f"baseline's {_baseline():.4g}")


@CHECKS.check("run folder: loss_curve.png shows the val curve going below the dashed baseline",
              hint="loss_curve.png is drawn at the end of the run from train_log.jsonl, with the baseline dashed")
def _run_curve(lab):
    png = read_run(lab, "loss_curve.png")
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise Failed("loss_curve.png is not a PNG image")
    below = [r["step"] for r in read_run(lab, "train_log.jsonl") if "val_ppl" in r and r["val_ppl"] < _baseline()]
    if not below:
        raise Failed("no val row of train_log.jsonl is below the baseline, so the curve never crosses its line")


# ------------------------------------------------------------------------------------------------ child side
# Called through `lab.library(CHILD)`: they run where the student's code runs and return plain data.


def fill_gradient(model: Any, value: float) -> None:
    """Write `value` into every element of `model.buffer.grad`, in place: what an earlier step left there."""
    model.buffer.grad[...] = value


def tape_length(cut: int | None = None) -> int:
    """How many ops the autograd tape holds; then, with `cut`, drop those after the first `cut`."""
    length = len(TAPE.nodes)
    if cut is not None:
        del TAPE.nodes[cut:]
    return length


def quietly(call: Callable, *args: Any) -> Any:
    """call(*args) with its stderr swallowed (argparse's usage message is not what the student's code printed)."""
    with contextlib.redirect_stderr(io.StringIO()):
        return call(*args)
