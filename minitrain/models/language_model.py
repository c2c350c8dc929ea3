"""What every language model shares: the call `logits, loss = model(idx, targets, attn_pad_mask, loss_mask)` that
lab 01's loop, evaluation and sampling make. A family's model (MiniGPT, MLPLanguageModel, the decoder) subclasses
LanguageModel, sets `config` (with max_seq_len) and defines `logits(idx, attn_pad_mask, ...)` -> (B, T, V).
A model may compute the loss without building the logits (the decoder does, by blocks of the vocabulary: a 262,144-token
vocabulary); its forward then returns None for them, so a caller that needs both asks for the logits (no targets)
and takes `F.cross_entropy` of them itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.nn import Module


class LanguageModel(Module):
    """A model of token sequences: its logits, and their mean cross-entropy against the targets."""

    config: dict[str, Any]

    def forward(self, idx: np.ndarray, targets: np.ndarray | None = None, attn_pad_mask: np.ndarray | None = None,
                loss_mask: np.ndarray | None = None, *inputs: Any, **named: Any) -> tuple[Tensor | None, Tensor | None]:
        """idx (B, T) token ids -> logits (B, T, V), and the mean cross-entropy over the positions loss_mask marks
        (every position if it is None) when targets (B, T) are given. attn_pad_mask (B, T) is True on real tokens;
        other inputs go on to `logits` (the decoder's segment_ids). ValueError when T exceeds max_seq_len."""
        self.check_length(idx)
        logits = self.logits(idx, attn_pad_mask, *inputs, **named)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits, targets, loss_mask)

    def check_length(self, idx: np.ndarray) -> None:
        """ValueError when idx (B, T) is longer than max_seq_len."""
        if idx.shape[1] > self.config["max_seq_len"]:
            raise ValueError(f"{type(self).__name__}: sequence length {idx.shape[1]} exceeds max_seq_len "
                             f"{self.config['max_seq_len']}")

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.config.items() if k != "type")
