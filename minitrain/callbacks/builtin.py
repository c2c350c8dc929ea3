"""The callbacks a config names by type (docs/callbacks.md): checkpoint, lr_monitor, gradient_monitor,
sample_predictions. Each acts at its trigger (base.Triggered) and only watches: the numbers a run computes are
those of the same run without it.

    Checkpointer(trigger="epoch_end", save_best=True)   step checkpoints at each epoch end; best.safetensors by
                                                        metric, judged at every validation
    LRMonitor(groups=[("transformer.h.*", 0.5)])        rows {step, lr, lr/<pattern>}: the rate each group used
    GradientMonitor(interval=100, histograms=...)       rows {step, grad_norm/<parameter>}; histograms to the
                                                        tracker (TensorBoard) or histograms/step-<N>.png
    SamplePredictions(model, tokenizer, records, 10)    greedy answers to held-out prompts: samples.jsonl, the
                                                        progress display, the tracker, and report.md (the final model's)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.callbacks.callback import Context, Triggered
from minitrain.common.figures import save_figure, subplots
from minitrain.common.io import append_line
from minitrain.evaluation.metrics import answer_prompt, greedy_decode
from minitrain.models.sampling import next_log_probs_fn


class Checkpointer(Triggered):
    """Saves a step checkpoint at its trigger; with save_best, keeps checkpoints/best.safetensors at the best
    `metric` (mode min or max) seen at a validation."""

    def __init__(self, trigger: str = "epoch_end", interval: int = 1, save_best: bool = False,
                 metric: str = "val_loss", mode: str = "min") -> None:
        super().__init__(trigger, interval)
        self.save_best, self.metric, self.mode = save_best, metric, mode
        self.best: float | None = None

    def act(self, ctx: Context) -> None:
        ctx.save_checkpoint()

    def on_validation_end(self, ctx: Context) -> None:
        super().on_validation_end(ctx)
        value = ctx.metrics.get(self.metric)
        if not self.save_best or value is None:
            return
        if self.best is None or (value < self.best if self.mode == "min" else value > self.best):
            self.best = value
            ctx.save_checkpoint(best=True)

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.best = state.get("best")


class LRMonitor(Triggered):
    """Logs the learning rate each step used: `lr`, and `lr/<pattern>` for each optimizer group that scales it."""

    def __init__(self, trigger: str = "step", interval: int = 1,
                 groups: Sequence[tuple[str, float]] = ()) -> None:
        super().__init__(trigger, interval)
        self.groups = list(groups)

    def act(self, ctx: Context) -> None:
        lr = ctx.metrics["lr"]
        ctx.log({"lr": lr, **{f"lr/{pattern}": lr * scale for pattern, scale in self.groups}})


class GradientMonitor(Triggered):
    """Logs each parameter's gradient L2 norm (`grad_norm/<name>`, as the update used it: after clipping); with
    `histograms`, also each gradient's histogram, to `tracker` when it keeps histograms, else as one PNG per
    step in `png_dir`."""

    def __init__(self, trigger: str = "step", interval: int = 100, histograms: bool = False, tracker: Any = None,
                 png_dir: str | Path | None = None) -> None:
        super().__init__(trigger, interval)
        self.histograms, self.tracker = histograms, tracker
        self.png_dir = Path(png_dir) if png_dir is not None else None

    def act(self, ctx: Context) -> None:
        gradients = ctx.gradients()
        ctx.log({f"grad_norm/{name}": math.sqrt(float(np.dot(g.ravel().astype(np.float64), g.ravel())))
                 for name, g in gradients.items()})
        if not self.histograms:
            return
        kept = [self.tracker is not None and self.tracker.log_histogram(f"grad/{name}", g, ctx.step)
                for name, g in gradients.items()]
        if not all(kept) and self.png_dir is not None:
            plot_histograms(self.png_dir / f"step-{ctx.step}.png", gradients, f"gradients after step {ctx.step}")


def plot_histograms(path: Path, arrays: Mapping[str, np.ndarray], title: str, bins: int = 50) -> None:
    """One small histogram per array (log-scaled counts), in a grid, written atomically as a PNG."""
    columns = 4
    rows = max(1, math.ceil(len(arrays) / columns))
    fig, axes = subplots(rows, columns, figsize=(4 * columns, 2.4 * rows), dpi=80, squeeze=False)
    for ax, (name, values) in zip(axes.flat, arrays.items(), strict=False):
        ax.hist(np.asarray(values, dtype=np.float64).ravel(), bins=bins, color="tab:blue")
        ax.set_yscale("log")
        ax.set_title(name, fontsize=7)
        ax.tick_params(labelsize=6)
    for ax in axes.flat[len(arrays):]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)


def prompt_and_answer(record: Mapping[str, Any]) -> tuple[str, str]:
    """A verb record's prompt (`caminar|P1|`) and form; a plain line's first half and the rest."""
    text = record["text"]
    if "form" in record:
        return answer_prompt(text), record["form"]
    half = len(text) // 2
    return text[:half], text[half:]


class SamplePredictions(Triggered):
    """Greedy answers of the model to `num_samples` held-out prompts, spread evenly over `records`: a row per
    prompt in `run_dir/samples.jsonl`, a line on the progress display, text to the tracker; report.md shows the final
    model's answers."""

    def __init__(self, model: Any, tokenizer: Any, records: Sequence[Mapping[str, Any]], num_samples: int = 10,
                 trigger: str = "epoch_end", interval: int = 1, max_new_tokens: int | None = None,
                 run_dir: str | Path | None = None, tracker: Any = None) -> None:
        super().__init__(trigger, interval)
        picked = np.unique(np.linspace(0, len(records) - 1, min(num_samples, len(records))).round().astype(int))
        self.cases = [prompt_and_answer(records[i]) for i in picked]
        self.model, self.tokenizer, self.tracker = model, tokenizer, tracker
        self.max_new_tokens = max_new_tokens or model.config["max_seq_len"]
        self.path = Path(run_dir) / "samples.jsonl" if run_dir is not None else None

    def predict(self) -> list[dict[str, Any]]:
        """{prompt, expected, predicted, correct} for each held-out prompt, decoded greedily now."""
        tok = self.tokenizer
        log_probs = next_log_probs_fn(self.model, tok.pad_id)
        known = tok.vocab_size  # ids past the vocabulary stand for no character
        prefixes = [[tok.bos_id, *tok.encode(prompt)] for prompt, _ in self.cases]
        outputs = greedy_decode(lambda p: log_probs(p)[:, :known], prefixes, tok.eos_id, self.max_new_tokens)
        return [{"prompt": prompt, "expected": expected, "predicted": tok.decode(out),
                 "correct": tok.decode(out) == expected} for (prompt, expected), out in zip(self.cases, outputs,
                                                                                           strict=True)]

    def act(self, ctx: Context) -> None:
        samples = self.predict()
        if self.path is not None:
            for sample in samples:
                append_line(self.path, json.dumps({"step": ctx.step, **sample}, ensure_ascii=False))
        right = sum(s["correct"] for s in samples)
        ctx.info(f"samples at step {ctx.step} ({right}/{len(samples)} right): " + "  ".join(
            f"{s['prompt']}{s['predicted']}{'' if s['correct'] else ' ✗'}" for s in samples))
        if self.tracker is not None:
            self.tracker.log_text("samples", markdown_table(samples), ctx.step)

    def report_lines(self) -> list[str]:
        samples = self.predict()
        right = sum(s["correct"] for s in samples)
        return [f"## Sample predictions of the final model ({right}/{len(samples)} right)", "",
                *markdown_table(samples).splitlines()]


def markdown_table(samples: Sequence[Mapping[str, Any]]) -> str:
    def cell(text: str) -> str:
        return "`" + text.replace("|", "\\|") + "`" if text else "—"

    lines = ["| prompt | expected | predicted | right |", "|---|---|---|---|"]
    lines += [f"| {cell(s['prompt'])} | {cell(s['expected'])} | {cell(s['predicted'])} | "
              f"{'✓' if s['correct'] else '✗'} |" for s in samples]
    return "\n".join(lines)
