"""Compile once what each process of the test suite would otherwise compile for itself: minitrain's bytecode and
the numba kernels that a training step, an evaluation and a short generation of every text family run (in float32
and float64). `make test` runs it before pytest: on a fresh clone the suite's workers, the runs they start and the
copies of the checkout some tests make (tests/test_extending.py, tests/course/test_lab_commands.py) then find the
caches written instead of compiling every kernel side by side.

    python scripts/warm_caches.py        # a few seconds; prints what it compiled
"""

from __future__ import annotations

import compileall
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def warm_kernels() -> list[str]:
    """One step of each text family's example model (its record's `example`), in both float dtypes."""
    from minitrain.data.batch import Batch
    from minitrain.loop import evaluate, train_step
    from minitrain.models.registry import FAMILIES, build_model
    from minitrain.optim import AdamW

    warmed = []
    for name, family in FAMILIES.items():
        if family.reads != "text":
            continue
        for dtype in (np.float32, np.float64):
            model = build_model(family.example, rng=0, dtype=dtype)
            model.pack_parameters()  # as a run does: one flat buffer, the fused AdamW over it
            rng = np.random.default_rng(0)
            ids = rng.integers(3, family.example["vocab_size"], (2, 9))
            mask = np.ones((2, 8), dtype=bool)
            batch = Batch(ids[:, :-1], ids[:, 1:], mask, mask)
            train_step(model, optimizer := AdamW(model.parameters()), [batch], clip_norm=1.0)
            optimizer.step()
            evaluate(model, [batch])
            warmed.append(f"{name} {np.dtype(dtype).name}")
    return warmed


def main() -> None:
    start = time.perf_counter()
    compileall.compile_dir(ROOT / "minitrain", quiet=1, workers=2)
    warmed = warm_kernels()
    print(f"warm caches: minitrain's bytecode and the kernels of {', '.join(warmed)} "
          f"({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
