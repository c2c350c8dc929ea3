"""Benchmark: one full training step of MiniGPT (forward, backward, clip, AdamW), minitrain against PyTorch eager.

    python benchmarks/bench_step.py                   # lab-01 and scaled configs; one JSON line per result
    python benchmarks/bench_step.py --configs lab     # only the lab-01 config
    python benchmarks/bench_step.py --quick           # fewer steps (a smoke run, numbers are rough)

A step is what the training loop does per batch: zero the gradients, forward with the loss, backward, clip the
global gradient norm to 1.0, AdamW (the lab's settings: lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on
matrices). The batch is synthetic but shaped like the corpus: right-padded lines of random length with the loss on
their last characters, so the padding mask and the loss mask are exercised.

Timing: warm-up steps first (numba compiles or loads its cache, the allocator settles), then rounds. In each round
minitrain runs `steps` steps, then each PyTorch variant runs `steps` steps, in the same process, so background load
(the machine may be shared) hits all of them alike. Reported: the median step time over all rounds, tokens/s
(B·T positions per step, padding included), and the ratio minitrain / best PyTorch variant. The PyTorch variants
are 1 and 2 threads, each with its default AdamW and with `fused=True`; the baseline is the fastest of them.
minitrain runs with `minitrain.runtime.configure` (its BLAS thread rule and allocator setting); its peak RSS is
measured in a separate process without torch. The 1-minute load average is printed too: on a shared machine
other processes slow every contestant, which the same-process alternation keeps fair but not quiet. PyTorch is
used only if it is importable; it is never a dependency of minitrain.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

from minitrain.artifacts import peak_rss_mb
from minitrain.clip import clip_grad_norm_
from minitrain.model import MiniGPT
from minitrain.optim import AdamW
from minitrain.runtime import blas_threads_for, configure, set_blas_threads

CONFIGS = {
    "lab": dict(model=dict(n_layer=2, n_head=4, d_model=64, d_ff=256, vocab_size=64, max_seq_len=32), batch=8,
                warmup=30, rounds=12, steps=40),
    "scaled": dict(model=dict(n_layer=6, n_head=8, d_model=256, d_ff=1024, vocab_size=64, max_seq_len=128),
                   batch=16, warmup=3, rounds=5, steps=3),
}  # fmt: skip
ADAMW = dict(lr=3e-4, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)
CLIP = 1.0


def synthetic_batch(batch: int, time_steps: int, vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Right-padded lines of random length (half to all of T), ids in [3, V); the loss on each line's last third."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(time_steps // 2, time_steps + 1, size=batch)
    positions = np.arange(time_steps)[None, :]
    real = positions < lengths[:, None]
    tokens = rng.integers(3, vocab, size=(batch, time_steps + 1))
    return {
        "input": np.where(real, tokens[:, :-1], 0),
        "target": np.where(real, tokens[:, 1:], 0),
        "attn_pad_mask": real,
        "loss_mask": real & (positions >= (2 * lengths[:, None]) // 3),
    }


def minitrain_step_fn(model: MiniGPT, batch: dict[str, np.ndarray]) -> Callable[[], object]:
    optimizer = AdamW(model.trainable_parameters(), buffer=model.pack_parameters(), **ADAMW)

    def step() -> object:
        model.zero_grad()
        _, loss = model(batch["input"], batch["target"], batch["attn_pad_mask"], batch["loss_mask"])
        loss.backward()
        clip_grad_norm_(model.buffer, CLIP)
        optimizer.step()
        return loss

    return step


def timed(step: Callable[[], object], n: int, out: list[float]) -> None:
    for _ in range(n):
        start = time.perf_counter()
        step()
        out.append(time.perf_counter() - start)


def rss_alone(name: str) -> float:
    """Peak RSS (MB) of a fresh process that imports minitrain and runs a few steps of config `name`: this
    process's own peak would include PyTorch."""
    command = [sys.executable, os.path.abspath(__file__), "--rss-only", name]
    return float(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def print_rss_alone(name: str) -> None:
    spec = CONFIGS[name]
    cfg = spec["model"]
    batch = synthetic_batch(spec["batch"], cfg["max_seq_len"], cfg["vocab_size"])
    configure(cfg["d_model"], spec["batch"] * cfg["max_seq_len"])
    timed(minitrain_step_fn(MiniGPT(**cfg, rng=0), batch), 5, [])
    print(peak_rss_mb())  # MiB, from VmHWM: the parent's peak is not carried over


def bench_config(name: str, spec: dict, torch_variants: list[tuple[int, bool]], quick: bool) -> dict:
    cfg, batch_size = spec["model"], spec["batch"]
    warmup, rounds, steps = (2, 3, max(2, spec["steps"] // 4)) if quick else (spec["warmup"], spec["rounds"],
                                                                              spec["steps"])  # fmt: skip
    batch = synthetic_batch(batch_size, cfg["max_seq_len"], cfg["vocab_size"])
    model = MiniGPT(**cfg, rng=0)
    initial_state = model.state_dict()
    _, loss0 = model(batch["input"], batch["target"], batch["attn_pad_mask"], batch["loss_mask"])
    threads = blas_threads_for(cfg["d_model"], batch_size * cfg["max_seq_len"])
    settings = configure(cfg["d_model"], batch_size * cfg["max_seq_len"])
    ours = minitrain_step_fn(model, batch)
    timed(ours, warmup, [])
    times: dict[str, list[float]] = {"minitrain": []}
    timed(ours, steps, times["minitrain"])
    result = {"config": name, **cfg, "batch": batch_size, **settings, "minitrain_peak_rss_mb": rss_alone(name),
              "load_average_1min": round(os.getloadavg()[0], 2)}  # fmt: skip

    runners = {}
    if torch_variants:
        import torch
        from torch_minigpt import TorchMiniGPT, first_loss, make_optimizer, torch_step_fn

        for threads_t, fused in torch_variants:
            torch.set_num_threads(threads_t)
            tmodel = TorchMiniGPT(**cfg)
            tmodel.load_gpt2_state_dict(initial_state)
            result["torch_first_loss_diff"] = abs(first_loss(tmodel, batch) - float(loss0.item()))
            adamw = {"lr": ADAMW["lr"], "betas": (ADAMW["beta1"], ADAMW["beta2"]), "eps": ADAMW["eps"],
                     "weight_decay": ADAMW["weight_decay"]}  # fmt: skip
            step = torch_step_fn(tmodel, make_optimizer(tmodel, fused, **adamw), batch, CLIP)
            label = f"torch_{threads_t}t" + ("_fused" if fused else "")
            runners[label] = (threads_t, step)
            timed(step, warmup, [])
            times[label] = []

    for _ in range(rounds):
        set_blas_threads(threads)
        timed(ours, steps, times["minitrain"])
        for label, (threads_t, step) in runners.items():
            torch.set_num_threads(threads_t)
            timed(step, steps, times[label])

    tokens = batch_size * cfg["max_seq_len"]
    for label, ts in times.items():
        ms = float(np.median(ts)) * 1e3
        result[f"{label}_ms"] = round(ms, 3)
        result[f"{label}_tokens_per_s"] = round(tokens / ms * 1e3)
    if runners:
        best = min(runners, key=lambda label: result[f"{label}_ms"])
        result["torch_best"] = best
        result["ratio_minitrain_over_torch"] = round(result["minitrain_ms"] / result[f"{best}_ms"], 3)
    result["steps_timed_each"] = len(times["minitrain"])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="lab,scaled", help="comma-separated: lab, scaled")
    parser.add_argument("--quick", action="store_true", help="few steps: a smoke run, not a measurement")
    parser.add_argument("--no-torch", action="store_true", help="time minitrain only")
    parser.add_argument("--rss-only", metavar="CONFIG", help=argparse.SUPPRESS)  # used by rss_alone()
    args = parser.parse_args(argv)
    if args.rss_only:
        print_rss_alone(args.rss_only)
        return
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown config(s) {unknown}; choose from {list(CONFIGS)}")
    have_torch = not args.no_torch and importlib.util.find_spec("torch") is not None
    variants = [(1, False), (1, True), (2, False), (2, True)] if have_torch else []
    if not have_torch:
        print("torch is not importable: timing minitrain only", file=sys.stderr)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    rows = []
    for name in names:
        result = bench_config(name, CONFIGS[name], variants, args.quick)
        print(json.dumps(result), flush=True)
        rows.append(result)
    header = f"{'config':8s} {'minitrain ms':>13s} {'tokens/s':>10s} {'torch best ms':>14s} {'ratio':>6s}"
    print(f"\n{header}  torch variant")
    for r in rows:
        torch_ms = f"{r[r['torch_best'] + '_ms']:14.2f}" if "torch_best" in r else f"{'-':>14s}"
        ratio = f"{r['ratio_minitrain_over_torch']:6.2f}" if "torch_best" in r else f"{'-':>6s}"
        print(f"{r['config']:8s} {r['minitrain_ms']:13.2f} {r['minitrain_tokens_per_s']:10d} {torch_ms} {ratio}  "
              f"{r.get('torch_best', '')}")  # fmt: skip
    for r in rows:
        print(f"{r['config']}: minitrain alone peak RSS {r['minitrain_peak_rss_mb']:.0f} MB, BLAS threads "
              f"{r['blas_threads']}; first-loss difference to PyTorch {r.get('torch_first_loss_diff', '-')}")


if __name__ == "__main__":
    main()
