"""Rotary position embeddings (RoPE, Su et al. 2021) as transformers computes them for Llama, Qwen2 and Mistral.

Each head's D dims are D/2 pairs (dim i and dim i + D/2: transformers' `rotate_half` layout), and pair i of the
query and key at position m is rotated by the angle m·ω_i, ω_i = θ^(−2i/D). A rotation keeps lengths, and the
score q_m·k_n then depends on the positions only through m − n: attention sees relative positions, with no
learned position table, and θ sets how slowly the lowest frequencies turn (10 000 for Llama 2, 100 000 for
SmolLM2, 500 000 for Llama 3).

Llama 3.1's `rope_scaling` ({"rope_type": "llama3", "factor", "low_freq_factor", "high_freq_factor",
"original_max_position_embeddings"}) stretches a model to longer contexts by slowing the low frequencies, as
transformers' `_compute_llama3_parameters`, with L = original_max_position_embeddings and wavelength λ_i = 2π/ω_i:

    λ_i < L/high_freq_factor     ω_i unchanged                       (fast frequencies: local order)
    λ_i > L/low_freq_factor      ω_i / factor                        (slow frequencies: stretched)
    otherwise                    (1 − s)·ω_i/factor + s·ω_i,   s = (L/λ_i − low_freq_factor) / (high − low)

transformers' linear scaling ({"rope_type": "linear", "factor"}, Gemma 3's global layers) divides every ω_i by factor.

Angles are taken in float32 (position · ω_i, one rounded product, as transformers does) so long positions round
alike; a float64 model (gradient checks) computes them in float64.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from minitrain.common.errors import ArgumentError
from minitrain.nn.module import Module

LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def inverse_frequencies(head_dim: int, theta: float, scaling: Mapping[str, Any] | None = None) -> np.ndarray:
    """ω_i = θ^(−2i/D) for i < D/2, with Llama 3's scaling applied when given (see the module docstring)."""
    freqs = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if scaling is None:
        return freqs
    if scaling.get("rope_type") == "linear" and "factor" in scaling:
        return freqs / float(scaling["factor"])
    if scaling.get("rope_type") != "llama3" or any(key not in scaling for key in LLAMA3_KEYS):
        raise ArgumentError(f"rope_scaling: only the linear and Llama 3 forms are supported, {{'rope_type': 'llama3', "
                            f"{', '.join(repr(k) + ': ...' for k in LLAMA3_KEYS)}}}; got {dict(scaling)}")
    factor, low, high = (float(scaling[k]) for k in LLAMA3_KEYS[:3])
    context = float(scaling["original_max_position_embeddings"])
    wavelength = 2 * math.pi / freqs
    scaled = np.where(wavelength > context / low, freqs / factor, freqs)
    smooth = (context / wavelength - low) / (high - low)
    medium = (wavelength >= context / high) & (wavelength <= context / low)
    return np.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)


def rope_positions(
    batch: int, time: int, pad_mask: np.ndarray | None = None, segment_ids: np.ndarray | None = None,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Each token's position (B, T) int64: how many real tokens of its own segment come before it.

    pad_mask (B, T) True on real tokens: padding is not counted, so a left-padded row starts at 0 like an
    unpadded one. segment_ids (B, T): positions restart at 0 where a new segment (packed document) begins.
    start (B,): positions already taken (a KV cache's earlier tokens). Padding gets the position its neighbour
    would have (it is never attended to)."""
    real = np.ones((batch, time), np.int64) if pad_mask is None else np.asarray(pad_mask, dtype=np.int64)
    before = np.cumsum(real, axis=1) - real  # real tokens before t in the row
    if segment_ids is not None:
        segments = np.asarray(segment_ids)
        starts = np.ones((batch, time), dtype=bool)
        starts[:, 1:] = segments[:, 1:] != segments[:, :-1]
        first = np.maximum.accumulate(np.where(starts, np.arange(time), 0), axis=1)  # index of the segment start
        before = before - np.take_along_axis(before, first, axis=1)
    return before if start is None else before + np.asarray(start, dtype=np.int64)[:, None]


class RotaryEmbedding(Module):
    """cos, sin (B, T, 1, D) for token positions (B, T): the angles m·ω_i, each repeated in both halves of the
    head dim, ready for `functional.rope` on (B, T, H, D). No parameters: ω is fixed by θ and the scaling."""

    def __init__(self, head_dim: int, theta: float = 10000.0, scaling: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.head_dim, self.theta = head_dim, theta
        self.inv_freq = inverse_frequencies(head_dim, theta, scaling)

    def forward(self, positions: np.ndarray, dtype: type = np.float32) -> tuple[np.ndarray, np.ndarray]:
        dtype = np.float64 if np.dtype(dtype) == np.float64 else np.float32
        angles = np.asarray(positions, dtype=dtype)[..., None] * self.inv_freq.astype(dtype)  # (B, T, D/2)
        angles = np.concatenate([angles, angles], axis=-1)[:, :, None, :]
        return np.cos(angles), np.sin(angles)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, theta={self.theta:g}"
