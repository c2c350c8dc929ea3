"""Lab 04's checker: `EarlyStopping` and `is_better` (minitrain/monitor/early_stopping.py), then the early-
stopped run with its best checkpoint, and the final-versus-best comparison the lab asks about."""

from __future__ import annotations

import json
import math

from minitrain.course import fixtures
from minitrain.course.checks import Checklist, Failed, raised
from minitrain.course.runs import check_manifest, read_run
from minitrain.data.batcher import EvalBatcher  # the library's: `lab check` refuses the seam
from minitrain.loop import evaluate
from minitrain.models.minigpt import MiniGPT
from minitrain.runs.model_files import load_model_file

CHECKS = Checklist(here=True)  # the checker decides here; the calls go to the child (checks.py)
STOPPING = "minitrain/monitor/early_stopping.py"


def _stops_at(lab, values, **keys):
    """The step (index) at which a fresh stopper says stop, or None; and the stopper."""
    stopper = lab.module(STOPPING).EarlyStopping(**keys)
    for step, value in enumerate(values):
        if stopper.update(step, value):
            return step, stopper
    return None, stopper


@CHECKS.check("is_better: lower wins in mode 'min', higher in 'max', by more than min_delta",
              hint="min: value < best − min_delta; max: value > best + min_delta (strictly: a tie is not better, "
                   "and min_delta is subtracted in 'min', added in 'max'); with no best yet (None) any "
                   "value but NaN is better; NaN never is")
def _is_better(lab):
    better = lab.module(STOPPING).is_better
    cases = [((1.0, 2.0, "min", 0.0), True), ((2.0, 2.0, "min", 0.0), False), ((3.0, 2.0, "min", 0.0), False),
             ((1.95, 2.0, "min", 0.1), False), ((1.85, 2.0, "min", 0.1), True), ((3.0, 2.0, "max", 0.0), True),
             ((1.0, 2.0, "max", 0.0), False), ((2.05, 2.0, "max", 0.1), False), ((5.0, None, "min", 0.0), True),
             ((math.nan, 2.0, "min", 0.0), False), ((math.nan, None, "min", 0.0), False)]
    wrong = [(args, want) for args, want in cases if bool(better(*args)) != want]
    if wrong:
        (value, best, mode, delta), want = wrong[0]
        raise Failed(f"is_better({value}, {best}, {mode!r}, min_delta={delta}) should be {want}"
                     + (f" ({len(wrong) - 1} more cases wrong)" if len(wrong) > 1 else ""))


@CHECKS.check("EarlyStopping stops at the patience-th evaluation in a row without improvement",
              hint="count evaluations that do not improve on the best (is_better with this stopper's mode and "
                   "min_delta); return True when the count reaches patience")
def _patience(lab):
    stopped, _ = _stops_at(lab, [3.0, 2.5, 2.0, 2.1, 2.2, 2.3, 1.0], metric="val_loss", patience=3)
    if stopped != 5:
        raise Failed(f"val_loss 3.0, 2.5, 2.0, 2.1, 2.2, 2.3 with patience 3 stopped at evaluation {stopped}; the "
                     "best is at 2, then 3, 4, 5 do not improve: stop at 5")


@CHECKS.check("an evaluation that only ties the best does not improve",
              hint="improving means strictly better: value < best − min_delta, not <=")
def _tie(lab):
    stopped, _ = _stops_at(lab, [2.0, 2.0, 2.0, 1.0], patience=2)
    if stopped != 2:
        raise Failed(f"val_loss 2.0, 2.0, 2.0 with patience 2 stopped at {stopped}; ties are not improvements, "
                     "so it stops at evaluation 2")


@CHECKS.check("an improvement resets the count, and best / best_step follow it",
              hint="on an improvement: best = value, best_step = step, and the count of bad evaluations back to 0")
def _reset(lab):
    stopped, stopper = _stops_at(lab, [3.0, 3.1, 2.0, 2.1, 2.2, 1.5, 1.6, 1.7, 1.8], patience=3)
    if stopped != 8:
        raise Failed(f"val_loss 3.0, 3.1, 2.0, 2.1, 2.2, 1.5, 1.6, 1.7, 1.8 with patience 3 stopped at {stopped}; "
                     "each improvement (2.0, 1.5) starts the count again: stop at 8")
    if (stopper.best, stopper.best_step) != (1.5, 5):
        raise Failed(f"best / best_step are {stopper.best} / {stopper.best_step}; expected 1.5 at step 5")


@CHECKS.check("min_delta and mode 'max' are honoured",
              hint="pass mode and min_delta on to is_better; with min_delta 0.1 an improvement of 0.05 does not "
                   "count")
