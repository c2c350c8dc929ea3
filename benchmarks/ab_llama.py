"""A/B of one knob in the 135M step (llama_setup.py's cases), in one process, alternating rounds.

    python benchmarks/ab_llama.py lora --knob split --layers 30 --rounds 4 --steps 1
    python benchmarks/ab_llama.py attention --rounds 10     # grouped attention alone, forward + backward

Knobs: `split`, grouped attention's batch on both cores (off: SPLIT_MACS out of reach, the path every batch took
before); `one_thread`, products below SINGLE_THREAD_MACS on one BLAS thread (off: every product on the run's
threads; the bytes differ, as the thread count of a LoRA product changes its last bits). Rounds run off, on or
on, off in turn, so a load that drifts hits both alike; the first step is a warm-up in each setting. Before
timing, a 2-layer model is stepped twice in each setting from the same start: whether the losses and every weight
are the same bytes is printed. `attention` times one layer's grouped attention alone at the
135M shape (4 × 256 tokens, 9 / 3 heads of 64), each pass after a 2-thread product as in the step, 5 calls per
round. Prints the medians, their ratio and the load average before and after.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import llama_setup
import numpy as np

from minitrain.autograd.kernels import batch_split
from minitrain.common import runtime
from minitrain.common.runtime import keep_freed_memory, set_blas_threads

KNOBS = {  # name -> (module, attribute, value when off)
    "split": (batch_split, "SPLIT_MACS", 2**62),
    "one_thread": (runtime, "SINGLE_THREAD_MACS", 0),  # off: every product on the run's BLAS threads
}


def setting(knob: str, on: bool) -> None:
    module, name, off = KNOBS[knob]
    default = setting.defaults.setdefault(knob, getattr(module, name))
    setattr(module, name, default if on else off)


setting.defaults = {}


def step_fn(case: str, layers: int):
    model = llama_setup.build(layers, None)
    llama_setup.adapt(model, case)
    model.gradient_checkpointing = case == "qlora"
    return model, llama_setup.training_step(model)


def same_bytes(case: str, knob: str) -> bool:
    digests = []
    for on in (False, True):
        setting(knob, on)
        model, step = step_fn(case, 2)
        losses = [step() for _ in range(2)]
        digests.append((losses, hashlib.sha256(model.buffer.data.tobytes() + model.buffer.grad.tobytes()).hexdigest()))
    return digests[0] == digests[1]


def attention_call():
    """One layer's grouped attention forward + backward at the 135M shape, each after a 2-thread product."""
    from minitrain.autograd import functional as F
    from minitrain.autograd.tensor import Tensor

    rng = np.random.default_rng(0)
    q, k, v = (Tensor(rng.standard_normal((llama_setup.BATCH, llama_setup.SEQ, heads, 64)), True, np.float32)
               for heads in (9, 3, 3))  # fmt: skip
    allowed = F.attention_mask(llama_setup.SEQ, llama_setup.SEQ)
    x, w = rng.standard_normal((1024, 576), dtype=np.float32), rng.standard_normal((576, 576), dtype=np.float32)
    dy = rng.standard_normal((llama_setup.BATCH, llama_setup.SEQ, 9 * 64)).astype(np.float32)

    def call() -> float:
        x @ w  # as v_proj's product before the forward, o_proj's dx before the backward
        y = F.grouped_attention(q, k, v, allowed)
        x @ w
        y.backward(dy)
        return 0.0

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=("lora", "full", "qlora", "attention"))
    parser.add_argument("--knob", choices=tuple(KNOBS), default="split")
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1, help="timed steps per setting per round")
    args = parser.parse_args()
    set_blas_threads(os.cpu_count() or 1)
    keep_freed_memory()
    load_before = os.getloadavg()[0]
    if args.case == "attention":
        identical, step = None, attention_call()
        args.steps, args.layers = 5, 1
    else:
        identical = same_bytes(args.case, args.knob)
        _, step = step_fn(args.case, args.layers)
    times: dict[bool, list[float]] = {False: [], True: []}
    for on in (False, True):  # warm-up in each setting
        setting(args.knob, on)
        step()
    for round_ in range(args.rounds):
        for on in (False, True) if round_ % 2 == 0 else (True, False):
            setting(args.knob, on)
            for _ in range(args.steps):
                start = time.perf_counter()
                step()
                times[on].append(time.perf_counter() - start)
    off, on = float(np.median(times[False])), float(np.median(times[True]))
    out = {"case": args.case, "knob": args.knob, "layers": args.layers, "same_bytes": identical,
           "off_s": times[False], "on_s": times[True], "median_off_s": off, "median_on_s": on, "ratio": on / off,
           "load": [round(load_before, 2), round(os.getloadavg()[0], 2)]}  # fmt: skip
    print(json.dumps(out))
    print(f"{args.case} {args.layers} layers, {args.knob}: off {off:.3f} s, on {on:.3f} s, on/off {on / off:.3f}; "
          f"same bytes {identical}; load {out['load'][0]} -> {out['load'][1]}")


if __name__ == "__main__":
    main()
