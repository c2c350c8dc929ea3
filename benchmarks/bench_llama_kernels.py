"""Micro-benchmark: the Llama family's kernels, numba against the NumPy reference, at SmolLM2-135M's layer shape.

    python benchmarks/bench_llama_kernels.py      # one line per kernel: the two medians and the speed-up

Shape: batch 4, sequence 256, d_model 576, 9 query heads and 3 key/value heads of 64, d_ff 1536 (a fine-tuning
step of issue 25). Times are medians after warm-up; nothing here is a test.
"""

from __future__ import annotations

import time

import numpy as np

from minitrain import functional as F
from minitrain.autograd import kernels

B, T, C, H, H_KV, D, FF = 4, 256, 576, 9, 3, 64, 1536


def median_seconds(fn, repeats: int = 20, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def cases(k) -> dict:
    rng = np.random.default_rng(0)
    f32 = np.float32
    rows = rng.standard_normal((B * T, C)).astype(f32)
    w = np.ones(C, f32)
    _, rstd = k.rmsnorm_forward(rows, w, 1e-5)
    gate = rng.standard_normal((B, T, FF)).astype(f32)
    q = rng.standard_normal((B, T, H, D)).astype(f32)
    kk, v = (rng.standard_normal((B, T, H_KV, D)).astype(f32) for _ in range(2))
    allowed = np.broadcast_to(F.attention_mask(T, T), (B, T, T))
    _, probs = k.grouped_attention_forward(q, kk, v, allowed)
    dy = rng.standard_normal((B, T, H * D)).astype(f32)
    return {
        f"rmsnorm_forward ({B * T},{C})": lambda: k.rmsnorm_forward(rows, w, 1e-5),
        f"rmsnorm_backward ({B * T},{C})": lambda: k.rmsnorm_backward(rows, rows, w, rstd),
        f"silu_forward ({B},{T},{FF})": lambda: k.silu_forward(gate),
        f"silu_backward ({B},{T},{FF})": lambda: k.silu_backward(gate, gate),
        f"grouped_attention_forward H{H}/{H_KV}": lambda: k.grouped_attention_forward(q, kk, v, allowed),
        f"grouped_attention_backward H{H}/{H_KV}": lambda: k.grouped_attention_backward(q, kk, v, probs, dy),
    }


def main() -> None:
    numpy_cases, numba_cases = cases(kernels.backend("numpy")), cases(kernels.backend("numba"))
    print(f"{'kernel':44s} {'numpy ms':>9s} {'numba ms':>9s} {'speed-up':>8s}")
    for name in numpy_cases:
        slow, fast = median_seconds(numpy_cases[name]), median_seconds(numba_cases[name])
        print(f"{name:44s} {slow * 1e3:9.2f} {fast * 1e3:9.2f} {slow / fast:7.1f}x")


if __name__ == "__main__":
    main()
