"""minitrain's training step run with another checkout's code: the "before" of a before/after comparison.

    git worktree add /tmp/before <commit>
    python benchmarks/bench_step.py --against /tmp/before      # adds the contestant `against_rule`

bench_step.py starts this file as a child process that speaks step_server.py's protocol:

    python benchmarks/checkout_step.py --checkout /tmp/before --config lab --state initial.safetensors

The checkout goes first on sys.path before anything imports minitrain; the step, batch and settings are this
file's neighbours' (step_setup.py), so both sides run the same step on the same initial weights. BLAS threads
follow the checkout's own size rule (`minitrain.common.runtime.configure`), like bench_step.py's `minitrain_rule`.
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> None:
    parser = argparse.ArgumentParser(description="serve timed minitrain steps from another checkout to bench_step.py")
    parser.add_argument("--checkout", required=True, help="a minitrain checkout (its root folder)")
    parser.add_argument("--config", required=True)
    parser.add_argument("--state", required=True, help="initial weights (safetensors, GPT-2 names)")
    args = parser.parse_args()
    from step_server import protocol_stdout, serve  # beside this file

    out = protocol_stdout()
    checkout = os.path.abspath(args.checkout)
    sys.path.insert(0, checkout)
    from safetensors.numpy import load_file
    from step_setup import CONFIGS, minitrain_step_fn, synthetic_batch

    import minitrain
    from minitrain.common.runtime import configure
    from minitrain.models.minigpt import MiniGPT

    if not os.path.abspath(minitrain.__file__).startswith(checkout + os.sep):
        sys.exit(f"error: --checkout {checkout} has no minitrain package (imported {minitrain.__file__} instead)")
    spec = CONFIGS[args.config]
    cfg = spec["model"]
    batch = synthetic_batch(spec["batch"], cfg["max_seq_len"], cfg["vocab_size"])
    configure(cfg["d_model"], spec["batch"] * cfg["max_seq_len"])
    model = MiniGPT(**cfg, rng=0)
    model.load_state_dict(load_file(args.state))
    _, first_loss = model(batch["input"], batch["target"], batch["attn_pad_mask"], batch["loss_mask"])
    step = minitrain_step_fn(model, batch)
    for _ in range(spec["warmup"]):
        step()
    serve(step, float(first_loss.item()), out)


if __name__ == "__main__":
    main()
