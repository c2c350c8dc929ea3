"""The head's loss over big vocabularies: the whole logits (`F.linear` then `F.cross_entropy`, the path before
round four) against `F.linear_cross_entropy` (blocks of the vocabulary, never the whole [tokens, vocab] logits).

    python benchmarks/bench_head_loss.py               # N = 1024; C = 576, 896; V = 49,152 / 151,936 / 262,144
    python benchmarks/bench_head_loss.py --rounds 1    # each pair once
    python benchmarks/bench_head_loss.py --frozen      # the weight frozen (LoRA: the tied embedding gets no gradient)

Each measurement is a fresh process (`--one PATH C V`) doing one forward + backward of the head and its loss, a
(V, C) float32 weight that requires a gradient unless --frozen (tied layout: the token embedding), random hidden
states and targets; it reports its peak RSS during the op (VmHWM, reset after setup), its RSS before the op
(weights made) and the seconds of the op.
The two paths alternate, round by round (old first, then chunked first), so background load hits both alike;
the figures are the medians. Each comparison's 1-minute load average before and after is printed beside its ratio,
which is a result only if neither exceeds 1.5 (benchmarks/load_rule.py, the project's rule; `--strict` exits 1
otherwise). Also checked: the two losses agree (relative difference printed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load_rule import add_strict_flag, counts, finish, load_now, verdict  # beside this file, hence the path above

TOKENS = 1024  # 4 × 256
WIDTHS = (576, 896)  # SmolLM2-135M's d_model, Qwen2.5-0.5B's
VOCABS = (49_152, 151_936, 262_144)


def status_mb(key: str) -> float:
    """VmRSS (now) or VmHWM (the peak: ru_maxrss would carry the parent's across exec) of this process, in MB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(f"{key}:")) / 1024


def one(path: str, channels: int, vocab: int, frozen: bool) -> dict:
    from minitrain.autograd import functional as F
    from minitrain.autograd.tensor import Tensor

    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((TOKENS, channels), dtype=np.float32), requires_grad=True)
    weight = Tensor(rng.standard_normal((vocab, channels), dtype=np.float32) * np.float32(0.02),
                    requires_grad=not frozen)
    targets = rng.integers(0, vocab, TOKENS)
    F.cross_entropy(Tensor(np.zeros((2, 3), np.float32)), np.array([0, 1]))  # numba kernels loaded, not timed
    with open("/proc/self/clear_refs", "w") as refs:  # "5": the peak (VmHWM) restarts from now, setup left out
        refs.write("5")
    before = status_mb("VmRSS")
    start = time.perf_counter()
    if path == "old":
        loss = F.cross_entropy(F.linear(x, weight.T), targets)
    else:
        loss = F.linear_cross_entropy(x, weight, targets)
    loss.backward()
    seconds = time.perf_counter() - start
    peak = status_mb("VmHWM")
    return {"loss": loss.item(), "seconds": seconds, "before_mb": before, "peak_mb": peak}


def measure(path: str, channels: int, vocab: int, frozen: bool) -> dict:
    done = subprocess.run([sys.executable, __file__, "--one", path, str(channels), str(vocab),
                           *(["--frozen"] if frozen else [])],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--frozen", action="store_true")
    parser.add_argument("--vocabs", type=int, nargs="+", default=VOCABS)
    parser.add_argument("--one", nargs=3, metavar=("PATH", "C", "V"))
    add_strict_flag(parser)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), int(args.one[2]), args.frozen)))
        return
    state, cores, all_count = "frozen" if args.frozen else "trained", os.cpu_count() or 1, True
    print(f"N = {TOKENS} tokens, weight {state}", flush=True)
    print(f"{'C':>4} {'V':>8} | {'old peak':>9} {'chunked':>8} {'(before)':>8} MB | {'old s':>6} {'chunked':>7} "
          f"{'ratio':>5} | loss rel. diff | load before -> after: verdict", flush=True)
    for channels in WIDTHS:
        for vocab in args.vocabs:
            start = load_now()  # each process's BLAS takes every core: the benchmark's own threads are `cores`
            runs: dict[str, list[dict]] = {"old": [], "chunked": []}
            for r in range(args.rounds):
                for path in ("old", "chunked") if r % 2 == 0 else ("chunked", "old"):
                    runs[path].append(measure(path, channels, vocab, args.frozen))
            end = load_now()
            all_count &= counts(start, end, cores)
            med = {p: {k: float(np.median([m[k] for m in ms])) for k in ms[0]} for p, ms in runs.items()}
            old, new = med["old"], med["chunked"]
            diff = abs(new["loss"] - old["loss"]) / abs(old["loss"])
            print(f"{channels:>4} {vocab:>8} | {old['peak_mb']:>9.0f} {new['peak_mb']:>8.0f} {new['before_mb']:>8.0f}"
                  f"    | {old['seconds']:>6.2f} {new['seconds']:>7.2f} {old['seconds'] / new['seconds']:>5.2f} | "
                  f"{diff:.1e} | {verdict(start, end, cores, cores)}", flush=True)
    finish(all_count, args.strict)


if __name__ == "__main__":
    main()
