"""MiniGPT written the way a PyTorch user would write it in eager mode: the baseline for benchmarks/bench_step.py.

Same architecture as `minitrain.models.minigpt.MiniGPT` (GPT-2: pre-LayerNorm, tanh-GELU, causal attention with a key
padding mask, biases everywhere, output head tied to the token embedding) and the same parameter names, so one
state dict loads into both and the two first losses can be compared. Linear weights are stored [out, in]
(nn.Linear), so the [in, out] GPT-2 matrices are transposed on the way in.

Only imported when torch is installed; minitrain never depends on torch.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as tf
from torch import nn


class Block(nn.Module):
    def __init__(self, d_model: int, n_head: int, d_ff: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.ln_1, self.ln_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.c_attn, self.attn_proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.c_fc, self.mlp_proj = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = tf.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        x = x + self.attn_proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp_proj(tf.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class TorchMiniGPT(nn.Module):
    def __init__(self, n_layer: int, n_head: int, d_model: int, d_ff: int, vocab_size: int, max_seq_len: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, d_model), nn.Embedding(max_seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head, d_ff) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over the positions where `targets` is not -100 (PyTorch's ignore_index)."""
        t = idx.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        attn_mask = causal[None, None] & pad_mask[:, None, None, :]  # (B, 1, T, T), True = may attend
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.blocks:
            x = block(x, attn_mask)
        logits = self.ln_f(x) @ self.wte.weight.T
        return tf.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), ignore_index=-100)

    def load_gpt2_state_dict(self, sd: dict[str, np.ndarray]) -> None:
        """Copy Hugging Face GPT-2 named arrays (as `minitrain.models.minigpt.MiniGPT.state_dict()` gives) in."""
        rename = {"ln_1": "ln_1", "ln_2": "ln_2", "attn.c_attn": "c_attn", "attn.c_proj": "attn_proj",
                  "mlp.c_fc": "c_fc", "mlp.c_proj": "mlp_proj"}  # fmt: skip
        with torch.no_grad():
            self.wte.weight.copy_(torch.from_numpy(sd["transformer.wte.weight"]))
            self.wpe.weight.copy_(torch.from_numpy(sd["transformer.wpe.weight"]))
            self.ln_f.weight.copy_(torch.from_numpy(sd["transformer.ln_f.weight"]))
            self.ln_f.bias.copy_(torch.from_numpy(sd["transformer.ln_f.bias"]))
            for i, block in enumerate(self.blocks):
                for hf, ours in rename.items():
                    module = getattr(block, ours)
                    weight = sd[f"transformer.h.{i}.{hf}.weight"]
                    module.weight.copy_(torch.from_numpy(weight if weight.ndim == 1 else weight.T.copy()))
                    module.bias.copy_(torch.from_numpy(sd[f"transformer.h.{i}.{hf}.bias"]))


def make_optimizer(model: TorchMiniGPT, fused: bool, **adamw) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices and embeddings only (minitrain's default groups)."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    wd = adamw.pop("weight_decay")
    groups = [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, fused=fused or None, **adamw)


def torch_step_fn(model: TorchMiniGPT, optimizer: torch.optim.Optimizer, batch: dict, clip: float):
    """One training step as a closure: zero grads, forward, backward, clip_grad_norm_, AdamW."""
    idx = torch.from_numpy(batch["input"])
    targets = torch.from_numpy(np.where(batch["loss_mask"], batch["target"], -100))
    pad = torch.from_numpy(batch["attn_pad_mask"])
    params = list(model.parameters())

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        loss = model(idx, targets, pad)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        return loss

    return step


def first_loss(model: TorchMiniGPT, batch: dict) -> float:
    with torch.no_grad():
        targets = torch.from_numpy(np.where(batch["loss_mask"], batch["target"], -100))
        loss = model(torch.from_numpy(batch["input"]), targets, torch.from_numpy(batch["attn_pad_mask"]))
    return float(loss)
