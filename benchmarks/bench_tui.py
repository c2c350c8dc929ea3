"""Benchmark: what `train --tui` costs a training step, against the progress bar a terminal gets without it.

    python benchmarks/bench_tui.py [--rounds 3] [--steps 2000]

Each round trains lab 01's run (experiments/18-train-mini/config.yaml, `--steps` steps) three times in a pseudo
terminal (`script`, 100 × 60), in turn: the default progress bar, `--tui` (the dashboard redrawn every 500 ms, the
default) and `--tui` redrawn every 100 ms (the spec's refresh_rate example). The figure is the run's own
`ms_per_step` (manifest.json: the training loop's wall time over its steps). Printed: every run's ms/step, each
mode's median, its ratio to the bar's, and the load before and after (benchmarks/load_rule.py).

First, what one redraw costs, in CPU seconds of the thread that draws it (`time.thread_time`, which the other
processes of a busy machine do not inflate as they do wall time): the dashboard of lab 01's committed run (2000
steps, 242 log rows) polled and rendered to a 100-column terminal, 50 times. Over `refresh_ms` it bounds the share of
the interpreter (the GIL) the renderer can take from the training thread. Timings only.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
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


def frame_cpu_ms(repeats: int = 50) -> float:
    """CPU milliseconds of one poll and redraw of lab 01's run's dashboard, the median of `repeats`."""
    from rich.console import Console

    from minitrain.config.observing import DashboardConfig
    from minitrain.monitor.dashboard import frame
    from minitrain.monitor.run_view import RunView

    view, settings = RunView(CONFIG.parent), DashboardConfig()
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    times = []
    for _ in range(repeats):
        start = time.thread_time()
        view.poll()
        console.print(frame(view, settings, console.width))
        times.append(1000 * (time.thread_time() - start))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--frame-only", action="store_true", help="only the CPU cost of one redraw")
    args = parser.parse_args()
    cpu = frame_cpu_ms()
    print(f"one redraw: {cpu:.2f} CPU ms: at most {cpu / 500:.2%} of the interpreter at 500 ms, {cpu / 100:.2%} "
          "at 100 ms", flush=True)
    if args.frame_only:
        return
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
