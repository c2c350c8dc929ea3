"""MiniGPT: the GPT-2 architecture at course size, readable top to bottom, built from minitrain.nn.

    idx (B, T) ──► wte[idx] + wpe[0..T) ──► drop ──► n_layer × Block ──► ln_f ──► · wteᵀ ──► logits (B, T, V)

    Block(x):  x = x + attn(ln_1(x))     causal multi-head self-attention, scaled by 1/√D
               x = x + mlp(ln_2(x))      d_model → d_ff → d_model with GELU

Pre-LayerNorm (eps 1e-5), GELU with the tanh approximation, biases in every linear layer, dropout after the
embeddings and after each sub-layer, and the output head tied to the token embedding: exactly GPT-2 (the blocks
are in minitrain/nn/transformer.py). Parameter names and shapes are Hugging Face GPT-2's, with linear weights
stored [in, out] and applied as x·W + b (GPT-2's Conv1D layout), so a state dict loads in
`transformers.GPT2LMHeadModel` unchanged.

Init, all from the training RNG in this order: wte, wpe, then per block c_attn, attn.c_proj, c_fc, mlp.c_proj
(N(0, 0.02²); the two projections into the residual stream N(0, (0.02/√(2·n_layer))²)); biases 0, LayerNorm 1/0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import Field

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.common.strict import PositiveInt, Section
from minitrain.models.family import ModelFamily, Shapes, enforce, file_schema_of, heads_divide_width
from minitrain.models.language_model import LanguageModel
from minitrain.nn import Block, Dropout, Embedding, LayerNorm, ModuleDict, ModuleList, inference
from minitrain.nn.transformer import GPT2_INIT_STD


def parameter_shapes(config: Mapping[str, Any]) -> Shapes:
    """Every parameter's Hugging Face GPT-2 name and shape, in model order, without building the model (config
    validation lists the names of a model too big to build; the Hub export checks files against it)."""
    n_layer, d_model, d_ff, vocab_size, max_seq_len = (
        config[k] for k in ("n_layer", "d_model", "d_ff", "vocab_size", "max_seq_len"))
    shapes = [("transformer.wte.weight", (vocab_size, d_model)), ("transformer.wpe.weight", (max_seq_len, d_model))]
    for i in range(n_layer):
        h = f"transformer.h.{i}"
        shapes += [
            (f"{h}.ln_1.weight", (d_model,)), (f"{h}.ln_1.bias", (d_model,)),
            (f"{h}.attn.c_attn.weight", (d_model, 3 * d_model)), (f"{h}.attn.c_attn.bias", (3 * d_model,)),
            (f"{h}.attn.c_proj.weight", (d_model, d_model)), (f"{h}.attn.c_proj.bias", (d_model,)),
            (f"{h}.ln_2.weight", (d_model,)), (f"{h}.ln_2.bias", (d_model,)),
            (f"{h}.mlp.c_fc.weight", (d_model, d_ff)), (f"{h}.mlp.c_fc.bias", (d_ff,)),
            (f"{h}.mlp.c_proj.weight", (d_ff, d_model)), (f"{h}.mlp.c_proj.bias", (d_model,)),
        ]  # fmt: skip
    return [*shapes, ("transformer.ln_f.weight", (d_model,)), ("transformer.ln_f.bias", (d_model,))]


class MiniGPT(LanguageModel):
    """GPT-2 language model. `logits, loss = model(idx, targets, attn_pad_mask, loss_mask)`."""

    def __init__(
        self,
        n_layer: int,
        n_head: int,
        d_model: int,
        d_ff: int,
        vocab_size: int,
        max_seq_len: int,
        dropout: float = 0.0,
        rng: np.random.Generator | int = 0,
        dtype: type = np.float32,
        attn_scale: float | None = None,
    ) -> None:
        """`rng` is the training RNG (or a seed for one): it draws the initial weights and, later, dropout masks.
        `dtype` float64 is for gradient checks. `attn_scale` replaces attention's 1/√D (theory/03's exercise)."""
        super().__init__()
        self.config = dict(n_layer=n_layer, n_head=n_head, d_model=d_model, d_ff=d_ff, vocab_size=vocab_size,
                           max_seq_len=max_seq_len, dropout=float(dropout))  # fmt: skip
        enforce(heads_divide_width, self.config)
        if attn_scale is not None:  # only when set: the model files of the default scale keep their bytes
            self.config["attn_scale"] = float(attn_scale)
        self.rng = rng = np.random.default_rng(rng)
        residual_std = GPT2_INIT_STD / math.sqrt(2 * n_layer)
        self.transformer = ModuleDict(
            wte=Embedding(vocab_size, d_model, rng=rng, std=GPT2_INIT_STD, dtype=dtype),
            wpe=Embedding(max_seq_len, d_model, rng=rng, std=GPT2_INIT_STD, dtype=dtype),
            drop=Dropout(dropout, rng=rng),
            h=ModuleList(
                Block(d_model, n_head, d_ff, dropout, rng=rng, residual_std=residual_std, attn_scale=attn_scale,
                      dtype=dtype)
                for _ in range(n_layer)
            ),
            ln_f=LayerNorm(d_model, dtype=dtype),
        )

    def logits(self, idx: np.ndarray, attn_pad_mask: np.ndarray | None = None) -> Tensor:
        """idx (B, T) token ids -> logits (B, T, V); attn_pad_mask (B, T) is True on real tokens: padding keys are
        never attended to. `model(idx, targets, attn_pad_mask, loss_mask)` adds the loss (language_model.py)."""
        t = self.transformer
        x = t.drop(t.wte(idx) + t.wpe(np.arange(idx.shape[1])))
        for block in t.h:
            x = block(x, attn_pad_mask)
        return F.linear(t.ln_f(x), t.wte.weight.T)  # the output head is the token embedding, tied

    def attention_probs(self, idx: np.ndarray, attn_pad_mask: np.ndarray | None = None) -> np.ndarray:
        """Every layer's attention probabilities for a batch: (n_layer, B, H, T, T), row i of a head's (T, T)
        map is how position i spreads its attention over positions 0..i. Runs in inference mode (no tape)."""
        blocks = list(self.transformer.h)
        for block in blocks:
            block.attn.keep_probs = True
        try:
            with inference(self):
                self(idx, attn_pad_mask=attn_pad_mask)
            return np.stack([block.attn.probs for block in blocks])
        finally:
            for block in blocks:
                block.attn.keep_probs, block.attn.probs = False, None


# --- the family record: how configs, model files and run folders name MiniGPT (minitrain/models/family.py) ----


class MiniGPTKeys(Section):
    """`model:` keys of `type: minigpt`, with lab 01's values as defaults (its locked Phase 17 model)."""

    n_layer: PositiveInt = 2
    n_head: PositiveInt = 4
    d_model: PositiveInt = 64
    d_ff: PositiveInt = 256
    attn_scale: float | None = Field(None, gt=0, description="minigpt: attention score scale (default 1/sqrt(D))")


FAMILY = ModelFamily(name="minigpt", model=MiniGPT, keys=MiniGPTKeys,  # its files have no `type` (they predate it)
                     file_schema=file_schema_of("minigpt", MiniGPT, MiniGPTKeys, optional=("attn_scale",), typed=False),
                     file_prefix="minigpt-phase18", reads="text", parameter_shapes=parameter_shapes,
                     width=lambda config: config["d_model"], check=heads_divide_width,
                     pretrained="gpt2", learned_positions=True, layout=lambda config: "gpt2",
                     lora_targets=("c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"),
                     example={"n_layer": 1, "n_head": 2, "d_model": 16, "d_ff": 32, "vocab_size": 64,
                              "max_seq_len": 32})
