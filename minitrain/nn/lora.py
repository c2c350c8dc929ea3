"""`LoRALinear`: a frozen linear layer plus a trainable low-rank update (Hu et al. 2021, LoRA).

    y = base(x) + (alpha / rank) · dropout(x)·A·B          A (in, rank), B (rank, out)

Fine-tuning changes W by some ΔW; LoRA bets that a useful ΔW has low rank and learns it as A·B, so a layer of
in·out weights trains only rank·(in + out) numbers. B starts at zero, so the adapted model starts exactly as the
base model; A starts random (else A·B would stay zero: the gradient of A is proportional to B). `alpha / rank`
keeps the update's size independent of the rank chosen, so a learning rate found at one rank works at another.

When the base applies an activation (GPT-2's c_fc: gelu(x·W + b)), the update is added before it, as in PEFT:
y = gelu(x·W + b + (alpha/rank)·dropout(x)·A·B). The base is a `Linear` or a 4-bit `Linear4Bit` (QLoRA); its
weight never trains. Names follow PEFT's (`base_layer`, `lora_A`, `lora_B`, `lora_dropout`), so a state dict
maps onto PEFT's adapter file by a prefix and a transpose (minitrain/hub/peft.py).

Init of A (B = 0 always), drawn from the training RNG (the default generator when not given):
    gaussian  N(0, (1/rank)²)                    (PEFT's init_lora_weights="gaussian")
    kaiming   U(−1/√in, 1/√in)                   (PEFT's default: kaiming_uniform with a = √5)
    xavier    U(−√(6/(in + rank)), √(6/(in + rank)))
"""

from __future__ import annotations

import math

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.random import or_default
from minitrain.autograd.tensor import Tensor
from minitrain.nn.dropout import Dropout
from minitrain.nn.linear import Linear
from minitrain.nn.module import Module, Parameter
from minitrain.nn.quantized import Linear4Bit

INITS = ("gaussian", "kaiming", "xavier")


def init_lora_a(n_in: int, rank: int, init: str, rng: np.random.Generator | None = None) -> np.ndarray:
    """A's initial values (n_in, rank) by `init` (see the module docstring), drawn from `rng` (None: the default
    generator)."""
    if init == "gaussian":
        return or_default(rng).normal(0.0, 1.0 / rank, size=(n_in, rank))
    if init == "kaiming":
        bound = 1.0 / math.sqrt(n_in)
    elif init == "xavier":
        bound = math.sqrt(6.0 / (n_in + rank))
    else:
        raise ValueError(f"LoRA init must be one of {', '.join(INITS)}, got {init!r}")
    return or_default(rng).uniform(-bound, bound, size=(n_in, rank))


class LoRALinear(Module):
    """y = base(x) + (alpha/rank)·dropout(x)·A·B, added before the base's activation.  (..., in) -> (..., out)."""

    def __init__(
        self,
        base_layer: Linear | Linear4Bit,
        rank: int,
        alpha: float,
        dropout: float = 0.0,
        *,
        rng: np.random.Generator | None = None,
        init: str = "kaiming",
    ) -> None:
        """Wrap `base_layer` (a `Linear`, or a 4-bit `Linear4Bit`): keep it as `self.base_layer`, frozen here
        (`requires_grad_(False)`: it never trains, gets no gradient, is no trainable parameter), and set `self.rank`,
        `self.alpha`, `self.scaling = alpha / rank` and the parameters, named as PEFT names them (the adapter files
        and `minitrain.lora` find them by these names):

            self.lora_A  Parameter (in, rank), drawn from `rng` (None: the default generator) by `init` (the
                         module docstring's three rules)
            self.lora_B  Parameter (rank, out), all zeros: the adapted layer starts as exactly its base
            self.lora_dropout  Dropout(dropout, rng=rng), applied to the update's input only

        in the base weight's dtype (a Linear4Bit has no float weight: its bias's dtype, else float32).
        rank < 1 or alpha <= 0 is a ValueError."""
        super().__init__()
        if rank < 1 or alpha <= 0:
            raise ValueError(f"LoRALinear: rank must be >= 1 and alpha > 0, got rank {rank}, alpha {alpha}")
        dtype = base_layer.weight.dtype if isinstance(base_layer, Linear) else getattr(base_layer.bias, "dtype",
                                                                                      np.float32)
        self.rank, self.alpha, self.scaling = rank, alpha, alpha / rank
        self.base_layer = base_layer.requires_grad_(False)
        self.lora_A = Parameter(init_lora_a(base_layer.in_features, rank, init, rng), dtype=dtype)
        self.lora_B = Parameter(np.zeros((rank, base_layer.out_features)), dtype=dtype)
        self.lora_dropout = Dropout(dropout, rng=rng)

    @property
    def activation(self) -> str | None:
        """The base layer's activation (None, or "gelu" for GPT-2's c_fc): merging keeps it."""
        return self.base_layer.activation

    def forward(self, x: Tensor) -> Tensor:
        """y = act(x·W + b + (alpha/rank)·dropout(x)·A·B), on the tape (Tensor ops, so A and B get gradients).
        x (..., in) -> y (..., out). `self.base_layer.pre_activation(x)` is x·W + b; act is GELU when
        `self.activation == "gelu"`, else nothing."""
        y = self.base_layer.pre_activation(x) + self.update(x)
        return F.gelu(y) if self.activation == "gelu" else y

    def update(self, x: Tensor) -> Tensor:
        """(alpha/rank)·dropout(x)·A·B; the scaling is applied to the narrow (..., rank) product."""
        return F.linear(F.linear(self.lora_dropout(x), self.lora_A) * self.scaling, self.lora_B)

    def delta_weight(self) -> np.ndarray:
        """ΔW = (alpha/rank)·A·B (in, out): what merging adds to the base weight."""
        return (self.scaling * (self.lora_A.data @ self.lora_B.data)).astype(self.lora_A.dtype)

    def extra_repr(self) -> str:
        """What the model's repr shows beside the layer's name: `rank=4, alpha=8`."""
        return f"rank={self.rank}, alpha={self.alpha:g}"
