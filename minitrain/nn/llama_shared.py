"""What the Llama family's layers share: transformers' init std for their weights, the KV cache they use, and
their frozen projections of one input computed as one product.

Kept apart from the layers themselves (rms_norm.py, apply_rotary.py, llama_mlp.py, llama_attention.py) so that
each of those files holds its one piece, which lab 07 asks a student to write (minitrain/seam.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.nn.linear import Linear
from minitrain.nn.lora import LoRALinear

LLAMA_INIT_STD = 0.02  # transformers' initializer_range for Llama, Qwen2 and Mistral
JOINT_ROWS = 256  # from this many rows of x the joined weight's copy is under a twentieth of the product's time


def project(x: Tensor, layers: Sequence[Linear | LoRALinear]) -> list[Tensor]:
    """[layer(x) for layer in layers] (q, k, v; gate, up). When every base is a frozen plain `Linear` (LoRA's, or
    a frozen model's) and x has at least JOINT_ROWS rows, the bases are one product (functional.frozen_linears:
    one x·W forward, one dx backward instead of one per layer) and each LoRA update is added to its block, as
    LoRALinear.forward adds it: the same values (dx to float32 rounding), in the same order of random draws."""
    bases = [layer.base_layer if isinstance(layer, LoRALinear) else layer for layer in layers]
    frozen = all(type(b) is Linear and b.activation is None and b.weight_transform is None
                 and not b.weight.requires_grad and (b.bias is None or not b.bias.requires_grad) for b in bases)
    if not frozen or x.data.size < JOINT_ROWS * x.shape[-1]:
        return [layer(x) for layer in layers]
    blocks = F.frozen_linears(x, [b.weight for b in bases], [b.bias for b in bases])
    return [y + layer.update(x) if isinstance(layer, LoRALinear) else y
            for y, layer in zip(blocks, layers, strict=True)]


class KeyValueStore(Protocol):
    """One layer's KV cache (minitrain/models/kv_cache.py): stores the new keys and values, returns all so far."""

    def update(self, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
