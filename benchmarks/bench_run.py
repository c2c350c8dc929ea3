"""Benchmark: the whole lab-01 run (`make train`'s command), with an empty numba cache and then a warm one.

    python benchmarks/bench_run.py            # two full runs (~25 s), then one JSON line and a table

Each run is `scripts/train_mini.py --config experiments/18-train-mini/config.yaml --seed 42` (2000 steps,
validation every 50, every artifact) into a temporary folder, model file included, so nothing committed is
touched. Both runs share a temporary NUMBA_CACHE_DIR: the first starts it empty (every kernel compiles), the
second finds it full. Reported: the process wall time of each run, the compile cost (cold − warm), the start-up
time (`import minitrain.training.run` with the warm cache, best of 3), the peak RSS and in-run wall time each run wrote
to its results.json, and whether the validation PPL and exact match equal the committed reference run's (the
numbers must not move when the code gets faster). Timings only; nothing here is a test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "experiments" / "18-train-mini" / "config.yaml"
REFERENCE = ROOT / "experiments" / "18-train-mini" / "results.json"
TARGETS = {"warm_run_s": 15.0, "compile_s": 20.0, "startup_s": 2.0, "peak_rss_mb": 300.0}  # issue targets


def timed_run(command: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one subprocess, which must succeed."""
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def full_run(folder: Path, env: dict[str, str]) -> dict:
    """One lab-01 run into `folder`: process wall seconds and what the run wrote to results.json."""
    command = [sys.executable, "scripts/train_mini.py", "--config", str(CONFIG), "--seed", "42", "--quiet",
               "--out-dir", str(folder / "run"), "--models-dir", str(folder / "models")]  # fmt: skip
    seconds = timed_run(command, env)
    results = json.loads((folder / "run" / "results.json").read_text(encoding="utf-8"))
    keys = ("wall_seconds", "peak_rss_mb", "ms_per_step", "val_ppl", "val_exact_match")
    return {"process_s": round(seconds, 2), **{k: results[k] for k in keys}}


def main() -> None:
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, NUMBA_CACHE_DIR=str(Path(tmp) / "numba-cache"))
        cold = full_run(Path(tmp) / "cold", env)
        warm = full_run(Path(tmp) / "warm", env)
        startup = min(timed_run([sys.executable, "-c", "import minitrain.training.run"], env) for _ in range(3))
    measured = {
        "warm_run_s": warm["process_s"],
        "compile_s": round(cold["process_s"] - warm["process_s"], 2),
        "startup_s": round(startup, 2),
        "peak_rss_mb": max(cold["peak_rss_mb"], warm["peak_rss_mb"]),
    }
    same = all(run[k] == reference[k] for run in (cold, warm) for k in ("val_ppl", "val_exact_match"))
    print(json.dumps({"cold": cold, "warm": warm, **measured, "same_results_as_reference": same,
                      "load_average_1min": round(os.getloadavg()[0], 2)}))  # fmt: skip
    print(f"\n{'lab-01 run':28s} {'measured':>9s} {'target':>8s}")
    for key, target in TARGETS.items():
        verdict = "met" if measured[key] <= target else "MISSED"
        print(f"{key:28s} {measured[key]:9.2f} {'≤ ' + str(target):>8s}  {verdict}")
    print(f"val PPL {warm['val_ppl']:.6f}, exact match {warm['val_exact_match']}: "
          f"{'identical to' if same else 'DIFFERENT from'} the committed reference run")  # fmt: skip


if __name__ == "__main__":
    main()
