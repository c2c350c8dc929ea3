"""MiniGPT's training step written the way a JAX user would write it: one `jax.jit` over loss, gradients, global-norm
clipping and AdamW. The JAX peer of benchmarks/bench_step.py; only imported when jax is installed (minitrain never
depends on it).

Same architecture and parameter names as `minitrain.models.minigpt.MiniGPT` (GPT-2: pre-LayerNorm eps 1e-5, tanh-GELU,
causal attention with a key padding mask and scale 1/√D, biases everywhere, output head tied to the token
embedding), so one state dict serves both and the first losses can be compared. The step is the benchmark's:
clip the global gradient norm to `clip` (as torch.nn.utils.clip_grad_norm_: scale by clip/(norm + 1e-6) when the
norm is above it), then AdamW with weight decay on the matrices and embeddings only (minitrain's default groups).

XLA picks its own thread count and cannot change it inside a process, so the benchmark runs this file as a child
process pinned to a set of cores (`--cores 0` is "1 core"), driven over stdin/stdout (step_server.py):

    python benchmarks/jax_minigpt.py --config lab --state initial.safetensors --cores 0
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

Params = dict[str, jax.Array]


def gelu(x: jax.Array) -> jax.Array:
    return 0.5 * x * (1.0 + jnp.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def layer_norm(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * w + b


def block(p: Params, h: str, x: jax.Array, allowed: jax.Array, n_head: int) -> jax.Array:
    """x + attn(ln_1(x)), then + mlp(ln_2(x)).  x (B, T, C); allowed (B, 1, T, T), True where i may read j."""
    batch, time_steps, channels = x.shape
    qkv = layer_norm(x, p[f"{h}.ln_1.weight"], p[f"{h}.ln_1.bias"]) @ p[f"{h}.attn.c_attn.weight"]
    qkv = qkv + p[f"{h}.attn.c_attn.bias"]
    q, k, v = (z.reshape(batch, time_steps, n_head, -1).transpose(0, 2, 1, 3) for z in jnp.split(qkv, 3, axis=-1))
    scores = jnp.where(allowed, q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]), -jnp.inf)
    y = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(batch, time_steps, channels)
    x = x + y @ p[f"{h}.attn.c_proj.weight"] + p[f"{h}.attn.c_proj.bias"]
    hidden = gelu(layer_norm(x, p[f"{h}.ln_2.weight"], p[f"{h}.ln_2.bias"]) @ p[f"{h}.mlp.c_fc.weight"]
                  + p[f"{h}.mlp.c_fc.bias"])  # fmt: skip
    return x + hidden @ p[f"{h}.mlp.c_proj.weight"] + p[f"{h}.mlp.c_proj.bias"]


def loss_fn(p: Params, batch: dict[str, jax.Array], n_layer: int, n_head: int) -> jax.Array:
    """Mean cross-entropy over the positions loss_mask marks."""
    idx = batch["input"]
    time_steps = idx.shape[1]
    causal = jnp.tril(jnp.ones((time_steps, time_steps), dtype=bool))
    allowed = causal[None, None] & batch["attn_pad_mask"][:, None, None, :]
    x = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][:time_steps]
    for i in range(n_layer):
        x = block(p, f"transformer.h.{i}", x, allowed, n_head)
    x = layer_norm(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"])
    logp = jax.nn.log_softmax(x @ p["transformer.wte.weight"].T, axis=-1)
    picked = jnp.take_along_axis(logp, batch["target"][..., None], axis=-1)[..., 0]
    mask = batch["loss_mask"].astype(logp.dtype)
    return -(picked * mask).sum() / mask.sum()


def make_step(n_layer: int, n_head: int, clip: float, lr: float, beta1: float, beta2: float, eps: float,
              weight_decay: float) -> Callable:
    """(params, m, v, t, batch) -> (params, m, v, t, loss), jitted with params and moments donated (updated in
    place, as a fused optimizer does)."""

    def step(p: Params, m: Params, v: Params, t: jax.Array, batch: dict) -> tuple:
        loss, grads = jax.value_and_grad(loss_fn)(p, batch, n_layer, n_head)
        norm = jnp.sqrt(sum(jnp.sum(g * g) for g in grads.values()))
        scale = jnp.minimum(1.0, clip / (norm + 1e-6))
        t = t + 1
        new_p, new_m, new_v = {}, {}, {}
        for name, g in grads.items():
            g = g * scale
            new_m[name] = beta1 * m[name] + (1 - beta1) * g
            new_v[name] = beta2 * v[name] + (1 - beta2) * g * g
            update = (new_m[name] / (1 - beta1**t)) / (jnp.sqrt(new_v[name] / (1 - beta2**t)) + eps)
            decay = weight_decay if p[name].ndim >= 2 else 0.0
            new_p[name] = p[name] - lr * (update + decay * p[name])
        return new_p, new_m, new_v, t, loss

    return jax.jit(step, donate_argnums=(0, 1, 2))


def serve_steps(config: str, state_path: str) -> None:
    """Compile and warm up, then run blocks of steps on request (step_server.py's protocol)."""
    from safetensors.numpy import load_file
    from step_server import protocol_stdout, serve  # beside this file
    from step_setup import ADAMW, CLIP, CONFIGS, synthetic_batch

    out = protocol_stdout()

    spec = CONFIGS[config]
    cfg = spec["model"]
    arrays = synthetic_batch(spec["batch"], cfg["max_seq_len"], cfg["vocab_size"])
    batch = {k: jnp.asarray(v) for k, v in arrays.items()}
    state = {"params": {k: jnp.asarray(v) for k, v in load_file(state_path).items()}}
    first = float(loss_fn(state["params"], batch, cfg["n_layer"], cfg["n_head"]))
    state["m"] = {k: jnp.zeros_like(v) for k, v in state["params"].items()}
    state["v"] = {k: jnp.zeros_like(v) for k, v in state["params"].items()}
    state["t"] = jnp.zeros((), jnp.float32)
    update = make_step(cfg["n_layer"], cfg["n_head"], CLIP, **ADAMW)

    def step() -> None:
        state["params"], state["m"], state["v"], state["t"], loss = update(state["params"], state["m"], state["v"],
                                                                           state["t"], batch)  # fmt: skip
        loss.block_until_ready()

    for _ in range(max(3, spec["warmup"])):
        step()
    serve(step, first, out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="serve timed JAX MiniGPT steps to bench_step.py")
    parser.add_argument("--config", required=True)
    parser.add_argument("--state", required=True, help="initial weights (safetensors, GPT-2 names)")
    parser.add_argument("--cores", required=True, help="comma-separated CPU numbers to pin this process to")
    args = parser.parse_args()
    # Before the first jnp call: XLA starts its CPU backend and sizes its thread pool then, from the cores it may use.
    os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")})
    serve_steps(args.config, args.state)
