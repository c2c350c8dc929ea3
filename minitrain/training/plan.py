"""Sizing and planning a run without training it: the steps a duration budget allows (from a few timed steps on
throw-away objects), and the dry run (`minitrain train --dry-run`, from one timed forward/backward)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from minitrain.common.runtime import configure, get_blas_threads, set_blas_threads
from minitrain.config import Config
from minitrain.config.datacheck import DataSummary
from minitrain.loop import evaluate
from minitrain.training import artifacts
from minitrain.training.engine import apply_update, step_gradients
from minitrain.training.finetune import four_bit_weights
from minitrain.training.parts import Parts, build_parts, parameter_counts, validator_for
from minitrain.training.text_run import complete_config, data_summary


def _time_steps(parts: Parts, cfg: Config, n: int = 5, warmup: int = 2) -> tuple[float, float]:
    """(seconds per training step, seconds per validation pass), measured on `parts` (which it changes)."""
    t = cfg.training
    timings = []
    for _ in range(warmup + n):
        start = time.perf_counter()
        batches = [next(parts.batcher) for _ in range(t.grad_accumulation)]

        def gradients(batches: list = batches) -> float:
            return step_gradients(parts.model, parts.optimizer, batches, cfg.clip_norm, parts.task)[0]

        gradients()
        apply_update(parts.optimizer, gradients)
        parts.scheduler.step()
        timings.append(time.perf_counter() - start)
    start = time.perf_counter()
    (validator_for(cfg, parts) or (lambda model: evaluate(model, parts.val_batches)))(parts.model)
    return float(np.median(timings[warmup:])), time.perf_counter() - start


def configure_runtime(cfg: Config) -> dict[str, Any]:
    """BLAS threads and allocator settings (minitrain.common.runtime) as `runtime.threads` asks: `rule` by model
    size, a fixed count, or `measure`, which starts from the rule's count until the thread choice
    (callbacks/thread_choice.py) has timed its first steps. Returns what is in force, for the manifest."""
    settings = configure(cfg.model.width, cfg.training.batch_size * cfg.model.max_seq_len)
    threads = cfg.runtime.threads
    if isinstance(threads, int):
        set_blas_threads(threads)
        settings["blas_threads"] = get_blas_threads()
    elif threads == "measure":
        settings["blas_threads"] = "measure"
    return settings


def resolve_total_steps(cfg: Config, summary: DataSummary) -> int:
    """training.total_steps, or epochs × steps per epoch, or (duration) as many steps as fit in the budget."""
    steps = cfg.resolve_steps(summary.steps_per_epoch)
    if steps is not None:
        return steps
    # A duration run: time a few steps on throw-away objects to size the schedule; the loop still stops on
    # the clock if the estimate was optimistic.
    warmup = cfg.scheduler.warmup_steps
    per_step, per_val = _time_steps(build_parts(cfg, warmup + 10, text=summary.text), cfg)
    per_step += per_val / cfg.resolve_val_every(summary.steps_per_epoch)
    return max(warmup + 1, int(cfg.duration_seconds / per_step))


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _counts(model: Any) -> dict[str, Any]:
    """`parameter_counts`, the 4-bit base weights of a QLoRA model counted among the parameters (frozen) and told
    apart: "N parameters (B bytes as NF4)"."""
    counts = parameter_counts(model)
    held, nbytes, book = four_bit_weights(model)
    if not held:
        return counts
    total, trainable = counts["parameters"] + held, counts.get("trainable_parameters", counts["parameters"])
    return {"parameters": total, "trainable_parameters": trainable, "frozen_parameters": total - trainable,
            "base_4bit": f"{held:,} parameters ({nbytes:,} bytes as {book})"}


def plan_run(cfg: Config, summary: DataSummary | None = None, say: Callable[[str], None] = _say) -> dict[str, Any]:
    """The dry run: what `run_training` would do, writing nothing. The time is estimated from one measured forward
    and backward of one micro-batch (t): a step is t × grad_accumulation, a validation pass t / 3 per batch_size
    validation rows (a forward is about a third of a forward and backward). `say` is told what it does before each
    slow part.

    `summary` is `check_data(cfg)`'s result when the caller has already run the data checks.
    """
    cfg = complete_config(cfg)
    if summary is None:
        say("dry run: checking the data")
        summary = data_summary(cfg)
    configure_runtime(cfg)
    t = cfg.training
    val_every = cfg.resolve_val_every(summary.steps_per_epoch)
    steps = cfg.resolve_steps(summary.steps_per_epoch)
    say("dry run: building the model, optimizer and batches" + (" (loading the base)" if cfg.on_pretrained_base
                                                                   else ""))
    parts = build_parts(cfg, max(steps or 1, cfg.resolve_warmup(steps or 1) + 10), text=summary.text)
    say(f"dry run: timing one forward/backward of one micro-batch ({t.batch_size} rows)")
    start = time.perf_counter()
    step_gradients(parts.model, parts.optimizer, [next(parts.batcher)], cfg.clip_norm, parts.task)
    measured = time.perf_counter() - start
    per_step, per_val = measured * t.grad_accumulation, measured / 3 * parts.val_batches.num_records / t.batch_size
    if steps is None:  # a duration run: as many steps as fit in the budget (the run itself times 7 steps)
        steps = max(cfg.scheduler.warmup_steps + 1, int(cfg.duration_seconds / (per_step + per_val / val_every)))
    per_step_records = t.batch_size * t.grad_accumulation
    split = parts.train_split
    if parts.table is None:
        real = float(np.count_nonzero(split.attn_pad_mask, axis=1).mean()) * per_step_records
        counted = float(split.loss_mask.sum(axis=1).mean()) * per_step_records
        per_step_size = {"tokens_per_step": {"max": cfg.tokens_per_step_max, "real_mean": round(real, 1),
                                             "counted_mean": round(counted, 1)}}
    else:
        per_step_size = {"rows_per_step": per_step_records, "data": parts.table.info}
    offset = int(t.val_every_epoch)  # the engine's rule: (step + offset) % val_every == 0, and the last step
    n_val = len(range(-offset % val_every, steps, val_every)) + (0 if (steps - 1 + offset) % val_every == 0 else 1)
    estimate = steps * per_step + n_val * per_val
    return {
        **_counts(parts.model),
        **per_step_size,
        "steps": steps,
        "epochs": round(steps * per_step_records / parts.batcher.num_records, 3),
        "ms_per_step": round(1000 * per_step, 2),
        "validations": n_val,
        "estimated_wall": f"{estimate:.0f} s" + (f" (budget {cfg.training.duration})" if t.duration else ""),
        "estimated_from": f"one forward/backward of one micro-batch, measured: {measured:.3f} s (its first call, "
                          "so the estimate errs high)",
        "output_dir": cfg.output.dir,
        "models_dir": str(artifacts.models_dir(cfg.output.models_dir, cfg.output_dir)),
        **({"publish_to": cfg.publish.repo} if cfg.publish is not None else {}),
    }
