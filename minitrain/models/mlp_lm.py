"""MLP-LM: a fixed-context neural language model (Bengio et al., 2003), the rung between the n-gram and MiniGPT.

Like the n-gram, it predicts the next character from the previous k only; unlike it, it reads them through
learned character vectors and a hidden layer, so what it learns about one context carries over to similar ones.

    idx (B, T) ──► the k ids ending at each position (B, T, k) ──► wte (B, T, k, E) ──► concat (B, T, k·E)
               ──► [Linear → tanh → dropout] per hidden width ──► Linear ──► logits (B, T, V)

Positions before the start of a line read id 0 (PAD), so every position has k ids; the model is causal by
construction (position t never sees t + 1), and it is trained, evaluated and sampled through the same interface
as MiniGPT: `logits, loss = model(idx, targets, attn_pad_mask, loss_mask)`.

Init, from the training RNG: wte ~ N(0, 1); hidden layers LeCun normal (std 1/√in); the output layer N(0, 0.02²),
so the first predictions are close to uniform (the loss starts near ln V).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import Field

from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import ArgumentError
from minitrain.common.strict import PositiveInt, Section
from minitrain.models.family import ModelFamily, Shapes, file_schema_of
from minitrain.models.language_model import LanguageModel
from minitrain.nn import GELU, Dropout, Embedding, Linear, ReLU, Sequential, Tanh

ACTIVATIONS = {"tanh": Tanh, "relu": ReLU, "gelu": GELU}
PAD_ID = 0  # minitrain.data.tokenizer's PAD: what a window reads before the line starts
OUTPUT_INIT_STD = 0.02


def parameter_shapes(config: Mapping[str, Any]) -> Shapes:
    """Every parameter's name and shape, in model order, without building the model (as model.parameter_shapes)."""
    vocab_size, d_embed = config["vocab_size"], config["d_embed"]
    shapes, width = [("wte.weight", (vocab_size, d_embed))], config["context"] * d_embed
    for i, out in enumerate([*config["hidden"], vocab_size]):
        index = 3 * i  # each hidden width adds Linear, activation, Dropout to the Sequential
        shapes += [(f"mlp.{index}.weight", (width, out)), (f"mlp.{index}.bias", (out,))]
        width = out
    return shapes


class MLPLanguageModel(LanguageModel):
    """Fixed-context MLP language model. `logits, loss = model(idx, targets, attn_pad_mask, loss_mask)`."""

    def __init__(
        self,
        vocab_size: int,
        max_seq_len: int,
        context: int = 8,
        d_embed: int = 16,
        hidden: list[int] | tuple[int, ...] = (256,),
        activation: str = "tanh",
        dropout: float = 0.0,
        rng: np.random.Generator | int = 0,
        dtype: type = np.float32,
    ) -> None:
        """`context` (k) characters are read, each as a `d_embed`-vector; `hidden` lists the hidden layers' widths.
        `rng` is the training RNG (or a seed): initial weights and dropout masks."""
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ArgumentError(f"model: activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
        self.config = dict(type="mlp_lm", vocab_size=vocab_size, max_seq_len=max_seq_len, context=context,
                           d_embed=d_embed, hidden=list(hidden), activation=activation,
                           dropout=float(dropout))  # fmt: skip
        self.rng = rng = np.random.default_rng(rng)
        self.context = context
        self.wte = Embedding(vocab_size, d_embed, rng=rng, dtype=dtype)
        layers, width = [], context * d_embed
        for out in hidden:
            layers += [Linear(width, out, rng=rng, dtype=dtype), ACTIVATIONS[activation](), Dropout(dropout, rng=rng)]
            width = out
        self.mlp = Sequential(*layers, Linear(width, vocab_size, rng=rng, std=OUTPUT_INIT_STD, dtype=dtype))

    def logits(self, idx: np.ndarray, attn_pad_mask: np.ndarray | None = None) -> Tensor:
        """idx (B, T) -> logits (B, T, V). attn_pad_mask is accepted for the common interface (language_model.py);
        padding only ever follows the line, and a position reads only earlier ones, so it changes nothing here."""
        batch, time = idx.shape
        padded = np.concatenate([np.full((batch, self.context - 1), PAD_ID, dtype=idx.dtype), idx], axis=1)
        windows = np.lib.stride_tricks.sliding_window_view(padded, self.context, axis=1)  # (B, T, k), a view
        return self.mlp(self.wte(windows).reshape(batch, time, -1))  # (B, T, k·E): the k vectors side by side


# --- the family record: how configs, model files and run folders name it (minitrain/models/family.py) ---------

Activation = Literal["tanh", "relu", "gelu"]


class MLPLMKeys(Section):
    """`model:` keys of `type: mlp_lm`; left out, they take MLPLanguageModel's defaults."""

    context: PositiveInt | None = Field(None, description="mlp_lm: characters read before each prediction")
    d_embed: PositiveInt | None = Field(None, description="mlp_lm: size of each character's vector")
    hidden: list[PositiveInt] | None = Field(None, min_length=1, description="mlp_lm: hidden layer widths")
    activation: Activation | None = Field(None, description="mlp_lm: hidden activation")


FAMILY = ModelFamily(name="mlp_lm", model=MLPLanguageModel, keys=MLPLMKeys,
                     file_schema=file_schema_of("mlp_lm", MLPLanguageModel, MLPLMKeys),
                     file_prefix="mlp-lm", reads="text", parameter_shapes=parameter_shapes,
                     width=lambda config: max([*config["hidden"], config["context"] * config["d_embed"]]),
                     example={"type": "mlp_lm", "vocab_size": 64, "max_seq_len": 32, "context": 4, "d_embed": 8,
                              "hidden": [16]})
