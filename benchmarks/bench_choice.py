"""Benchmark: the measured choice of threads and workers (`runtime.threads: measure` with runtime.data_parallel,
minitrain/callbacks/thread_choice.py) against each fixed choice, in whole training runs of the lab config
(experiments/18-train-mini/config.yaml at grad_accumulation 2: the same global batch for every contestant).

    python benchmarks/bench_choice.py --busy             # one core held by `python3 -c 'while True: pass'`
    python benchmarks/bench_choice.py --steps 300 --repeats 2

Contestants: 1 process × 1 thread (`1t`), × 2 threads (`2t`), 2 local workers × 1 thread (`2w`), and `measure`,
which starts in one process and chooses among the three from its own timed steps (its trials and re-trials are
inside its time; its pool, like `2w`'s, starts before the first step: `run_wall_s`, each run's whole wall time with
setup and final scoring, shows that cost). Each contestant is one run of `--steps` steps; the repeats alternate the
order. Steps per second count the intervals between step ends, leaving out those that hold a validation (every
contestant validates at the same steps). The 1-minute load average before each repeat is printed with the result.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from minitrain.callbacks import Callback
from minitrain.config import load_config
from minitrain.training.run import run_training

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_step import one_core_busy  # beside this file, hence the path above

LAB = Path(__file__).resolve().parents[1] / "experiments" / "18-train-mini" / "config.yaml"
CONTESTANTS = {
    "1t": ["runtime.threads=1"],
    "2t": ["runtime.threads=2"],
    "2w": ["runtime.threads=1", "runtime.data_parallel.workers=2"],
    "measure": ["runtime.threads=measure", "runtime.data_parallel.workers=2"],
}


class StepClock(Callback):
    """The seconds between consecutive step ends, validations left out."""

    def __init__(self) -> None:
        super().__init__()
        self.intervals: list[float] = []
        self._last: float | None = None

    def on_step_end(self, ctx) -> None:
        now = time.perf_counter()
        if self._last is not None and "val_loss" not in ctx.metrics:
            self.intervals.append(now - self._last)
        self._last = now


def steps_per_second(name: str, steps: int, folder: Path) -> tuple[float, float]:
    """(steps per second between step ends, the run's wall seconds from results.json) of one contestant's run."""
    overrides = ["training.grad_accumulation=2", f"scheduler.total_steps={steps}",
                 f"scheduler.warmup_steps={min(100, steps // 3)}", *CONTESTANTS[name]]
    clock = StepClock()
    results = run_training(load_config(LAB, overrides), folder / name, progress=False,
                           models_dir=folder / "models", callbacks=[clock])
    return round(len(clock.intervals) / sum(clock.intervals), 1), results["wall_seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--busy", action="store_true", help="hold one core with a spinning process while timing")
    args = parser.parse_args()
    os.chdir(LAB.parents[2])  # the config's data paths are relative to the checkout
    names = list(CONTESTANTS)
    with one_core_busy(args.busy):
        for repeat in range(args.repeats):
            load = os.getloadavg()[0]
            order = names if repeat % 2 == 0 else names[::-1]
            with tempfile.TemporaryDirectory() as tmp:
                timed = {name: steps_per_second(name, args.steps, Path(tmp)) for name in order}
            result = {n: timed[n][0] for n in names}
            best = max((n for n in names if n != "measure"), key=result.get)
            print(json.dumps({"repeat": repeat, "busy": args.busy, "load_1min_before": round(load, 2),
                              "steps": args.steps, "steps_per_s": result,
                              "run_wall_s": {n: timed[n][1] for n in names},
                              "best_fixed": best, "measure_over_best": round(result["measure"] / result[best], 3)}),
                  flush=True)


if __name__ == "__main__":
    main()
