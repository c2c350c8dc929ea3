"""AdamW update time on the lab-01 model's parameters: fused numba kernel vs the NumPy reference.

Lab 01's MiniGPT (2 layers, d_model 64, d_ff 256, vocab 64, 32 positions) has 106,240 parameters. They are laid
out in one ParameterBuffer, so a step is two calls (decay group, no-decay group) either way; the per-parameter
layout (one call per tensor, 28 tensors) is timed too. Prints microseconds per step (median of many) as JSON.

    .venv/bin/python benchmarks/bench_optim.py
"""

from __future__ import annotations

import json
import statistics
import time

import numpy as np

from minitrain.autograd import kernels
from minitrain.autograd.parameters import ParameterBuffer
from minitrain.models.minigpt import parameter_shapes
from minitrain.optim import AdamW

LAB01 = {"n_layer": 2, "d_model": 64, "d_ff": 256, "vocab_size": 64, "max_seq_len": 32}


class Param:
    def __init__(self, data: np.ndarray, grad: np.ndarray) -> None:
        self.data, self.grad = data, grad


def time_steps(optimizer: AdamW, backend: str, repeats: int = 2000) -> float:
    """Median microseconds of one optimizer.step() under kernel `backend`, after a warm-up."""
    with kernels.use_backend(backend):
        for _ in range(20):
            optimizer.step()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            optimizer.step()
            samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def main() -> None:
    rng = np.random.default_rng(0)
    arrays = [(name, 0.02 * rng.standard_normal(shape)) for name, shape in parameter_shapes(LAB01)]
    buffer = ParameterBuffer(arrays)
    buffer.grad[...] = 1e-3 * rng.standard_normal(buffer.size)
    flat = [(name, Param(*buffer.views(name))) for name, _ in arrays]
    own = [(name, Param(a.astype(np.float32), buffer.views(name).grad.copy())) for name, a in arrays]

    results = {"parameters": buffer.size, "tensors": len(arrays)}
    for layout, params, extra in (("flat", flat, {"buffer": buffer}), ("per_tensor", own, {})):
        for backend in ("numba", "numpy"):
            optimizer = AdamW(params, lr=3e-4, beta1=0.9, beta2=0.95, weight_decay=0.1, **extra)
            results[f"{layout}_{backend}_us"] = round(time_steps(optimizer, backend), 1)
    results["speedup_flat_numba_vs_numpy"] = round(results["flat_numpy_us"] / results["flat_numba_us"], 1)
    results["speedup_flat_numba_vs_per_tensor_numpy"] = round(
        results["per_tensor_numpy_us"] / results["flat_numba_us"], 1
    )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
