"""dashboard.png: the three curves that tell a healthy run from an overfitting or unstable one (lab 03).

    perplexity      train (per batch, faint; smoothed over the last `window` logged losses), val, the n-gram
                    baseline dashed; the best validation marked, and where overfitting began when it did
    gradient norm   before clipping, per logged step (log scale); the clipping threshold dashed
    learning rate   per logged step: warm-up, then the schedule's decay

The smoothing, the train/val gap and the onset of overfitting come from `minitrain/monitor/curves.py` (lab 03),
so a student's own curves.py (the course seam) draws the student's dashboard. Every run folder gets one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from minitrain.common.figures import save_figure, subplots
from minitrain.evaluation.metrics import perplexity
from minitrain.monitor.curves import moving_average, overfitting_onset, train_val_gap
from minitrain.training.artifacts import baseline_line, log_axis

SMOOTHING_WINDOW = 10  # logged train rows averaged into the smoothed train curve (10 rows = 100 steps in lab 01)


def plot_dashboard(png_path: str | os.PathLike, rows: Sequence[Mapping[str, Any]], *, baseline_ppl: float | None = None,
                   clip_norm: float | None = None, window: int = SMOOTHING_WINDOW,
                   val_label: str = "val (held-out verbs)") -> None:
    """Draw the dashboard of a train_log.jsonl's `rows` into `png_path` (see the module docstring); `val_label`
    names what the val split holds."""
    train = [r for r in rows if "loss" in r]
    steps = [r["step"] for r in train]
    gaps = train_val_gap(rows, window)
    fig, (ppl, norm, lr) = subplots(3, 1, figsize=(8, 9), dpi=100, sharex=True,
                                    gridspec_kw={"height_ratios": [2, 1, 1]})
    if train:
        ppl.plot(steps, [perplexity(r["loss"]) for r in train], color="tab:blue", linewidth=0.6, alpha=0.3,
                 label="train, one batch")
        smoothed = moving_average([r["loss"] for r in train], window)
        ppl.plot(steps, [perplexity(v) for v in smoothed], color="tab:blue", linewidth=1.5,
                 label=f"train, last {window} logged batches")
    if gaps:
        ppl.plot([g["step"] for g in gaps], [g["val_ppl"] for g in gaps], color="tab:orange", linewidth=2,
                 marker="o", markersize=3, label=val_label)
        best = min(gaps, key=lambda g: g["val_ppl"])
        ppl.scatter([best["step"]], [best["val_ppl"]], s=60, color="tab:green", zorder=3,
                    label=f"best val {best['val_ppl']:.3g} (step {best['step']})")
        onset = overfitting_onset(gaps)
        if onset is not None:
            for ax in (ppl, norm, lr):
                ax.axvline(onset, color="tab:red", linestyle=":", linewidth=1.2)
            ppl.plot([], [], color="tab:red", linestyle=":", label=f"val stops improving (step {onset})")
    if baseline_ppl is not None:
        baseline_line(ppl, baseline_ppl)
    log_axis(ppl)
    ppl.set_ylabel("perplexity (log scale)")
    ppl.set_title("Training dashboard")
    ppl.legend(fontsize="small")

    # A log resumed from damaged rows may lack a key on some of them: each panel draws the rows that have its key.
    norms = [r for r in train if "grad_norm" in r]
    norm.plot([r["step"] for r in norms], [r["grad_norm"] for r in norms], color="tab:purple", linewidth=0.8,
              label="before clipping")
    if clip_norm is not None:
        norm.axhline(clip_norm, color="tab:gray", linestyle="--", linewidth=1.2, label=f"clip at {clip_norm:g}")
    log_axis(norm)
    norm.set_ylabel("gradient norm")
    norm.legend(fontsize="small")

    rates = [r for r in train if "lr" in r]
    lr.plot([r["step"] for r in rates], [r["lr"] for r in rates], color="tab:brown", linewidth=1.2)
    lr.set_ylabel("learning rate")
    lr.set_xlabel("step (optimizer updates)")
    lr.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    for ax in (ppl, norm, lr):
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, png_path)
