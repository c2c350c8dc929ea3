"""Benchmark: the lab step (experiments/18-train-mini/config.yaml, 2 micro-batches of 8 lines) in one process
against 2 local data-parallel workers (minitrain/parallel/local.py), and what the workers' step costs beyond one
micro-batch's forward and backward: the handoff (parameters and batches into shared memory), worker 0's own
micro-batch (the training process computes one, minitrain/parallel/local.py), the wait for the other worker after
that (its lag plus the pipe round trip) and the reduction (the ordered sum and the clip).

    python benchmarks/bench_data_parallel.py            # 5 rounds of 10 steps each way (alternating)
    python benchmarks/bench_data_parallel.py --rounds 2
    python benchmarks/bench_data_parallel.py --backend ray   # the workers as actors of a local Ray

Both sides at 1 BLAS thread (the bytes are then the same: tests/parallel/test_data_parallel.py). Rounds alternate the
contestants, so background load on a shared machine hits both alike; medians are printed as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from minitrain.common.runtime import set_blas_threads
from minitrain.config import load_config
from minitrain.loop import train_step
from minitrain.parallel.workers import start_workers
from minitrain.training.parts import build_parts
from minitrain.training.text_run import complete_config

LAB = Path(__file__).resolve().parents[1] / "experiments" / "18-train-mini" / "config.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="steps per contestant per round")
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    args = parser.parse_args()
    os.chdir(LAB.parents[2])  # the config's data paths are relative to the checkout
    cfg = complete_config(load_config(LAB, ["training.grad_accumulation=2", "runtime.threads=1",
                                            "runtime.data_parallel.workers=2",
                                            f"runtime.data_parallel.backend={args.backend}"]))
    set_blas_threads(1)
    one, two = build_parts(cfg, 2000), build_parts(cfg, 2000)
    times: dict[str, list[float]] = {k: [] for k in ("one_process", "two_workers", "micro_batch", "optimizer",
                                                     "handoff", "own", "wait", "reduce")}
    with start_workers(cfg.runtime.data_parallel, two.model, 2, cfg.training.batch_size,
                       two.train_split.input.shape[1]) as workers:
        for round_ in range(args.rounds + 1):  # round 0 warms up (numba's cache, the allocator)
            keep = round_ > 0
            for _ in range(args.steps):
                batches = [next(one.batcher), next(one.batcher)]
                start = time.perf_counter()
                train_step(one.model, one.optimizer, batches, cfg.clip_norm)
                one.optimizer.step()
                done = time.perf_counter()
                train_step(one.model, one.optimizer, batches[:1], cfg.clip_norm)  # one micro-batch alone
                mb = time.perf_counter()
                one.optimizer.step()
                if keep:
                    times["one_process"].append(done - start)
                    times["micro_batch"].append(mb - done)
                    times["optimizer"].append(time.perf_counter() - mb)
            for _ in range(args.steps):
                batches = [next(two.batcher), next(two.batcher)]
                start = time.perf_counter()
                workers.gradients(two.model, batches, cfg.clip_norm)
                two.optimizer.step()
                if keep:
                    times["two_workers"].append(time.perf_counter() - start)
                    for key, seconds in getattr(workers, "seconds", {}).items():  # the local backend's
                        times[key].append(seconds)
    ms = {key: round(1000 * statistics.median(v), 3) for key, v in times.items() if v}
    ideal = ms["micro_batch"] + ms["optimizer"]  # perfect parallelism: one micro-batch's time, then the update
    print(json.dumps({"config": str(LAB.relative_to(LAB.parents[2])), "backend": args.backend,
                      "steps_each": len(times["one_process"]),
                      "median_ms": ms, "speedup": round(ms["one_process"] / ms["two_workers"], 3),
                      "overhead_ms": round(ms["two_workers"] - ideal, 3),
                      "load_average_1min": os.getloadavg()[0], "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()
