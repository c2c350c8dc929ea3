"""A compute setting: how a training step is spread over this machine's cores, the thing `runtime.threads: measure`
chooses (minitrain/callbacks/thread_choice.py) and the run applies (minitrain/parallel/switch.py).

    Setting(threads=2)              the training process alone, BLAS on 2 threads
    Setting(threads=1, workers=2)   2 data-parallel workers (minitrain/parallel/local.py), 1 thread each

Which bytes a setting can change: a product's last bits depend on the BLAS thread count (OpenBLAS splits the sum
differently), and on nothing else here. Workers compute each micro-batch's gradient from zero at 1 thread and sum
them in micro-batch order, which is what one process accumulating at 1 thread does; so every setting with
`threads == 1` gives the same train_log.jsonl and model file, and only the settings with more threads differ
from them (`same_bytes_as_one_thread`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    """`workers` processes (1: the training process computes the step itself) × `threads` BLAS threads each."""

    threads: int = 1
    workers: int = 1

    def __post_init__(self) -> None:
        if self.threads < 1 or self.workers < 1:
            raise ValueError(f"Setting: threads and workers must be >= 1, got {self.threads}, {self.workers}")
        if self.workers > 1 and self.threads != 1:  # two workers on two cores: more threads would only contend
            raise ValueError(f"Setting: workers run 1 BLAS thread each, got {self.threads}")

    @property
    def same_bytes_as_one_thread(self) -> bool:
        """True when a run on this setting gives the bytes of the same run at `runtime.threads: 1`."""
        return self.threads == 1

    def __str__(self) -> str:
        if self.workers > 1:
            return f"{self.workers} workers × 1 thread"
        return f"{self.threads} thread{'s' if self.threads > 1 else ''}"
