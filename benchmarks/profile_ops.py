"""Op-by-op profile of a training step: each op's share of the wall time and how many cores it kept busy.

    python benchmarks/profile_ops.py lora --layers 30 --steps 2        # the 135M shape (llama_setup.py's cases)
    python benchmarks/profile_ops.py full|qlora [--layers N]
    python benchmarks/profile_ops.py lab|scaled [--shrink]              # the course's MiniGPT (step_setup.py)

--shrink runs the MiniGPT step's same ops on tiny arrays (d_model 8, 4 tokens, batch 1): what is left is the
per-op cost (Python, NumPy and numba dispatch, the tape).

The step's ops are wrapped, in this process only, by timers that read the wall clock (perf_counter), the
process's CPU time (process_time: every thread, BLAS's workers included) and the calling thread's (thread_time).
Times are exclusive: an op's nested ops (a kernel inside a tape op, the NF4 dequantization inside linear_4bit)
are counted as their own rows. Each op's backward is its own row (the closure the op puts on the tape). "tape"
is what is left of zero_grad/forward/backward/step outside every wrapped op: the backward's walk over the tape,
Tensor bookkeeping, the Python between ops.

    cores = process CPU / wall: ≈ 1 one core, ≈ 2 both (a spinning OpenBLAS worker counts too)
    main  = the calling thread's CPU / wall: < 1 when it waited (for a worker, or descheduled on a busy machine)
    thr   = process CPU / the calling thread's CPU: the threads that were busy (a spinning worker too), whatever
            the load (≈ 1: one)

The timers cost ≈ 4 µs per wrapped call (plain steps are timed first: compare): noise at the 135M shape, as much
again as the shrunk lab step (0.52 -> 1.05 ms). Prints a JSON line, then the table; the load before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd import kernels
from minitrain.autograd.tensor import Tensor


class Profile:
    """Exclusive wall, process-CPU and thread-CPU seconds and call counts per label."""

    def __init__(self) -> None:
        self.stats: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
        self.stack: list[list] = []  # [label, child wall, child cpu, child thread cpu]

    def wrap(self, label, fn):
        """fn timed under `label` (a string, or a function of the call's arguments giving one)."""

        def timed(*args, **kwargs):
            name = label(*args, **kwargs) if callable(label) else label
            self.stack.append([name, 0.0, 0.0, 0.0])
            w0, c0, t0 = time.perf_counter(), time.process_time(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                w, c, t = time.perf_counter() - w0, time.process_time() - c0, time.thread_time() - t0
                _, cw, cc, ct = self.stack.pop()
                s = self.stats[name]
                s[0], s[1], s[2], s[3] = s[0] + w - cw, s[1] + c - cc, s[2] + t - ct, s[3] + 1
                if self.stack:
                    parent = self.stack[-1]
                    parent[1], parent[2], parent[3] = parent[1] + w, parent[2] + c, parent[3] + t

        return timed

    def current(self) -> str | None:
        return self.stack[-1][0] if self.stack else None


def linear_label(x, weight, *rest, **kw) -> str:
    n_in, n_out = weight.shape
    if max(n_in, n_out) >= 32768:
        return "head product (x·Eᵀ)"
    if min(n_in, n_out) <= 16:
        return "LoRA rank-r products"
    return "projections (x·W)"


def elementary(name: str):
    def label(a, *rest, **kw) -> str:
        return f"Tensor.{name} (…, {a.shape[-1] if a.ndim else 1})"

    return label


def instrument(profile: Profile) -> None:
    """Wrap the ops a Llama or MiniGPT step calls (module attributes, so every caller sees the wrapper)."""
    W = profile.wrap
    originals = {}
    for name, label in [("linear", linear_label), ("rms_norm", "RMSNorm"), ("silu", "SiLU"), ("rope", "RoPE"),
                        ("embedding", "embedding"), ("cross_entropy", "cross-entropy"),
                        ("grouped_attention", "grouped attention (layouts, mask)"), ("layer_norm", "LayerNorm"),
                        ("self_attention", "causal attention (layouts)"), ("gelu", "GELU")]:  # fmt: skip
        originals[name] = getattr(F, name)
        setattr(F, name, W(label, originals[name]))
    active = kernels.active
    for name in ("rmsnorm_forward", "rmsnorm_backward", "silu_forward", "silu_backward", "cross_entropy_forward",
                 "cross_entropy_backward", "embedding_backward", "adamw_update", "layernorm_forward",
                 "layernorm_backward", "gelu_forward", "gelu_backward", "sum_of_squares"):  # fmt: skip
        setattr(active, name, W(f"kernel {name}", getattr(active, name)))
    from minitrain.autograd.kernels import attention as causal
    from minitrain.autograd.kernels import attention_softmax as asm
    from minitrain.autograd.kernels import grouped_attention as ga

    numba = active.name == "numba"
    soft_f = W("attention softmax fwd",
               ga.masked_softmax_forward_numba if numba else ga.masked_softmax_forward_reference)
    soft_b = W("attention softmax bwd", asm.softmax_backward_numba if numba else asm.softmax_backward_reference)
    active.grouped_attention_forward = W("grouped attention products fwd",
                                         partial(ga.grouped_attention_forward, softmax=soft_f))
    active.grouped_attention_backward = W("grouped attention products bwd",
                                          partial(ga.grouped_attention_backward, softmax_backward=soft_b))
    active.attention_forward = W("causal attention products fwd", partial(causal.attention_forward, softmax=soft_f))
    active.attention_backward = W("causal attention products bwd",
                                  partial(causal.attention_backward, softmax_backward=soft_b))
    for name in ("__add__", "__sub__", "__mul__", "__truediv__", "reshape", "transpose", "__getitem__"):
        setattr(Tensor, name, W(elementary(name), getattr(Tensor, name)))
    Tensor._accumulate = W("grad accumulate (+=, copies)", Tensor._accumulate)
    from_op = Tensor._from_op

    def recorded(data, parents, backward):  # each op's backward timed under the op's label + " bwd"
        label = f"{profile.current() or 'tape'} bwd"
        return from_op(data, parents, W(label, backward))

    Tensor._from_op = staticmethod(recorded)
    from minitrain.nn import quantized
    from minitrain.quant.blockwise import Blockwise4Bit

    quantized.linear_4bit = W("projections (x·deq(W₄))", quantized.linear_4bit)
    Blockwise4Bit.dequantize = W("NF4 dequantize", Blockwise4Bit.dequantize)
    from minitrain.optim.optimizer import Optimizer

    Optimizer.step = W("AdamW (step, Python)", Optimizer.step)
    if "step_setup" in sys.modules:  # the MiniGPT step clips (imported by name there)
        setup = sys.modules["step_setup"]
        setup.clip_grad_norm_ = W("clip_grad_norm", setup.clip_grad_norm_)


# The MiniGPT step's ops at a size where their arithmetic is nothing: what is left is the per-op cost (Python, NumPy
# and numba dispatch, the tape), paid the same number of times as at the real size.
SHRUNK = dict(n_head=2, d_model=8, d_ff=8, vocab_size=16, max_seq_len=4)


def build_step(case: str, layers: int, shrink: bool = False):
    if case in ("lab", "scaled"):
        import step_setup

        from minitrain.common.runtime import configure
        from minitrain.models.minigpt import MiniGPT

        spec = step_setup.CONFIGS[case]
        m = {**spec["model"], **SHRUNK} if shrink else spec["model"]
        spec = {**spec, "batch": 1} if shrink else spec
        configure(m["d_model"], spec["batch"] * m["max_seq_len"])
        model = MiniGPT(**m, rng=0)
        batch = step_setup.synthetic_batch(spec["batch"], m["max_seq_len"], m["vocab_size"])
        return step_setup.minitrain_step_fn(model, batch)
    import llama_setup

    from minitrain.common.runtime import keep_freed_memory, set_blas_threads

    set_blas_threads(os.cpu_count() or 1)
    keep_freed_memory()
    model = llama_setup.build(layers, None)
    llama_setup.adapt(model, case)
    model.gradient_checkpointing = case == "qlora"
    return llama_setup.training_step(model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=("lora", "full", "qlora", "lab", "scaled"))
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--shrink", action="store_true", help="lab/scaled: the same ops on tiny arrays (per-op cost)")
    parser.add_argument("--plain", type=int, default=1, help="uninstrumented steps timed before the profile")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    step = build_step(args.case, args.layers, args.shrink)
    for _ in range(args.warmup):
        step()
    plain = []  # uninstrumented steps first: what the timers add is their difference
    for _ in range(args.plain):
        start = time.perf_counter()
        step()
        plain.append(time.perf_counter() - start)
    profile = Profile()
    instrument(profile)
    step = profile.wrap("tape", step)  # the root: what no op claims
    walls = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        walls.append(time.perf_counter() - start)
    total = sum(walls)
    rows = sorted(((k, *v) for k, v in profile.stats.items()), key=lambda r: -r[1])
    case = args.case + (" shrunk" if args.shrink else "")
    out = {"case": case, "layers": args.layers, "steps": args.steps, "step_s": walls, "plain_step_s": plain,
           "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
           "ops": {k: {"wall_s": w / args.steps, "cpu_s": c / args.steps, "thread_s": t / args.steps,
                       "calls": n / args.steps} for k, w, c, t, n in rows}}  # fmt: skip
    print(json.dumps(out))
    print(f"\n{case}, {args.layers} layers: step {np.median(walls):.4f} s (median of {args.steps}); "
          f"uninstrumented {np.median(plain) if plain else float('nan'):.4f} s; "
          f"load {out['load'][0]} -> {out['load'][1]}")
    columns = ("ms/step", "share", "cpu ms", "cores", "main", "thr", "calls")
    print(f"{'op':44s} " + " ".join(f"{c:>{w}s}" for c, w in zip(columns, (9, 6, 9, 5, 5, 5, 6), strict=True)))
    for k, w, c, t, n in rows:
        print(f"{k:44s} {1e3 * w / args.steps:9.3f} {100 * w / total:5.1f}% {1e3 * c / args.steps:9.3f} {c / w:5.2f} "
              f"{t / w:5.2f} {c / max(t, 1e-9):5.2f} {n / args.steps:6.0f}")


if __name__ == "__main__":
    main()
