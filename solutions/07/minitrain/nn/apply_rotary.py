"""Rotary position embeddings applied to queries or keys: each pair of dims rotated by its position's angle.

RotaryEmbedding (rotary.py) gives cos and sin of the angles m·ω_i for each token position m; this rotates a
head's vector by them, in transformers' layout for Llama, Qwen2 and Mistral: the head dim D is two halves
[x₁ | x₂], and pair i is (x₁[i], x₂[i]), so

    apply_rotary(x) = x·cos + rotate_half(x)·sin,      rotate_half([x₁ | x₂]) = [−x₂ | x₁]

which for each pair is the 2-D rotation (a, b) -> (a·cos θ − b·sin θ, b·cos θ + a·sin θ). A rotation keeps
lengths, and the score between a query rotated at position m and a key rotated at position n depends on the
positions only through m − n.
"""

from __future__ import annotations

import numpy as np

from minitrain.autograd.ops import concat
from minitrain.autograd.tensor import Tensor


def apply_rotary(x: Tensor, cos: np.ndarray, sin: np.ndarray) -> Tensor:
    """x rotated pair by pair: x·cos + rotate_half(x)·sin.  x (B, T, H, D) queries or keys (D even); cos, sin
    (B, T, 1, D) constants (each of the D/2 angles repeated in both halves, RotaryEmbedding's output) -> (B, T, H, D).

    The library's is one fused tape node (functional.rope); the same math from Tensor ops (slices, concat, *, +)
    gives the same values and gradients."""
    half = x.shape[-1] // 2
    rotated = concat([-x[..., half:], x[..., :half]], axis=-1)  # rotate_half: [x₁ | x₂] -> [−x₂ | x₁]
    return x * Tensor(cos, dtype=x.dtype) + rotated * Tensor(sin, dtype=x.dtype)
