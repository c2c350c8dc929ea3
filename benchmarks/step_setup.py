"""What the step benchmarks share: the two configs, a corpus-shaped batch, the lab's AdamW and clipping settings,
and minitrain's training step. It imports only minitrain's model, optimizer and clipping, whose API every
checkout since the nn package has, so `checkout_step.py` can run the same step with another checkout's code."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from minitrain.models.minigpt import MiniGPT
from minitrain.optim import AdamW
from minitrain.optim.clip import clip_grad_norm_

CONFIGS = {
    "lab": dict(model=dict(n_layer=2, n_head=4, d_model=64, d_ff=256, vocab_size=64, max_seq_len=32), batch=8,
                warmup=30, rounds=12, steps=40),
    "scaled": dict(model=dict(n_layer=6, n_head=8, d_model=256, d_ff=1024, vocab_size=64, max_seq_len=128),
                   batch=16, warmup=3, rounds=5, steps=3),
}  # fmt: skip
ADAMW = dict(lr=3e-4, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)
CLIP = 1.0


def synthetic_batch(batch: int, time_steps: int, vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Right-padded lines of random length (half to all of T), ids in [3, V); the loss on each line's last third."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(time_steps // 2, time_steps + 1, size=batch)
    positions = np.arange(time_steps)[None, :]
    real = positions < lengths[:, None]
    tokens = rng.integers(3, vocab, size=(batch, time_steps + 1))
    return {
        "input": np.where(real, tokens[:, :-1], 0),
        "target": np.where(real, tokens[:, 1:], 0),
        "attn_pad_mask": real,
        "loss_mask": real & (positions >= (2 * lengths[:, None]) // 3),
    }


def minitrain_step_fn(model: MiniGPT, batch: dict[str, np.ndarray]) -> Callable[[], object]:
    optimizer = AdamW(model.trainable_parameters(), buffer=model.pack_parameters(), **ADAMW)

    def step() -> object:
        model.zero_grad()
        _, loss = model(batch["input"], batch["target"], batch["attn_pad_mask"], batch["loss_mask"])
        loss.backward()
        clip_grad_norm_(model.buffer, CLIP)
        optimizer.step()
        return loss

    return step
