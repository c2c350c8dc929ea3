"""Micro-benchmark: each fused numba kernel against its NumPy reference, at the lab-01 model's sizes.

    python benchmarks/bench_kernels.py            # prints a table and one JSON line per kernel

Also measures the first-run compile time of all kernels (in a subprocess with an empty numba cache) and the
start-up time with a warm cache. Times are medians over many calls after warm-up; nothing here is a test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from minitrain.autograd import kernels

B, T, C, H, V, FF = 8, 32, 64, 4, 64, 256  # the lab-01 config, batch 8
N_PARAMS = 106_240  # the lab-01 model's parameters: one flat buffer for AdamW and the gradient norm


def median_seconds(fn, repeats: int = 300, warmup: int = 10) -> float:
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
    x_ff = rng.standard_normal((B, T, FF)).astype(f32)
    rows = rng.standard_normal((B * T, C)).astype(f32)
    w, b = np.ones(C, f32), np.zeros(C, f32)
    _, mean, rstd = k.layernorm_forward(rows, w, b, 1e-5)
    logits = rng.standard_normal((B * T, V)).astype(f32)
    targets = rng.integers(0, V, B * T)
    mask = rng.random(B * T) < 0.35
    _, lse = k.cross_entropy_forward(logits, targets, mask)
    dnll = (mask / mask.sum()).astype(f32)
    qkv = rng.standard_normal((B, T, 3 * C)).astype(f32)
    key_mask = np.ones((B, T), bool)
    _, probs = k.attention_forward(qkv, H, key_mask)
    dy = rng.standard_normal((B, T, C)).astype(f32)
    idx = rng.integers(0, V, B * T)
    param, grad = rng.standard_normal(N_PARAMS).astype(f32), rng.standard_normal(N_PARAMS).astype(f32)
    exp_avg, exp_avg_sq = np.zeros(N_PARAMS, f32), np.zeros(N_PARAMS, f32)
    return {
        "gelu_forward (8,32,256)": lambda: k.gelu_forward(x_ff),
        "gelu_backward (8,32,256)": lambda: k.gelu_backward(x_ff, x_ff),
        "layernorm_forward (256,64)": lambda: k.layernorm_forward(rows, w, b, 1e-5),
        "layernorm_backward (256,64)": lambda: k.layernorm_backward(rows, rows, w, mean, rstd),
        "cross_entropy_forward (256,64)": lambda: k.cross_entropy_forward(logits, targets, mask),
        "cross_entropy_backward (256,64)": lambda: k.cross_entropy_backward(logits, targets, lse, dnll),
        "attention_forward (8,32,3*64), 4 heads": lambda: k.attention_forward(qkv, H, key_mask),
        "attention_backward (8,32,3*64), 4 heads": lambda: k.attention_backward(qkv, probs, dy),
        "embedding_backward (256,64)": lambda: k.embedding_backward(idx, rows, V),
        "sum_of_squares (106240,)": lambda: k.sum_of_squares(grad),
        "adamw_update (106240,)": lambda: k.adamw_update(param, grad, exp_avg, exp_avg_sq, 3e-4, 0.9, 0.95, 1e-8,
                                                          0.1, 10),
    }


def startup_seconds(cache_dir: str) -> dict:
    """Import minitrain and call every kernel once, in a fresh interpreter using `cache_dir` as numba's cache."""
    code = (
        "import time; t0 = time.perf_counter()\n"
        f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        "import bench_kernels as bk\n"
        "from minitrain.autograd import kernels\n"
        "t1 = time.perf_counter()\n"
        "[fn() for fn in bk.cases(kernels.backend('numba')).values()]\n"
        "print(t1 - t0, time.perf_counter() - t1)\n"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    import_s, first_calls_s = (float(v) for v in out.stdout.split())
    return {"import_s": round(import_s, 3), "first_calls_s": round(first_calls_s, 3)}


def main() -> None:
    numba_cases, numpy_cases = cases(kernels.backend("numba")), cases(kernels.backend("numpy"))
    print(f"{'kernel':40s} {'numpy µs':>10s} {'numba µs':>10s} {'speed-up':>9s}")
    for name in numba_cases:
        ref, fast = median_seconds(numpy_cases[name]), median_seconds(numba_cases[name])
        print(f"{name:40s} {ref * 1e6:10.1f} {fast * 1e6:10.1f} {ref / fast:8.1f}x")
        print(json.dumps({"kernel": name, "numpy_us": round(ref * 1e6, 2), "numba_us": round(fast * 1e6, 2),
                          "speedup": round(ref / fast, 2)}))  # fmt: skip
    with tempfile.TemporaryDirectory() as cache:
        cold = startup_seconds(cache)
        warm = startup_seconds(cache)
    print(json.dumps({"compile_cold": cold, "start_warm_cache": warm}))


if __name__ == "__main__":
    main()
