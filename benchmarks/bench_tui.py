"""Benchmark: what `train --tui` costs a training step, against the progress bar a terminal gets without it.

    python benchmarks/bench_tui.py [--rounds 3] [--steps 2000]

Each round trains lab 01's run (experiments/18-train-mini/config.yaml, `--steps` steps) three times in a pseudo
terminal (`script`, 100 × 60), in turn: the default progress bar, `--tui` (the dashboard redrawn every 500 ms, the
default) and `--tui` redrawn every 100 ms (the spec's refresh_rate example). The figure is the run's own
`ms_per_step` (manifest.json: the training loop's wall time over its steps). Printed: every run's ms/step, each
mode's median, its ratio to the bar's, and the load before and after (benchmarks/load_rule.py). Timings only.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from load_rule import LIMIT, load_now

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "experiments" / "18-train-mini" / "config.yaml"
MODES = {"bar": [], "tui 500 ms": ["--tui"], "tui 100 ms": ["--tui", "--set", "monitoring.dashboard.refresh_ms=100"]}


def ms_per_step(flags: list[str], steps: int, out: Path) -> float:
    command = [sys.executable, "-m", "minitrain", "train", str(CONFIG), "--out-dir", str(out), "--set",
               f"scheduler.total_steps={steps}", "--set", "output.plots=false", *flags]
    inner = f"stty cols 100 rows 60; {shlex.join(command)}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(["script", "-qefc", inner, "/dev/null"], check=True, cwd=ROOT, env=env,
                   stdout=subprocess.DEVNULL)
    return json.loads((out / "manifest.json").read_text())["ms_per_step"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    start = load_now()
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for mode, flags in MODES.items():
                times[mode].append(ms_per_step(flags, args.steps, Path(tmp, f"{round_}-{len(times[mode])}-{mode}")))
                print(f"round {round_ + 1} {mode:>11}: {times[mode][-1]:.3f} ms/step", flush=True)
    end = load_now()
    bar = statistics.median(times["bar"])
    print(json.dumps({"steps": args.steps, "rounds": args.rounds, "load_before": start, "load_after": end,
                      "median_ms_per_step": {m: statistics.median(t) for m, t in times.items()}}))
    for mode, runs in times.items():
        print(f"| {mode} | {statistics.median(runs):.3f} | {statistics.median(runs) / bar:.3f} |")
    if max(start, end) > LIMIT:
        print(f"NOT A RESULT (load {max(start, end)} > {LIMIT})")


if __name__ == "__main__":
    main()
