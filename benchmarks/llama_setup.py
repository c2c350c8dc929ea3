"""One case of the 135M benchmark (benchmarks/bench_llama.py), measured by minitrain in a process of its own.

    python benchmarks/llama_setup.py CASE --layers N --steps K --threads T [--weights FILE]

CASE is `lora` (r 8, alpha 16 on q, k, v, o; AdamW on the adapters), `full` (every weight trained, AdamW),
`qlora` (the same adapters on an NF4 base: every linear layer in 4-bit blocks, as minitrain/lora/adapter.py
builds QLoRA; with gradient checkpointing, as QLoRA is run to save memory; `--no-checkpointing` without) or
`generate` (greedy, a 32-token prompt, 64 new tokens, batch 1, through the KV cache). A training step is
zero_grad, forward with the loss, backward, AdamW step (no clipping), on a batch of 4 × 256 random token ids
with the loss on every position. Prints one JSON line: the wall time of each timed step (or of each generate
call), the first loss, and the process's peak RSS (VmHWM).

The model is SmolLM2-135M's shape with random weights (minitrain's init, seed 0), or the weights in FILE (a
safetensors file of `Llama.state_dict()`: what bench_llama.py writes once so that PyTorch gets the same ones).
`--checkpointing` recomputes each layer in backward for lora and full too. `--layers` builds fewer than the 30
decoder layers (the head, embedding and optimizer are unchanged).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from minitrain.common.runtime import keep_freed_memory, set_blas_threads
from minitrain.lora import LoraSettings, add_adapters
from minitrain.models.llama import Llama
from minitrain.optim import AdamW
from minitrain.training.artifacts import peak_rss_mb

SMOLLM2 = dict(n_layer=30, n_head=9, n_kv_head=3, d_model=576, d_ff=1536, vocab_size=49152, max_seq_len=2048,
               rope_theta=100000.0, rms_norm_eps=1e-5, tie_embeddings=True)  # fmt: skip
BATCH, SEQ, PROMPT, NEW_TOKENS = 4, 256, 32, 64
LORA = dict(rank=8, alpha=16.0, targets=("q_proj", "k_proj", "v_proj", "o_proj"))
ADAMW = dict(lr=1e-4, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0)
CASES = ("lora", "full", "qlora", "generate")


def token_batch(vocab: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """inputs, targets (B, T) int64: random ids, the targets shifted by one."""
    ids = np.random.default_rng(seed).integers(0, vocab, size=(BATCH, SEQ + 1))
    return ids[:, :-1], ids[:, 1:]


def prompt_ids(vocab: int, seed: int = 1) -> list[int]:
    return np.random.default_rng(seed).integers(0, vocab, size=PROMPT).tolist()


def build(layers: int, weights: str | None) -> Llama:
    model = Llama(**{**SMOLLM2, "n_layer": layers}, rng=0)
    if weights:
        from safetensors.numpy import load_file

        model.load_state_dict(load_file(weights))
    return model


def adapt(model: Llama, case: str) -> None:
    """Freeze the base and add the adapters (QLoRA: on the base's 4-bit blocks) for `lora`/`qlora`."""
    if case in ("lora", "qlora"):
        targets = [f"model.layers.{i}.self_attn.{name}" for i in range(model.config["n_layer"])
                   for name in LORA["targets"]]  # fmt: skip
        settings = LoraSettings(rank=LORA["rank"], alpha=LORA["alpha"], targets=tuple(targets),
                                quantize_base=case == "qlora", quant_type="nf4")  # fmt: skip
        add_adapters(model, settings, np.random.default_rng(0))


def training_step(model: Llama):
    inputs, targets = token_batch(model.config["vocab_size"])
    model.pack_parameters()
    optimizer = AdamW(model.trainable_parameters(), buffer=model.buffer, **ADAMW)

    def step() -> float:
        model.zero_grad()
        _, loss = model(inputs, targets)
        loss.backward()
        optimizer.step()
        return float(loss.item())

    return step


def run(case: str, layers: int, steps: int, threads: int, weights: str | None, checkpointing: bool) -> dict:
    set_blas_threads(threads)
    keep_freed_memory()
    model = build(layers, weights)
    adapt(model, case)
    model.gradient_checkpointing = checkpointing and case != "generate"
    result: dict = {"impl": "minitrain", "case": case, "layers": layers, "threads": threads,
                    "checkpointing": model.gradient_checkpointing}  # fmt: skip
    if case == "generate":
        prompt = prompt_ids(model.config["vocab_size"])
        model.generate(prompt, 4)  # warm-up: numba kernels compiled or loaded
        times, tokens = [], []
        for _ in range(steps):
            start = time.perf_counter()
            tokens = model.generate(prompt, NEW_TOKENS)[0]
            times.append(time.perf_counter() - start)
        result.update(times=times, tokens=tokens, new_tokens=len(tokens))
    else:
        step = training_step(model)
        result["first_loss"] = step()  # warm-up, and the loss PyTorch's first step is compared with
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        result.update(times=times, trainable=model.num_parameters(trainable_only=True))
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=CASES)
    parser.add_argument("--layers", type=int, default=SMOLLM2["n_layer"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--weights", default=None)
    parser.add_argument("--checkpointing", action="store_true", help="recompute each layer in backward")
    parser.add_argument("--no-checkpointing", action="store_true", help="qlora without gradient checkpointing")
    parser.add_argument("--save-weights", default=None, help="write the model's initial weights here and exit")
    args = parser.parse_args()
    if args.save_weights:
        from safetensors.numpy import save_file

        save_file(build(args.layers, None).state_dict(), args.save_weights)
        return
    checkpointing = args.checkpointing or (args.case == "qlora" and not args.no_checkpointing)
    print(json.dumps(run(args.case, args.layers, args.steps, args.threads, args.weights, checkpointing)))


if __name__ == "__main__":
    main()
