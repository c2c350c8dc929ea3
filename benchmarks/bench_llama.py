"""Benchmark: SmolLM2-135M's shape (random weights) trained and sampled by minitrain, against PyTorch eager.

    python benchmarks/bench_llama.py                          # every case at 30 layers, 3 rounds
    python benchmarks/bench_llama.py --layers 4,8             # two depths, extrapolated to 30 (a slow machine)
    python benchmarks/bench_llama.py --cases lora --rounds 5  # one case
    python benchmarks/bench_llama.py --torch-python PY        # PyTorch from this interpreter (default: $BENCH_PYTHON,
                                                              # else /work/scratch-torch/bin/python if it exists)

Cases (benchmarks/llama_setup.py has the details): `lora` (r 8 on q, k, v, o; AdamW on the adapters), `full`
(every weight, AdamW), `qlora` (the lora adapters on an NF4 base; minitrain only) — each a training step on
4 × 256 tokens: zero_grad, forward, loss, backward, AdamW step — and `generate` (greedy, prompt 32, 64 new
tokens, batch 1, KV cache). PyTorch's side is transformers' LlamaForCausalLM with PEFT's LoRA and fused AdamW
(benchmarks/torch_llama.py), on the same initial weights: the first losses and the greedy tokens are compared.

Every measurement is a fresh process (so its peak RSS, /proc's VmHWM, is the case's own): it builds the model,
runs one untimed step (or generate call), then `--steps` timed ones. Rounds alternate minitrain and PyTorch on
each case, in turn first, so background load on the shared machine hits both alike; reported are medians over
all rounds, and the load average before and after. Both run on `--threads` BLAS threads (default: every core,
what minitrain's size rule `blas_threads_for` gives at this shape; torch.set_num_threads the same).

With several `--layers`, time and RSS are fitted as a + b·layers and given at 30 layers too (the output head,
the embedding and the loss do not depend on the depth; every decoder layer costs the same).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

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


def measure(python: str, script: str, case: str, layers: int, args: argparse.Namespace, weights: str) -> dict:
    command = [python, str(HERE / script), case, "--layers", str(layers), "--steps", str(args.steps),
               "--threads", str(args.threads), "--weights", weights]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps({k: v for k, v in result.items() if k != "tokens"}), file=sys.stderr, flush=True)
    return result


def load() -> float:
    return round(os.getloadavg()[0], 2)


def summary(runs: list[dict]) -> dict:
    """Median seconds per step (generate: per call, and tokens/s), median peak RSS, over every run."""
    times = [t for run in runs for t in run["times"]]
    out = {"seconds": float(np.median(times)), "peak_rss_mb": float(np.median([r["peak_rss_mb"] for r in runs])),
           "samples": len(times)}  # fmt: skip
    if "new_tokens" in runs[0]:
        out["new_tokens"] = runs[0]["new_tokens"]
        out["tokens_per_s"] = out["new_tokens"] / out["seconds"]
    return out


def at_full_depth(by_depth: dict[int, dict], key: str) -> float:
    """The value of `key` at 30 layers: measured, or a + b·layers fitted through the depths measured."""
    if FULL_DEPTH in by_depth or len(by_depth) == 1:
        return by_depth[max(by_depth)][key]
    depths = sorted(by_depth)
    slope, intercept = np.polyfit(depths, [by_depth[d][key] for d in depths], 1)
    return float(intercept + slope * FULL_DEPTH)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="lora,full,qlora,generate")
    parser.add_argument("--layers", default=str(FULL_DEPTH), help="decoder layers, or a comma list to extrapolate")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2, help="timed steps (generate calls) per process")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--torch-python", default=None)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    cases, depths = args.cases.split(","), [int(d) for d in args.layers.split(",")]
    peer = None if args.no_torch else torch_python(args.torch_python)
    report: dict = {"threads": args.threads, "load_before": load(), "torch_python": peer, "depths": depths}
    runs: dict[tuple[str, str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for layers in depths:
            weights = str(Path(tmp) / f"weights-{layers}.safetensors")
            subprocess.run([sys.executable, str(HERE / "llama_setup.py"), "lora", "--layers", str(layers),
                            "--save-weights", weights], check=True)  # fmt: skip
            for round_ in range(args.rounds):
                for case in cases:
                    contestants = [("minitrain", sys.executable, "llama_setup.py")]
                    if peer and case in TORCH_CASES:
                        contestants.append(("torch", peer, "torch_llama.py"))
                    for impl, python, script in contestants[:: 1 if round_ % 2 == 0 else -1]:
                        result = measure(python, script, case, layers, args, weights)
                        runs.setdefault((impl, case, layers), []).append(result)
            os.remove(weights)
    report["load_after"] = load()
    checks = {}
    for case in cases:
        for layers in depths:
            mine, theirs = runs[("minitrain", case, layers)][0], runs.get(("torch", case, layers), [None])[0]
            if theirs and "first_loss" in mine:
                checks[f"{case}_{layers}_first_loss_diff"] = abs(mine["first_loss"] - theirs["first_loss"])
            if theirs and "tokens" in mine:
                checks[f"{case}_{layers}_same_tokens"] = mine["tokens"] == theirs["tokens"]
    report["checks"] = checks
    table = {}
    for (impl, case, layers), group in runs.items():
        table.setdefault((impl, case), {})[layers] = summary(group)
    report["results"] = {f"{impl}_{case}": by_depth for (impl, case), by_depth in table.items()}
    print(json.dumps(report))
    extrapolated = "" if depths == [FULL_DEPTH] else f" (fitted from {args.layers} layers)"
    print(f"\nSmolLM2-135M shape, 30 layers{extrapolated}; {args.threads} threads each; load {report['load_before']}"
          f" -> {report['load_after']}")
    print(f"{'case':10s} {'minitrain':>12s} {'PyTorch':>12s} {'ratio':>7s} {'RSS minitrain':>14s} {'RSS PyTorch':>12s}")
    for case in cases:
        unit = "tok/s" if case == "generate" else "s"
        mine, theirs = table[("minitrain", case)], table.get(("torch", case))
        a, rss_a = at_full_depth(mine, "seconds"), at_full_depth(mine, "peak_rss_mb")
        b = at_full_depth(theirs, "seconds") if theirs else float("nan")
        rss_b = at_full_depth(theirs, "peak_rss_mb") if theirs else float("nan")
        if case == "generate":  # seconds per call are what is fitted; then tokens/s (higher is better)
            new = mine[max(mine)]["new_tokens"]
            a, b = new / a, new / b
        ratio = a / b  # a step's time ratio (lower is better), or the tokens/s ratio (higher is better)
        print(f"{case:10s} {a:10.2f} {unit:5s} {b:8.2f} {unit:5s} {ratio:6.2f}x {rss_a:11.0f} MB {rss_b:9.0f} MB")


if __name__ == "__main__":
    main()
