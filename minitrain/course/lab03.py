"""Lab 03's checker: `moving_average`, `train_val_gap` and `overfitting_onset` (minitrain/monitor/curves.py),
then the overfitting run the lab asks for.

The unit checks use small logs whose answers are worked out by hand; a wrong answer is compared with the
usual mistakes (a centred window, averaged perplexities, train rows from the future) to say which one it is.
"""

from __future__ import annotations

import math

from minitrain.course.checks import Checklist, Failed
from minitrain.course.runs import check_manifest, read_run
from minitrain.monitor.curves import overfitting_onset, train_val_gap  # the library's: the run's yardstick

CHECKS = Checklist(here=True)  # the checker decides here; the calls go to the child (checks.py)
CURVES = "minitrain/monitor/curves.py"

# A log in the engine's order: train rows every 10 steps, val rows every 20 (after the train row of the step).
LOSSES = [4.0, 3.0, 2.0, 1.6, 1.2, 1.0, 0.8, 0.6, 0.5]  # train rows at steps 0, 10, ..., 80
VAL_PPL = {0: 60.0, 20: 9.0, 40: 4.0, 60: 5.0, 80: 7.0}
ROWS = []
for _i, _loss in enumerate(LOSSES):
    ROWS.append({"step": 10 * _i, "loss": _loss, "lr": 1e-3, "grad_norm": 1.0})
    if 10 * _i in VAL_PPL:
        ROWS.append({"step": 10 * _i, "val_loss": math.log(VAL_PPL[10 * _i]), "val_ppl": VAL_PPL[10 * _i]})


def _approx(a, b) -> bool:
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) for x, y in zip(a, b,
                                                                                                     strict=True))


@CHECKS.check("moving_average is the trailing mean of the last `window` values",
              hint="out[i] = mean(values[max(0, i - window + 1) : i + 1]): only values up to i, and at the start "
                   "the mean of the fewer values there are")
def _trailing(lab):
    average = lab.module(CURVES).moving_average
    values = [1.0, 3.0, 5.0, 7.0, 9.0]
    got = list(average(values, 3))
    want = [1.0, 2.0, 3.0, 5.0, 7.0]
    if _approx(got, want):
        if list(average(values, 1)) != values:
            raise Failed("moving_average(values, 1) should give the values themselves")
        return
    mistakes = [([2.0, 3.0, 5.0, 7.0, 8.0], "is centred: out[i] uses values after i, which a dashboard cannot "
                                            "know yet"),
                ([1 / 3, 4 / 3, 3.0, 5.0, 7.0], "divides the first values by the full window instead of by how "
                                                "many there are"),
                ([3.0, 5.0, 7.0], "drops the first window − 1 values: the curve must keep one point per step"),
                ([1.0, 2.0, 3.0, 4.0, 5.0], "averages everything so far, not the last `window` values")]
    found = next((what for value, what in mistakes if _approx(got, value)), None)
    raise Failed(f"moving_average([1, 3, 5, 7, 9], 3) gave {got}; expected {want}"
                 + (f": it {found}" if found else ""))


NO_FUTURE = ("for the val row at step s, average the last `window` train rows with step <= s; rows after s are the "
             "future")


@CHECKS.check("train_val_gap averages the losses of the last `window` train rows, then takes exp",
              hint="train_ppl = exp(mean of the `loss` values), never the mean of exp(loss): a perplexity is the "
                   "exponential of a MEAN loss")
def _gap_means_losses(lab):
    gaps = list(lab.module(CURVES).train_val_gap(ROWS, window=2))
    at = {g["step"]: g for g in gaps}
    if 40 not in at:
        raise Failed(f"train_val_gap gave entries for steps {sorted(at)}; expected one per val row: 0, 20, 40, 60, 80")
    want = math.exp((LOSSES[3] + LOSSES[4]) / 2)  # train rows at 30 and 40
    got = at[40]["train_ppl"]
    if math.isclose(got, (math.exp(LOSSES[3]) + math.exp(LOSSES[4])) / 2, rel_tol=1e-9):
        raise Failed(f"at step 40 your train_ppl is {got:.6g}, the mean of the two rows' perplexities; exp of the "
                     f"mean loss is {want:.6g}")
    if math.isclose(got, math.exp((LOSSES[4] + LOSSES[5]) / 2), rel_tol=1e-9):  # the rows of steps 40 and 50
        raise Failed(f"at step 40 (window 2) your train_ppl is {got:.6g}, the mean loss of the rows of steps 40 "
                     f"and 50: the row of step 50 was logged after the validation; expected {want:.6g}",
                     hint=NO_FUTURE)
    if not math.isclose(got, want, rel_tol=1e-9):
        raise Failed(f"at step 40 (window 2: the train rows of steps 30 and 40) train_ppl is {got:.6g}; expected "
                     f"exp((1.6 + 1.2) / 2) = {want:.6g}")


