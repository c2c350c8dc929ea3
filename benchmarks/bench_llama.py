"""Benchmark: SmolLM2-135M's shape (random weights) trained and sampled by minitrain, against PyTorch eager.

    python benchmarks/bench_llama.py                          # every case at 30 layers, 1 and 2 threads, 3 rounds
    python benchmarks/bench_llama.py --layers 4,8             # two shallower depths, each measured
    python benchmarks/bench_llama.py --layers 4,8 --fit       # and extrapolated to 30: fitted, not measured
    python benchmarks/bench_llama.py --strict                 # exit 1 if a ratio is not a result (load, fit)
    python benchmarks/bench_llama.py --cases lora --rounds 5  # one case
    python benchmarks/bench_llama.py --torch-python PY        # PyTorch from this interpreter (default: $BENCH_PYTHON,
                                                              # else /work/scratch-torch/bin/python if it exists)

Cases (benchmarks/llama_setup.py has the details): `lora` (r 8 on q, k, v, o; AdamW on the adapters), `full`
(every weight, AdamW), `qlora` (the lora adapters on an NF4 base; minitrain only) — each a training step on
4 × 256 tokens: zero_grad, forward, loss, backward, AdamW step — and `generate` (greedy, prompt 32, 64 new
tokens, batch 1, KV cache). PyTorch's side is transformers' LlamaForCausalLM with PEFT's LoRA and fused AdamW
(benchmarks/torch_llama.py), on the same initial weights: the first losses and the greedy tokens are compared.

Every measurement is a fresh process (so its peak RSS, /proc's VmHWM, is the case's own): it builds the model,
runs one untimed step (or generate call), then `--steps` timed ones. A comparison is one case at one depth and one
thread count: its rounds alternate minitrain and PyTorch, the first in turn swapped every round, so background
load on the shared machine hits both alike; reported are medians over all rounds. Each `--threads` count (default
1 and 2) is its own comparison: minitrain on that many BLAS threads, torch.set_num_threads the same.

The 1-minute load average just before a comparison's first process and just after its last is printed beside its
ratio, and the ratio is a result only if neither exceeds 1.5 (benchmarks/load_rule.py, the project's rule);
otherwise it is marked NOT A RESULT, and `--strict` makes the run exit 1.

Every depth in `--layers` is measured (default 30, SmolLM2-135M's own, which fits in memory). Only with `--fit`
are time and RSS also fitted as a + b·layers through them and given at 30 layers (the output head, the embedding
and the loss do not depend on the depth; every decoder layer costs the same): those rows are marked "fitted, not
measured", and a fitted ratio is never a result.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# load_rule is beside this file, hence the path above
from load_rule import LIMIT, add_strict_flag, finish, load_now, settled_load, verdict

HERE = Path(__file__).resolve().parent
FULL_DEPTH = 30
TORCH_CASES = ("lora", "full", "generate")


def torch_python(given: str | None) -> str | None:
    """An interpreter that imports torch, transformers and peft, or None."""
    for candidate in (given, os.environ.get("BENCH_PYTHON"), "/work/scratch-torch/bin/python"):
        if candidate and Path(candidate).exists():
            probe = subprocess.run([candidate, "-c", "import torch, transformers, peft"], capture_output=True)
            if probe.returncode == 0:
                return candidate
    return None


def measure(python: str, script: str, case: str, layers: int, threads: int, steps: int, weights: str) -> dict:
    command = [python, str(HERE / script), case, "--layers", str(layers), "--steps", str(steps),
               "--threads", str(threads), "--weights", weights]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps({k: v for k, v in result.items() if k != "tokens"}), file=sys.stderr, flush=True)
    return result


def summary(runs: list[dict]) -> dict:
    """Median seconds per step (generate: per call, and tokens/s), median peak RSS, over every run."""
    times = [t for run in runs for t in run["times"]]
    out = {"seconds": float(np.median(times)), "peak_rss_mb": float(np.median([r["peak_rss_mb"] for r in runs])),
           "samples": len(times)}  # fmt: skip
    if "new_tokens" in runs[0]:
        out["new_tokens"] = runs[0]["new_tokens"]
        out["tokens_per_s"] = out["new_tokens"] / out["seconds"]
    return out


def fitted(by_depth: dict[int, dict]) -> dict:
    """A summary at 30 layers: seconds and peak RSS on the straight line a + b·layers through the depths measured
    (an extrapolation, never a result)."""
    depths = sorted(by_depth)
    out = {"new_tokens": by_depth[depths[0]].get("new_tokens")}
    for key in ("seconds", "peak_rss_mb"):
        slope, intercept = np.polyfit(depths, [by_depth[d][key] for d in depths], 1)
        out[key] = float(intercept + slope * FULL_DEPTH)
    return out


def row(case: str, depth: str, threads: int, mine: dict, theirs: dict | None, words: str) -> tuple[str, bool]:
    """One line of the table from two summaries at one depth (seconds and peak_rss_mb, measured or fitted), and
    whether its ratio is a result; `words` is the load verdict (or why there is none) printed beside the ratio."""
    unit = "tok/s" if case == "generate" else "s"
    a, b = mine["seconds"], theirs["seconds"] if theirs else float("nan")
    if case == "generate":  # seconds per call are what is measured (and fitted); then tokens/s, higher is better
        a, b = mine["new_tokens"] / a, mine["new_tokens"] / b
    rss_b = theirs["peak_rss_mb"] if theirs else float("nan")
    ratio = a / b  # a step's time ratio (lower is better), or the tokens/s ratio (higher is better)
    words = words if theirs else f"{words}; no PyTorch run, no ratio"
    line = (f"{case:10s} {depth:>6s} {threads:7d} {a:10.2f} {unit:5s} {b:8.2f} {unit:5s} {ratio:6.2f}x "
            f"{mine['peak_rss_mb']:11.0f} MB {rss_b:9.0f} MB  {words}")  # fmt: skip
    return line, theirs is None or words.endswith(": result")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="lora,full,qlora,generate")
    parser.add_argument("--layers", default=str(FULL_DEPTH), help="decoder layers, or a comma list of depths")
    parser.add_argument("--fit", action="store_true", help="also give a + b·layers at 30, fitted through several "
                        "--layers (a slow machine): every such row is marked fitted, not measured")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2, help="timed steps (generate calls) per process")
    parser.add_argument("--threads", default="1,2", help="BLAS threads (torch.set_num_threads), a comma list: "
                        "each count is its own comparison")
    parser.add_argument("--torch-python", default=None)
    parser.add_argument("--no-torch", action="store_true")
    add_strict_flag(parser)
    args = parser.parse_args()
    cases, depths = args.cases.split(","), [int(d) for d in args.layers.split(",")]
    thread_counts = [int(t) for t in args.threads.split(",")]
    if args.fit and len(depths) < 2:
        parser.error("--fit needs two or more --layers to fit a line through")
    cores = os.cpu_count() or 1
    peer = None if args.no_torch else torch_python(args.torch_python)
    report: dict = {"threads": thread_counts, "torch_python": peer, "depths": depths, "cores": cores}
    runs: dict[tuple[str, str, int, int], list[dict]] = {}
    loads: dict[tuple[str, int, int], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for layers in depths:
            weights = str(Path(tmp) / f"weights-{layers}.safetensors")
            subprocess.run([sys.executable, str(HERE / "llama_setup.py"), "lora", "--layers", str(layers),
                            "--save-weights", weights], check=True)  # fmt: skip
            for threads, case in itertools.product(thread_counts, cases):
                contestants = [("minitrain", sys.executable, "llama_setup.py")]
                if peer and case in TORCH_CASES:
                    contestants.append(("torch", peer, "torch_llama.py"))
                start = settled_load()
                for round_ in range(args.rounds):  # the first in turn swapped every round
                    for impl, python, script in contestants[:: 1 if round_ % 2 == 0 else -1]:
                        result = measure(python, script, case, layers, threads, args.steps, weights)
                        runs.setdefault((impl, case, layers, threads), []).append(result)
                loads[(case, layers, threads)] = (start, load_now())
            os.remove(weights)
    checks = {}
    for (impl, case, layers, threads), group in runs.items():
        theirs = runs.get(("torch", case, layers, threads))
        if impl != "minitrain" or not theirs:
            continue
        key = f"{case}_{layers}_layers_{threads}t"
        if "first_loss" in group[0]:
            checks[f"{key}_first_loss_diff"] = abs(group[0]["first_loss"] - theirs[0]["first_loss"])
        if "tokens" in group[0]:
            checks[f"{key}_same_tokens"] = group[0]["tokens"] == theirs[0]["tokens"]
    report["checks"] = checks
    table = {key: summary(group) for key, group in runs.items()}
    report["results"] = {f"{impl}_{case}_{layers}_layers_{threads}t": value
                         for (impl, case, layers, threads), value in table.items()}  # fmt: skip
    report["loads"] = {f"{case}_{layers}_layers_{threads}t": {"before": a, "after": b}
                       for (case, layers, threads), (a, b) in loads.items()}  # fmt: skip
    print(json.dumps(report))
    print(f"\nSmolLM2-135M shape; {args.rounds} rounds x {args.steps} timed steps per process, minitrain and PyTorch "
          f"alternating, the first in turn swapped every round; a ratio is a result only at load <= {LIMIT:g}")
    print(f"{'case':10s} {'layers':>6s} {'threads':>7s} {'minitrain':>16s} {'PyTorch':>14s} {'ratio':>7s} "
          f"{'RSS minitrain':>14s} {'RSS PyTorch':>12s}  load before -> after: verdict")
    all_count = True
    for threads, case in itertools.product(thread_counts, cases):
        for layers in depths:
            mine, theirs = table[("minitrain", case, layers, threads)], table.get(("torch", case, layers, threads))
            line, counted = row(case, str(layers), threads, mine, theirs, verdict(*loads[(case, layers, threads)],
                                                                                  cores, threads))  # fmt: skip
            print(line)
            all_count &= counted
        if args.fit and FULL_DEPTH not in depths:
            mine = fitted({d: table[("minitrain", case, d, threads)] for d in depths})
            theirs = fitted({d: table[("torch", case, d, threads)] for d in depths}) if theirs else None
            line, counted = row(case, f"{FULL_DEPTH}*", threads, mine, theirs,
                                f"fitted, not measured (from {args.layers} layers)")  # never ": result"
            print(line)
            all_count &= counted
    finish(all_count, args.strict)


if __name__ == "__main__":
    main()
