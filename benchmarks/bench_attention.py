"""The causal attention on the scaled config, the batch whole against the batch in slices on the cores: before/after
in one run.

    python benchmarks/bench_attention.py              # attention alone, then the whole scaled step
    python benchmarks/bench_attention.py --quick      # fewer repeats (±15 %)

"Before" is the attention done whole on the calling thread (`batch_split.SPLIT_MACS` raised out of reach: the
code path every batch took before the split), "after" the default (slices of the batch on a thread each, from
2²³ multiply-adds). Each measurement alternates the two, block by block, so background load on a shared machine
hits both alike; the figure is the median. Variants with OpenBLAS's idle workers left spinning (`keep_workers`)
show what stopping them buys. Before timing, one step of each on the same weights and batch is checked for the
same bytes (loss and every parameter). Prints one JSON line, then a table; the 1-minute load average at the start
and at the end is in both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from minitrain.autograd.kernels import active, batch_split
from minitrain.common import runtime
from minitrain.common.runtime import configure
from minitrain.models.minigpt import MiniGPT

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_setup import CONFIGS, minitrain_step_fn, synthetic_batch  # beside this file, hence the path above


@contextmanager
def variant(name: str) -> Iterator[None]:
    """before: the batch whole; after: in slices; after_keep_workers: in slices, OpenBLAS's workers left spinning."""
    threshold, stop = batch_split.SPLIT_MACS, runtime.stop_blas_workers
    if name == "before":
        batch_split.SPLIT_MACS = 2**62
    if name == "after_keep_workers":
        batch_split.stop_blas_workers = lambda: False
    try:
        yield
    finally:
        batch_split.SPLIT_MACS, batch_split.stop_blas_workers = threshold, stop


def alternate(run: Callable[[], object], names: list[str], rounds: int, each: int) -> dict[str, float]:
    """Median seconds of `run` under each variant, `rounds` rounds of `each` timed calls per variant."""
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for name in names:
            with variant(name):
                run()  # not timed: lets the previous variant's threads settle
                for _ in range(each):
                    start = time.perf_counter()
                    run()
                    times[name].append(time.perf_counter() - start)
    return {name: float(np.median(ts)) for name, ts in times.items()}


def step_setup() -> tuple[Callable[[], Callable[[], object]], dict]:
    spec = CONFIGS["scaled"]
    cfg = spec["model"]
    batch = synthetic_batch(spec["batch"], cfg["max_seq_len"], cfg["vocab_size"])
    initial = MiniGPT(**cfg, rng=0).state_dict()
    configure(cfg["d_model"], spec["batch"] * cfg["max_seq_len"])

    def fresh() -> tuple[MiniGPT, Callable[[], object]]:
        model = MiniGPT(**cfg, rng=0)
        model.load_state_dict({k: v.copy() for k, v in initial.items()})
        return model, minitrain_step_fn(model, batch)

    return fresh, batch


def same_bytes(fresh: Callable) -> bool:
    """One step whole and one in slices, from the same weights: equal loss and parameters, byte for byte?"""
    results = []
    for name in ("before", "after"):
        model, step = fresh()
        with variant(name):
            loss = step()
        results.append([np.asarray(loss.data).tobytes()] + [v.tobytes() for v in model.state_dict().values()])
    return results[0] == results[1]


def attention_alone(rounds: int, each: int) -> dict[str, float]:
    spec = CONFIGS["scaled"]
    cfg = spec["model"]
    rng = np.random.default_rng(0)
    batch, time_steps, width, n_head = spec["batch"], cfg["max_seq_len"], cfg["d_model"], cfg["n_head"]
    qkv = rng.standard_normal((batch, time_steps, 3 * width)).astype(np.float32)
    dy = rng.standard_normal((batch, time_steps, width)).astype(np.float32)
    key_mask = synthetic_batch(batch, time_steps, cfg["vocab_size"])["attn_pad_mask"]

    def forward_backward() -> None:
        _, probs = active.attention_forward(qkv, n_head, key_mask, None)
        active.attention_backward(qkv, probs, dy, None)

    return alternate(forward_backward, ["before", "after", "after_keep_workers"], rounds, each)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    fresh, _ = step_setup()
    result: dict[str, object] = {"cores": batch_split.workers(), "load_average_start": round(load_start, 2)}
    result["same_bytes"] = same_bytes(fresh)
    alone = attention_alone(rounds=3 if args.quick else 8, each=3 if args.quick else 5)
    _, step = fresh()
    for _ in range(2):
        step()  # warm-up: numba's cache, the allocator
    whole = alternate(step, ["before", "after", "after_keep_workers"], rounds=3 if args.quick else 6, each=2)
    for name in alone:
        result[f"attention_{name}_ms"] = round(alone[name] * 1e3, 2)
        result[f"step_{name}_ms"] = round(whole[name] * 1e3, 1)
    result["attention_after_over_before"] = round(alone["after"] / alone["before"], 3)
    result["step_after_over_before"] = round(whole["after"] / whole["before"], 3)
    result["load_average_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result))
    print(f"scaled config, {result['cores']} cores, load average {result['load_average_start']} → "
          f"{result['load_average_end']}; same bytes whole and in slices: {result['same_bytes']}")  # fmt: skip
    print("| variant | attention fwd + bwd, one layer (ms) | whole step (ms) |")
    print("| --- | --- | --- |")
    for name in alone:
        print(f"| {name} | {result[f'attention_{name}_ms']} | {result[f'step_{name}_ms']} |")
    print(f"| after ÷ before | {result['attention_after_over_before']} | {result['step_after_over_before']} |")


if __name__ == "__main__":
    main()
