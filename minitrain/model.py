"""MiniGPT: the GPT-2 architecture at course size, readable top to bottom.

    idx (B, T) ──► wte[idx] + wpe[0..T) ──► dropout ──► n_layer × Block ──► ln_f ──► · wteᵀ ──► logits (B, T, V)

    Block(x):  x = x + dropout(c_proj(attention(c_attn(ln_1(x)))))     causal, n_head heads, scaled by 1/√D
               x = x + dropout(mlp.c_proj(gelu(mlp.c_fc(ln_2(x)))))     hidden size d_ff

Pre-LayerNorm (eps 1e-5), GELU with the tanh approximation, biases in every linear layer, and the output head
tied to the token embedding: exactly GPT-2. Parameter names and shapes are Hugging Face GPT-2's, with linear
weights stored [in, out] and applied as x·W + b (GPT-2's Conv1D layout), so a state dict loads in
`transformers.GPT2LMHeadModel` unchanged.

All parameters live in one flat `ParameterBuffer` (model.buffer): each parameter Tensor is a view into it, and
its gradient a view into the flat gradient, so zeroing, clipping and the optimizer each make one pass.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import minitrain.functional as F
from minitrain.errors import UserError
from minitrain.parameters import ParameterBuffer
from minitrain.tensor import Tensor, no_grad

CONFIG_KEYS = ("n_layer", "n_head", "d_model", "d_ff", "vocab_size", "max_seq_len", "dropout")


def parameter_shapes(
    n_layer: int, d_model: int, d_ff: int, vocab_size: int, max_seq_len: int
) -> list[tuple[str, tuple[int, ...]]]:
    """Every parameter's Hugging Face GPT-2 name and shape, in model order."""
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


def initial_value(name: str, shape: tuple[int, ...], n_layer: int, rng: np.random.Generator) -> np.ndarray:
    """GPT-2's init: weights N(0, 0.02); the projections that write into the residual stream N(0, 0.02/√(2·n_layer))
    so the stream's variance does not grow with depth; biases 0; LayerNorm gain 1 and shift 0."""
    if ".ln_" in name:
        return np.ones(shape) if name.endswith(".weight") else np.zeros(shape)
    if name.endswith(".bias"):
        return np.zeros(shape)
    std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
    return rng.normal(0.0, std, size=shape)


@contextmanager
def inference(model: Any) -> Iterator[None]:
    """`with inference(model):` eval mode (no dropout) and no tape for the block; the model's mode is restored
    after it, even on an error. Evaluation, exact match and sampling all run the model this way."""
    was_training = getattr(model, "training", False)
    model.eval()
    try:
        with no_grad():
            yield
    finally:
        if was_training:
            model.train()


