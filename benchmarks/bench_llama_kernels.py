"""Micro-benchmark: the Llama family's kernels, numba against the NumPy reference, at SmolLM2-135M's layer shape.

    python benchmarks/bench_llama_kernels.py          # one line per kernel: the two medians and the speed-up
    python benchmarks/bench_llama_kernels.py --layer  # one whole decoder layer, forward and forward+backward

Shape: batch 4, sequence 256, d_model 576, 9 query heads and 3 key/value heads of 64, d_ff 1536 (a fine-tuning
step of issue 25). Times are medians after warm-up; nothing here is a test.
"""

from __future__ import annotations

import numpy as np
from bench_kernels import median_seconds as kernel_median_seconds  # beside this file (run as a script)

from minitrain import functional as F
from minitrain.autograd import kernels

B, T, C, H, H_KV, D, FF = 4, 256, 576, 9, 3, 64, 1536


def median_seconds(fn, repeats: int = 20, warmup: int = 3) -> float:
    """bench_kernels' median, with fewer repeats: a call at this shape takes milliseconds, not microseconds."""
    return kernel_median_seconds(fn, repeats, warmup)


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


if __name__ == "__main__" and "--layer" not in __import__("sys").argv:
    main()


def layer_step_seconds(backend: str, repeats: int = 5) -> tuple[float, float]:
    """Forward and forward+backward of one SmolLM2-shaped Llama decoder layer (all weights trained), medians."""
    from minitrain.autograd.tensor import Tensor, no_grad
    from minitrain.models.decoder import DecoderLayer
    from minitrain.nn import LlamaAttention, LlamaMLP, RMSNorm, RotaryEmbedding
    from minitrain.nn.rotary import rope_positions

    rng = np.random.default_rng(0)
    layer = DecoderLayer(LlamaAttention(C, H, H_KV, D, rng=rng), LlamaMLP(C, FF, rng=rng), RMSNorm(C, 1e-5),
                         RMSNorm(C, 1e-5))
    x = Tensor(rng.standard_normal((B, T, C)).astype(np.float32), requires_grad=True)
    cos, sin = RotaryEmbedding(D, 100000.0)(rope_positions(B, T))
    allowed = F.attention_mask(T, T)

    def forward() -> None:
        with no_grad():
            layer(x, cos, sin, allowed)

    def step() -> None:
        layer(x, cos, sin, allowed).sum().backward()

    with kernels.use_backend(backend):
        return median_seconds(forward, repeats, 1), median_seconds(step, repeats, 1)


if __name__ == "__main__" and "--layer" in __import__("sys").argv:
    for name in ("numpy", "numba"):
        fwd, both = layer_step_seconds(name)
        print(f"one decoder layer, B{B} T{T} d{C} H{H}/{H_KV} d_ff {FF}, {name} kernels: forward {fwd * 1e3:.0f} ms, "
              f"forward+backward {both * 1e3:.0f} ms")