@CHECKS.check("train_val_gap uses only train rows logged at or before each validation", hint=NO_FUTURE)
def _gap_no_future(lab):
    at = {g["step"]: g for g in lab.module(CURVES).train_val_gap(ROWS, window=3)}
    want = math.exp((LOSSES[0] + LOSSES[1] + LOSSES[2]) / 3)  # steps 0, 10, 20
    got = at.get(20, {}).get("train_ppl")
    if got is None or not math.isclose(got, want, rel_tol=1e-9):
        future = math.exp((LOSSES[1] + LOSSES[2] + LOSSES[3]) / 3)
        why = " (it used the row of step 30, after the validation)" if got and math.isclose(got, future) else ""
        raise Failed(f"at step 20 with window 3 train_ppl is {got}; expected exp of the mean loss of steps 0, 10 "
                     f"and 20, {want:.6g}{why}")


@CHECKS.check("train_val_gap gives one entry per val row: step, train_ppl, val_ppl, gap = val / train",
              hint="entries in step order as dicts {'step', 'train_ppl', 'val_ppl', 'gap'}; skip a val row that "
                   "comes before any train row")
def _gap_entries(lab):
    gap = lab.module(CURVES).train_val_gap
    gaps = list(gap(ROWS, window=2))
    if [g["step"] for g in gaps] != sorted(VAL_PPL):
        raise Failed(f"entries for steps {[g['step'] for g in gaps]}; expected {sorted(VAL_PPL)}")
    for g in gaps:
        if g["val_ppl"] != VAL_PPL[g["step"]] or not math.isclose(g["gap"], g["val_ppl"] / g["train_ppl"]):
            raise Failed(f"the entry at step {g['step']} is {g}; val_ppl is the val row's and gap = val_ppl / "
                         "train_ppl")
    if list(gap([{"step": 0, "val_loss": 1.0, "val_ppl": math.e}], window=2)):
        raise Failed("a log with a val row and no train row gave an entry; there is no train PPL to compare with")


@CHECKS.check("overfitting_onset names the step of the lowest val PPL when val ended clearly above it",
              hint="find the entry with the lowest val_ppl (the earliest on a tie); return its step when the last "
                   "val_ppl is more than `tolerance` above it (relative), else None")
def _onset(lab):
    curves = lab.module(CURVES)
    gaps = list(curves.train_val_gap(ROWS, window=2))
    got = curves.overfitting_onset(gaps)
    if got != 40:
        mistake = {80: " (the last step)", 60: " (the first validation after the best)"}.get(got, "")
        raise Failed(f"val PPL 60, 9, 4, 5, 7 at steps 0–80: onset is {got}{mistake}; the lowest val PPL, 4, was "
                     "at step 40 and the run ended 75 % above it")
    tie = [{"step": s, "train_ppl": 1.0, "val_ppl": v, "gap": v} for s, v in ((0, 3.0), (1, 2.0), (2, 2.0),
                                                                              (3, 2.5))]
    if curves.overfitting_onset(tie) != 1:
        raise Failed(f"val PPL 3, 2, 2, 2.5: onset is {curves.overfitting_onset(tie)}; on a tie the earliest "
                     "lowest step, 1, is where val stopped improving")


@CHECKS.check("overfitting_onset is None when val ended within the tolerance of its best",
              hint="compare the LAST val_ppl with the lowest one: more than `tolerance` above it (relative, 0.05 "
                   "= 5 %) is overfitting; a small wobble is not")
def _no_onset(lab):
    onset = lab.module(CURVES).overfitting_onset
    steady = [{"step": s, "train_ppl": 1.0, "val_ppl": v, "gap": v} for s, v in ((0, 9.0), (1, 4.0), (2, 4.1))]
    if onset(steady) is not None:
        raise Failed(f"val PPL 9, 4, 4.1 (2.5 % above the best): onset is {onset(steady)}; expected None")
    if onset(steady, tolerance=0.01) != 1:
        raise Failed(f"with tolerance 0.01, val PPL 9, 4, 4.1 (2.5 % above the best) gives {onset(steady, 0.01)}; "
                     "expected 1")
    if onset([]) is not None:
        raise Failed("overfitting_onset([]) should be None")


# ------------------------------------------------------------------------------------------------ run folder


@CHECKS.check("run folder: the overfitting run finished and used these curves",
              hint="train experiments/19-overfitting/config.yaml into the run folder (the workspace README has "
                   "the command)")
def _run_done(lab):
    check_manifest(lab, files=(CURVES,))
    if not read_run(lab, "dashboard.png").startswith(b"\x89PNG\r\n\x1a\n"):
        raise Failed("dashboard.png is not a PNG image")


@CHECKS.check("run folder: it overfits: val PPL ends well above its best while train PPL keeps falling",
              hint="fewer training verbs and a longer run overfit (the lab's config); read dashboard.png and the "
                   "'Train vs val' section of report.md", needs=(_run_done,))
def _run_overfits(lab):
    gaps = train_val_gap(read_run(lab, "train_log.jsonl"))
    onset = overfitting_onset(gaps, tolerance=0.25)
    if onset is None:
        raise Failed("val PPL ended within 25 % of its best: this run does not overfit")
    at_onset = next(g for g in gaps if g["step"] == onset)
    if not gaps[-1]["train_ppl"] < at_onset["train_ppl"]:
        raise Failed(f"train PPL did not keep falling after step {onset}: the run got worse everywhere, which is "
                     "not overfitting")
    if "(overfitting)" not in read_run(lab, "report.md").decode("utf-8"):
        raise Failed("report.md's 'Train vs val' section does not say the run overfits")
