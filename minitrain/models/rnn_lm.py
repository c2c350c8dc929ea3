"""RNN-LM: a character LSTM or GRU language model, a rung between the fixed-context MLP-LM and MiniGPT.

Where the MLP-LM reads a window of the last k characters and MiniGPT attends to every earlier one, a recurrent
model carries one state vector along the line: each character updates it (minitrain/nn/recurrent.py), and the
next character is predicted from it. Nothing bounds how far back it can remember, but everything it remembers
has to fit in that vector.

    idx (B, T) ──► wte (B, T, E) ──► LSTM or GRU, num_layers (B, T, H) ──► dropout ──► head ──► logits (B, T, V)

Causal by construction (the state at t has read positions ≤ t only), so padding after the line changes nothing
before it; trained, evaluated and sampled through the interface MiniGPT's is: `logits, loss = model(idx, targets,
attn_pad_mask, loss_mask)`. Init, from the training RNG: wte ~ N(0, 1); the recurrent weights PyTorch's
U(−1/√H, 1/√H); the head N(0, 0.02²), so the first predictions are close to uniform (the loss starts near ln V).
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
from minitrain.nn import GRU, LSTM, Dropout, Embedding, Linear

CELLS = {"lstm": LSTM, "gru": GRU}
GATES = {"lstm": 4, "gru": 3}
OUTPUT_INIT_STD = 0.02


def parameter_shapes(config: Mapping[str, Any]) -> Shapes:
    """Every parameter's name and shape, in model order, without building the model (as model.parameter_shapes)."""
    vocab, hidden, rows = config["vocab_size"], config["hidden_size"], GATES[config["cell"]] * config["hidden_size"]
    shapes = [("wte.weight", (vocab, config["d_embed"]))]
    for layer in range(config["num_layers"]):
        width = config["d_embed"] if layer == 0 else hidden
        shapes += [(f"rnn.weight_ih_l{layer}", (rows, width)), (f"rnn.weight_hh_l{layer}", (rows, hidden)),
                   (f"rnn.bias_ih_l{layer}", (rows,)), (f"rnn.bias_hh_l{layer}", (rows,))]
    return [*shapes, ("head.weight", (hidden, vocab)), ("head.bias", (vocab,))]


class RNNLanguageModel(LanguageModel):
    """Character LSTM/GRU language model. `logits, loss = model(idx, targets, attn_pad_mask, loss_mask)`."""

    def __init__(
        self,
        vocab_size: int,
        max_seq_len: int,
        cell: str = "lstm",
        d_embed: int = 16,
        hidden_size: int = 256,
        num_layers: int = 1,
        dropout: float = 0.0,
        rng: np.random.Generator | int = 0,
        dtype: type = np.float32,
    ) -> None:
        """`cell` lstm or gru, `num_layers` of `hidden_size` units over `d_embed`-vectors of the characters.
        `rng` is the training RNG (or a seed): initial weights and dropout masks."""
        super().__init__()
        if cell not in CELLS:
            raise ArgumentError(f"model: cell must be one of {', '.join(CELLS)}, got {cell!r}")
        self.config = dict(type="rnn_lm", vocab_size=vocab_size, max_seq_len=max_seq_len, cell=cell, d_embed=d_embed,
                           hidden_size=hidden_size, num_layers=num_layers, dropout=float(dropout))  # fmt: skip
        self.rng = rng = np.random.default_rng(rng)
        self.wte = Embedding(vocab_size, d_embed, rng=rng, dtype=dtype)
        self.rnn = CELLS[cell](d_embed, hidden_size, num_layers, batch_first=True, rng=rng, dtype=dtype)
        self.drop = Dropout(dropout, rng=rng)
        self.head = Linear(hidden_size, vocab_size, rng=rng, std=OUTPUT_INIT_STD, dtype=dtype)

    def logits(self, idx: np.ndarray, attn_pad_mask: np.ndarray | None = None) -> Tensor:
        """idx (B, T) -> logits (B, T, V). attn_pad_mask is accepted for the common interface (language_model.py):
        padding only follows the line, and the state at t has read only positions ≤ t."""
        output, _ = self.rnn(self.wte(idx))  # (B, T, H)
        return self.head(self.drop(output))


# --- the family record: how configs, model files and run folders name it (minitrain/models/family.py) ---------


class RNNLMKeys(Section):
    """`model:` keys of `type: rnn_lm`; left out, they take RNNLanguageModel's defaults."""

    cell: Literal["lstm", "gru"] | None = Field(None, description="rnn_lm: the recurrent layer")
    d_embed: PositiveInt | None = Field(None, description="rnn_lm: size of each character's vector")
    hidden_size: PositiveInt | None = Field(None, description="rnn_lm: the state's size")
    num_layers: PositiveInt | None = Field(None, description="rnn_lm: recurrent layers stacked")


FAMILY = ModelFamily(name="rnn_lm", model=RNNLanguageModel, keys=RNNLMKeys,
                     file_schema=file_schema_of("rnn_lm", RNNLanguageModel, RNNLMKeys),
                     file_prefix="rnn-lm", reads="text", parameter_shapes=parameter_shapes,
                     width=lambda config: GATES[config["cell"]] * config["hidden_size"],
                     example={"type": "rnn_lm", "vocab_size": 64, "max_seq_len": 32, "cell": "gru", "d_embed": 8,
                              "hidden_size": 16})