class MiniGPT:
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
    ) -> None:
        """`rng` is the training RNG (or a seed for one): it draws the initial weights and, later, dropout masks.
        `dtype` float64 is for gradient checks."""
        if d_model % n_head:
            raise UserError(f"model: d_model ({d_model}) must be divisible by n_head ({n_head})", 2)
        if not 0.0 <= dropout < 1.0:
            raise UserError(f"model: dropout must be in [0, 1), got {dropout}", 2)
        self.config = dict(n_layer=n_layer, n_head=n_head, d_model=d_model, d_ff=d_ff, vocab_size=vocab_size,
                           max_seq_len=max_seq_len, dropout=float(dropout))  # fmt: skip
        self.rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self.training = True
        shapes = parameter_shapes(n_layer, d_model, d_ff, vocab_size, max_seq_len)
        initial = [(name, initial_value(name, shape, n_layer, self.rng)) for name, shape in shapes]
        self.buffer = ParameterBuffer(initial, dtype=dtype)
        self._params: dict[str, Tensor] = {}
        for name, _ in shapes:
            view = self.buffer.views(name)
            self._params[name] = p = Tensor(view.data, requires_grad=True)
            p.grad = view.grad  # backward accumulates straight into the flat gradient

    # --------------------------------------------------------------------------------------------- forward
    def __call__(
        self,
        idx: np.ndarray,
        targets: np.ndarray | None = None,
        attn_pad_mask: np.ndarray | None = None,
        loss_mask: np.ndarray | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """idx (B, T) token ids -> logits (B, T, V), and the mean cross-entropy over the positions loss_mask marks
        (every position if it is None) when targets (B, T) are given. attn_pad_mask (B, T) is True on real tokens:
        padding keys are never attended to."""
        cfg, p = self.config, self._params
        time = idx.shape[1]
        if time > cfg["max_seq_len"]:
            raise ValueError(f"MiniGPT: sequence length {time} exceeds max_seq_len {cfg['max_seq_len']}")
        x = F.embedding(p["transformer.wte.weight"], idx) + F.embedding(p["transformer.wpe.weight"], np.arange(time))
        x = self._dropout(x)
        for i in range(cfg["n_layer"]):
            x = self._block(x, f"transformer.h.{i}", attn_pad_mask)
        x = F.layer_norm(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"])
        logits = F.linear(x, p["transformer.wte.weight"].T)  # the output head is the token embedding, tied
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits, targets, loss_mask)

    def _block(self, x: Tensor, h: str, attn_pad_mask: np.ndarray | None) -> Tensor:
        p = self._params
        qkv = F.linear(F.layer_norm(x, p[f"{h}.ln_1.weight"], p[f"{h}.ln_1.bias"]),
                       p[f"{h}.attn.c_attn.weight"], p[f"{h}.attn.c_attn.bias"])  # fmt: skip
        heads = F.self_attention(qkv, self.config["n_head"], attn_pad_mask)
        x = x + self._dropout(F.linear(heads, p[f"{h}.attn.c_proj.weight"], p[f"{h}.attn.c_proj.bias"]))
        hidden = F.linear(F.layer_norm(x, p[f"{h}.ln_2.weight"], p[f"{h}.ln_2.bias"]),
                          p[f"{h}.mlp.c_fc.weight"], p[f"{h}.mlp.c_fc.bias"], activation="gelu")  # fmt: skip
        return x + self._dropout(F.linear(hidden, p[f"{h}.mlp.c_proj.weight"], p[f"{h}.mlp.c_proj.bias"]))

    def _dropout(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.config["dropout"], self.training, self.rng)

    # --------------------------------------------------------------------------------------------- state
    def train(self) -> MiniGPT:
        self.training = True
        return self

    def eval(self) -> MiniGPT:
        self.training = False
        return self

    def named_parameters(self) -> list[tuple[str, Tensor]]:
        return list(self._params.items())

    def parameters(self) -> list[Tensor]:
        return list(self._params.values())

    def num_parameters(self) -> int:
        return self.buffer.size

    def zero_grad(self) -> None:
        self.buffer.zero_grad()

    def state_dict(self) -> dict[str, np.ndarray]:
        """name -> a copy of the parameter (Hugging Face GPT-2 names, [in, out] linear weights)."""
        return {name: t.data.copy() for name, t in self._params.items()}

    def load_state_dict(self, state_dict: dict[str, np.ndarray], source: str = "state dict") -> None:
        """Copy every tensor in; a missing, unexpected or mis-shaped tensor is one UserError naming them all."""
        problems = [f"missing tensor '{n}'" for n in self._params if n not in state_dict]
        problems += [f"unexpected tensor '{n}'" for n in state_dict if n not in self._params]
        problems += [
            f"tensor '{n}' has shape {list(np.shape(a))}, the model expects {list(self._params[n].shape)}"
            for n, a in state_dict.items() if n in self._params and np.shape(a) != self._params[n].shape
        ]  # fmt: skip
        if problems:
            raise UserError(f"{source} does not fit this MiniGPT: " + "; ".join(problems))
        for name, array in state_dict.items():
            self._params[name].data[...] = array  # in place: the tensor stays a view of the flat buffer
