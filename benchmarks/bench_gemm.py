"""The float32 matrix products of SmolLM2-135M's training step, NumPy's BLAS against PyTorch's, alone.

    python benchmarks/bench_gemm.py numpy 2        # minitrain's venv: NumPy's OpenBLAS on 2 threads
    /tmp/tv/bin/python benchmarks/bench_gemm.py torch 2   # a scratch venv with torch: torch.mm on 2 threads

The shapes (rows × inner × columns) are the step's at 4 × 256 tokens: q/o (576 → 576), k/v (576 → 192), gate/up
(576 → 1536), down (1536 → 576), the k/v backward (192 → 576) and one 4096-word block of the 49,152-word head,
forward (576 → 4096) and dx (4096 → 576). Each is timed 15 times after 3 untimed calls on the same operands;
printed are the median milliseconds and GFLOP/s (2·M·K·N over the time). Run the two sides one after the other
on a quiet machine (the load average is printed before and after): what the products alone cost on this CPU
tells how much of a step's ratio against PyTorch is the BLAS and how much the rest (docs/performance.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

LOAD = Path("/proc/loadavg")
SHAPES = [(1024, 576, 576), (1024, 576, 192), (1024, 576, 1536), (1024, 1536, 576), (1024, 192, 576),
          (1024, 576, 4096), (1024, 4096, 576)]


def main() -> None:
    side, threads = sys.argv[1], int(sys.argv[2])
    if side == "torch":
        import torch

        torch.set_num_threads(threads)
        make, product = (lambda m, k: torch.randn(m, k)), torch.mm
    else:
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)
        rng = np.random.default_rng(0)
        make, product = (lambda m, k: rng.standard_normal((m, k), dtype=np.float32)), np.matmul
    print(f"{side}, {threads} thread(s), load {LOAD.read_text().split()[0]}")
    for m, k, n in SHAPES:
        a, b = make(m, k), make(k, n)
        for _ in range(3):
            product(a, b)
        times = []
        for _ in range(15):
            start = time.perf_counter()
            product(a, b)
            times.append(time.perf_counter() - start)
        median = sorted(times)[len(times) // 2]
        print(f"  {m} × {k} · {k} × {n}: {median * 1e3:7.2f} ms, {2 * m * k * n / median / 1e9:5.0f} GFLOP/s")
    print(f"load after {LOAD.read_text().split()[0]}")


if __name__ == "__main__":
    main()
