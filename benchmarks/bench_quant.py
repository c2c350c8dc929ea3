"""Micro-benchmark: dequantizing a 4-bit weight, and a training step's products over a 4-bit base.

    python benchmarks/bench_quant.py          # prints a table

The 4-bit weights of a QLoRA base are dequantized twice per step (forward and backward), so this is what QLoRA
adds to a step. Two NumPy ways of dequantizing are timed: unpacking the nibbles and indexing the code book with
them, and the one minitrain uses, one `np.take` of the packed bytes from a 256-row table of value pairs. A numba
kernel would fuse the same gather and multiply; with the table it is a small part of a step, so there is none.
Times are medians over many calls after warm-up, at the lab-01 model's shapes; nothing here is a test.
"""

from __future__ import annotations

import numpy as np
from bench_kernels import median_seconds as kernel_median_seconds  # beside this file (run as a script)

from minitrain.quant.bit_packing import unpack_bits
from minitrain.quant.blockwise import BLOCK_SIZE, CODE_BOOKS, quantize_4bit

SHAPES = {"c_attn": (64, 192), "attn.c_proj": (64, 64), "mlp.c_fc": (64, 256), "mlp.c_proj": (256, 64)}


def median_seconds(fn) -> float:
    return kernel_median_seconds(fn, repeats=500, warmup=20)


def unpack_and_index(q) -> np.ndarray:
    n_blocks = -(-q.size // BLOCK_SIZE)
    indices = unpack_bits(q.codes, 4, n_blocks * BLOCK_SIZE).reshape(n_blocks, BLOCK_SIZE)
    return (CODE_BOOKS[q.quant_type][indices] * q.block_absmax()[:, None]).reshape(-1)[: q.size].reshape(q.shape)


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8 * 20, 64)).astype(np.float32)  # a lab-01 batch: 8 rows of about 20 positions
    print(f"{'weight':14}{'unpack+index µs':>17}{'byte table µs':>15}{'x·W µs':>9}")
    total_table = total_matmul = 0.0
    for name, shape in SHAPES.items():
        q = quantize_4bit(rng.normal(0, 0.02, shape).astype(np.float32), "nf4", double_quantize=True)
        assert np.array_equal(unpack_and_index(q), q.dequantize())
        w = q.dequantize()
        rows = x if shape[0] == 64 else rng.standard_normal((x.shape[0], shape[0])).astype(np.float32)
        slow, table = median_seconds(lambda q=q: unpack_and_index(q)), median_seconds(q.dequantize)
        product = median_seconds(lambda rows=rows, w=w: rows @ w)
        total_table, total_matmul = total_table + table, total_matmul + product
        print(f"{name:14}{1e6 * slow:>17.1f}{1e6 * table:>15.1f}{1e6 * product:>9.1f}")
    # Per step, each of the two blocks dequantizes each weight twice and multiplies by it twice (x·W, g·Wᵀ).
    print(f"per step (2 blocks, forward + backward): {2 * 2 * 1e6 * total_table:.0f} µs of dequantizing against "
          f"{2 * 2 * 1e6 * total_matmul:.0f} µs of the base's products")


if __name__ == "__main__":
    main()
