"""The FLOP floor of a MiniGPT training step: every matrix product the step computes, timed alone with NumPy's BLAS.

    floor = step_floor(n_layer=2, n_head=4, d_model=64, d_ff=256, vocab_size=64, max_seq_len=32, batch=8)
    floor["gflop"], floor["ms_by_threads"][1], floor["ms_best"]

A step cannot be faster than its matrix products, each run on its own with operands already in cache-friendly
layout; everything else a step does (kernels, memory traffic, Python) comes on top. With N = B·T rows, per layer:

| product | forward | backward |
| --- | --- | --- |
| linear x (N, i)·W (i, o): c_attn d→3d, attn c_proj d→d, c_fc d→d_ff, mlp c_proj d_ff→d | x·W | g·Wᵀ, xᵀ·g |
| attention, B·H heads of (T, D) | s = q·kᵀ, y = p·v | dp = g·vᵀ, dv = pᵀ·g, dq = ds·k, dk = dsᵀ·q |

plus the tied head (N, d)·(d, V) and its two backward products. Each product is timed with the operand layout the
step uses (a transposed operand is a transposed view, as in minitrain/autograd/functional.py) at every thread count; the
figures are the sum over products of the best of `repeats` timings: on 1 thread, on each count, and the best
count per product (`ms_best`, a floor no fixed thread count reaches).
"""

from __future__ import annotations

import os
import time

import numpy as np

from minitrain.common.runtime import get_blas_threads, set_blas_threads


def step_products(n_layer: int, n_head: int, d_model: int, d_ff: int, vocab_size: int, max_seq_len: int,
                  batch: int) -> list[tuple[tuple[int, ...], tuple[int, ...], bool, bool]]:
    """Every product of one step as (a's stored shape, b's stored shape, use aᵀ, use bᵀ); batched products
    have a leading (B·H) dimension."""
    rows, heads, head_size = batch * max_seq_len, batch * n_head, d_model // n_head
    linears = [(d_model, 3 * d_model), (d_model, d_model), (d_model, d_ff), (d_ff, d_model)] * n_layer
    linears.append((d_model, vocab_size))  # the tied head, x · wteᵀ
    products = []
    for n_in, n_out in linears:
        products += [((rows, n_in), (n_in, n_out), False, False),  # y = x·W
                     ((rows, n_out), (n_in, n_out), False, True),  # dx = g·Wᵀ
                     ((rows, n_in), (rows, n_out), True, False)]  # dW = xᵀ·g
    square, tall = (heads, max_seq_len, max_seq_len), (heads, max_seq_len, head_size)
    attention = [(tall, tall, False, True), (square, tall, False, False),  # s = q·kᵀ, y = p·v
                 (tall, tall, False, True), (square, tall, True, False),  # dp = g·vᵀ, dv = pᵀ·g
                 (square, tall, False, False), (square, tall, True, False)]  # dq = ds·k, dk = dsᵀ·q
    return products + attention * n_layer


def _flops(a_shape: tuple[int, ...], b_shape: tuple[int, ...], ta: bool, tb: bool) -> int:
    m, k = a_shape[-2:][::-1] if ta else a_shape[-2:]
    n = b_shape[-2] if tb else b_shape[-1]
    return 2 * m * k * n * (a_shape[0] if len(a_shape) == 3 else 1)


def _time_product(a: np.ndarray, b: np.ndarray, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return best


def step_floor(*, batch: int, repeats: int = 20, threads: tuple[int, ...] | None = None, **model) -> dict:
    """{"gflop": per step, "ms_by_threads": {n: floor ms on n threads}, "ms_best": best count per product}."""
    threads = threads or tuple(range(1, (os.cpu_count() or 1) + 1))
    rng = np.random.default_rng(0)
    before = get_blas_threads()
    per_product = []
    try:
        for a_shape, b_shape, ta, tb in step_products(batch=batch, **model):
            a = rng.standard_normal(a_shape, dtype=np.float32)
            b = rng.standard_normal(b_shape, dtype=np.float32)
            a, b = (np.swapaxes(a, -1, -2) if ta else a), (np.swapaxes(b, -1, -2) if tb else b)
            timings = {}
            for n in threads:
                set_blas_threads(n)
                timings[n] = _time_product(a, b, repeats)
            per_product.append((_flops(a_shape, b_shape, ta, tb), timings))
    finally:
        if before is not None:
            set_blas_threads(before)
    return {"gflop": round(sum(f for f, _ in per_product) / 1e9, 4),
            "ms_by_threads": {n: round(1e3 * sum(t[n] for _, t in per_product), 3) for n in threads},
            "ms_best": round(1e3 * sum(min(t.values()) for _, t in per_product), 3)}
