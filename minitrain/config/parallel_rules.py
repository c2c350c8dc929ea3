"""Rules about `runtime.data_parallel` (minitrain/parallel/), a `RuleBook` like the others (minitrain/config/rule.py).

A worker computes whole micro-batches of a language model's loss with the model rebuilt from its config, so what a
worker cannot reproduce bit for bit is refused: a worker count that does not divide the step's micro-batches,
dropout (its masks come from the one training RNG, drawn in micro-batch order), and the runs whose loss or model
is more than the model's config (adapters, QAT, teachers, tables).
"""

from __future__ import annotations

import os

from minitrain.config.problems import Problem
from minitrain.config.rule import RuleBook
from minitrain.models.registry import LANGUAGE_MODELS

RULES = RuleBook()
rule = RULES.rule

_WHERE = ("runtime", "data_parallel", "workers")


@rule("runtime", "training")
def _workers_divide_the_micro_batches(sections, raw):
    """runtime.data_parallel.workers must divide training.grad_accumulation: each worker computes
    grad_accumulation / workers micro-batches of every step (workers 2 with grad_accumulation 2: one each)."""
    parallel = sections["runtime"].data_parallel
    k = sections["training"].grad_accumulation
    if parallel is not None and k % parallel.workers:
        yield Problem(_WHERE, f"{parallel.workers} workers do not divide training.grad_accumulation {k}: each worker "
                              f"computes grad_accumulation / workers micro-batches of a step; set "
                              f"grad_accumulation to a multiple of {parallel.workers}")


@rule("runtime", "model")
def _workers_draw_no_dropout(sections, raw):
    """runtime.data_parallel needs model.dropout 0: the masks are drawn from the one training RNG in micro-batch
    order, which workers computing their micro-batches at once cannot follow bit for bit."""
    if sections["runtime"].data_parallel is not None and sections["model"].dropout > 0:
        yield Problem(_WHERE, f"data-parallel workers need model.dropout 0 (got {sections['model'].dropout:g}): "
                              "dropout masks come from the one training RNG in micro-batch order, so workers would "
                              "change the run's bytes; use grad_accumulation alone for a run with dropout")


@rule("runtime", "model", "lora", "quantize", "distillation")
def _workers_train_plain_language_models(sections, raw):
    """runtime.data_parallel trains a language model built from model: alone: not with LoRA adapters, QAT,
    distillation teachers or a table's sequential model."""
    if sections["runtime"].data_parallel is None:
        return
    refused = [name for name, on in (("lora.enabled", sections["lora"].enabled),
                                     ("quantize.qat.enabled", sections["quantize"].qat.enabled),
                                     ("distillation.enabled", sections["distillation"].enabled),
                                     (f"model.type {sections['model'].type}",
                                      sections["model"].type not in LANGUAGE_MODELS)) if on]
    if refused:
        yield Problem(_WHERE, f"data-parallel workers rebuild the model from model: alone, so they cannot train "
                              f"with {', '.join(refused)} yet; leave runtime.data_parallel out")


@rule("runtime")
def _measured_workers_are_local(sections, raw):
    """runtime.threads measure with runtime.data_parallel needs backend local:
    the workers are then a candidate of the timed choice, which starts and stops them in the middle of a run."""
    runtime = sections["runtime"]
    if runtime.threads == "measure" and runtime.data_parallel is not None and runtime.data_parallel.backend != "local":
        yield Problem(("runtime", "data_parallel", "backend"),
                      "runtime.threads measure chooses between one process and local workers, which it starts and "
                      "stops mid-run; use backend local, or a fixed runtime.threads with backend ray")


@rule("runtime")
def _local_workers_fit_the_cores(sections, raw):
    """runtime.data_parallel.workers (backend local) at most this machine's usable cores, unless oversubscribe:
    each worker is a process holding a model, and more of them than cores only take turns."""
    parallel = sections["runtime"].data_parallel
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if parallel is not None and parallel.backend == "local" and parallel.workers > cores and not parallel.oversubscribe:
        yield Problem(_WHERE, f"{parallel.workers} local workers on {cores} usable cores: each is a process holding "
                              f"a model, and more than the cores only take turns; use at most {cores}, or set "
                              "runtime.data_parallel.oversubscribe: true")
