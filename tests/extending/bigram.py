"""`model.type: bigram`, as a user adds a model family: save this file as minitrain/models/bigram.py and add the
line `"bigram",` to FAMILY_MODULES in minitrain/models/registry.py.

The simplest language model (makemore's first): a table of next-character logits, one row per character.

    idx (B, T) ──► wte[idx] (B, T, V): row c holds the logits of the character that follows c
"""

from __future__ import annotations

import numpy as np

from minitrain.autograd.tensor import Tensor
from minitrain.common.strict import Section
from minitrain.models.family import ModelFamily, file_schema_of
from minitrain.models.language_model import LanguageModel
from minitrain.nn import Embedding


class BigramLM(LanguageModel):
    """`logits, loss = model(idx, targets, attn_pad_mask, loss_mask)`, as every language model of minitrain."""

    def __init__(self, vocab_size: int, max_seq_len: int, rng: np.random.Generator | int = 0,
                 dtype: type = np.float32) -> None:
        super().__init__()
        self.config = {"type": "bigram", "vocab_size": vocab_size, "max_seq_len": max_seq_len}
        self.rng = rng = np.random.default_rng(rng)  # the training RNG, or a seed for one
        self.wte = Embedding(vocab_size, vocab_size, rng=rng, std=0.02, dtype=dtype)

    def logits(self, idx: np.ndarray, attn_pad_mask: np.ndarray | None = None) -> Tensor:
        return self.wte(idx)  # (B, T, V): each position reads its own character only


class BigramKeys(Section):
    """`model:` keys of its own: none (vocab_size and max_seq_len are every language model's)."""


FAMILY = ModelFamily(name="bigram", model=BigramLM, keys=BigramKeys, file_prefix="bigram",
                     file_schema=file_schema_of("bigram", BigramLM, BigramKeys),
                     reads="text", parameter_shapes=lambda c: [("wte.weight", (c["vocab_size"], c["vocab_size"]))],
                     width=lambda c: c["vocab_size"], example={"type": "bigram", "vocab_size": 64, "max_seq_len": 32})