def _delta_and_max(lab):
    stopped, _ = _stops_at(lab, [2.0, 1.95, 1.92, 1.0], patience=2, min_delta=0.1)
    if stopped != 2:
        raise Failed(f"val_loss 2.0, 1.95, 1.92 with min_delta 0.1 and patience 2 stopped at {stopped}; neither "
                     "drop beats 2.0 by more than 0.1: stop at 2")
    stopped, stopper = _stops_at(lab, [0.5, 0.7, 0.6, 0.65], metric="val_acc", patience=2, mode="max")
    if stopped != 3 or stopper.best != 0.7:
        raise Failed(f"a 'max' metric 0.5, 0.7, 0.6, 0.65 with patience 2 stopped at {stopped} with best "
                     f"{stopper.best}; expected to stop at 3 with best 0.7")


@CHECKS.check("state_dict / load_state_dict: a restored stopper stops exactly where the original does",
              hint="state_dict returns best, best_step and the count as JSON-ready values; load_state_dict sets "
                   "them back (a resumed run must stop at the same step)")
def _state(lab):
    make = lab.module(STOPPING).EarlyStopping
    original = make(patience=3)
    for step, value in enumerate([3.0, 2.0, 2.5, 2.6]):
        original.update(step, value)
    restored = make(patience=3)
    restored.load_state_dict(json.loads(json.dumps(original.state_dict())))
    if (restored.best, restored.best_step) != (2.0, 1) or not restored.update(4, 2.7):
        raise Failed("a stopper restored after 2.0 (best, step 1), 2.5, 2.6 did not stop at the third evaluation "
                     "without improvement")


@CHECKS.check("bad arguments are a ValueError",
              hint="patience < 1, min_delta < 0 and a mode other than 'min' / 'max' raise ValueError in __init__")
def _arguments(lab):
    make = lab.module(STOPPING).EarlyStopping
    for keys in ({"patience": 0}, {"min_delta": -1.0}, {"mode": "lowest"}):
        if raised(ValueError, make, **keys) is None:
            raise Failed(f"EarlyStopping({', '.join(f'{k}={v!r}' for k, v in keys.items())}) was accepted")


# ------------------------------------------------------------------------------------------------ run folder


@CHECKS.check("run folder: the run stopped early, patience validations after its best",
              hint="train experiments/20-early-stopping/config.yaml into the run folder (the workspace README has "
                   "the command); it must end with status early_stopped")
def _run_stopped(lab):
    manifest = check_manifest(lab, files=(STOPPING,), statuses=("early_stopped",))
    results = read_run(lab, "results.json")
    training = manifest["config"]["training"]
    patience, every = training["early_stopping"]["patience"], training["val_every"]
    expected = results["best_val_step"] + patience * every
    if manifest.get("stopped_at") != expected:
        raise Failed(f"the run stopped at step {manifest.get('stopped_at')}; its best val was at step "
                     f"{results['best_val_step']}, so with patience {patience} and val_every {every} it stops at "
                     f"{expected}")


@CHECKS.check("run folder: checkpoints/best.safetensors holds the weights of the best validation",
              hint="training.checkpoint.save_best: true rewrites best.safetensors whenever is_better says the "
                   "watched metric improved", needs=(_run_stopped,))
def _run_best(lab):
    results = read_run(lab, "results.json")
    path = lab.run_dir / "checkpoints" / "best.safetensors"
    if not path.is_file():
        raise Failed(f"{path} does not exist: the config needs training.checkpoint.save_best: true")
    state, config, meta = load_model_file(path)
    if meta.get("step") != results["best_val_step"] + 1:
        raise Failed(f"best.safetensors holds the state after {meta.get('step')} updates; the best validation "
                     f"was after update {results['best_val_step']}, so {results['best_val_step'] + 1}")
    model = MiniGPT(**config)
    model.load_state_dict(state)
    _, ppl = evaluate(model, EvalBatcher(fixtures.split("val", seq_len=config["max_seq_len"]), 256))
    if not math.isclose(ppl, results["best_val_ppl"], rel_tol=1e-4):
        raise Failed(f"best.safetensors scores val PPL {ppl:.5g}; results.json's best_val_ppl is "
                     f"{results['best_val_ppl']:.5g}")


@CHECKS.check("run folder: the final weights are worse than the best ones (the final-vs-best question)",
              hint="results.json's val_ppl is the final weights'; best_val_ppl is best.safetensors'. Early "
                   "stopping runs `patience` validations past the best, so the final model is never the best",
              needs=(_run_stopped,))
def _run_final_vs_best(lab):
    results = read_run(lab, "results.json")
    if not results["val_ppl"] > results["best_val_ppl"]:
        raise Failed(f"final val PPL {results['val_ppl']:.5g} is not above the best, {results['best_val_ppl']:.5g}")
