"""The integer grid of affine quantization: a unit's scale and zero point, rounding onto the grid, and back.

Every value w of a unit (one tensor, one output channel, or one group of a channel's inputs: see
minitrain/quant/affine.py) shares a scale s and a zero point z:

    q = clamp(round(w / s) + z, qmin, qmax)          the integer stored
    ŵ = (q − z) · s                                  the value computed with

- symmetric:  z = 0, s = max(|lo|, |hi|) / qmax, q ∈ [qmin, qmax] = [−qmax, qmax], qmax = 2^(bits−1) − 1
  (−127..127 at 8 bits, −7..7 at 4, ternary −1..1 at 2): the grid is centred on 0.
- asymmetric: s = (hi − lo) / qmax with qmax = 2^bits − 1, z = round(−lo / s), q ∈ [0, qmax]: the grid spans
  [lo, hi], so 0 is exactly z.

Shapes: the values of a weight viewed as units (G, g, C) — G groups of g rows, C columns — and each unit's
[lo, hi], scale and zero point (G, C); one scale is broadcast over the g values of its unit, `scale[:, None, :]`.
A value inside its unit's range comes back off by at most s/2 (rounding is NumPy's, half to even).

`scheme` is a `minitrain.quant.scheme.Scheme`; these functions read its `symmetric`, `qmin` and `qmax`. Lab 05
asks students to write them (minitrain/seam.py); the library computes with whichever version is in use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from minitrain.quant.scheme import Scheme


def scale_and_zero(lo: np.ndarray, hi: np.ndarray, scheme: Scheme) -> tuple[np.ndarray, np.ndarray]:
    """(s, z) for the ranges [lo, hi] (float arrays of one shape, e.g. (G, C), with lo ≤ 0 ≤ hi).

    symmetric: s = max(−lo, hi) / qmax and z = 0; asymmetric: s = (hi − lo) / qmax and z = round(−lo / s),
    clipped to [0, qmax]. s is float32, z int32, both of lo's shape. A unit whose range is [0, 0] (all zeros)
    gets s = 1, so that dividing by it is safe (every value then rounds to z)."""
    if scheme.symmetric:
        scale = np.maximum(-lo, hi) / scheme.qmax
        zero = np.zeros(np.shape(lo), dtype=np.int32)
    else:
        scale = (hi - lo) / scheme.qmax
        zero = None
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)  # an all-zero unit: any scale gives q = z
    if zero is None:
        zero = np.clip(np.round(-lo / scale), 0, scheme.qmax).astype(np.int32)
    return scale, zero


def quantize_units(units: np.ndarray, scale: np.ndarray, zero: np.ndarray, scheme: Scheme) -> np.ndarray:
    """The codes of `units` (G, g, C): q = clamp(round(w / s) + z, qmin, qmax) with each unit's s and z (G, C),
    stored as q − qmin in uint8 (so 0 .. 2^bits − 1 whatever the scheme). Rounding to the NEAREST level."""
    q = np.clip(np.round(units / scale[:, None, :]) + zero[:, None, :], scheme.qmin, scheme.qmax)
    return (q - scheme.qmin).astype(np.uint8)


def dequantize_units(codes: np.ndarray, scale: np.ndarray, zero: np.ndarray, scheme: Scheme) -> np.ndarray:
    """ŵ = (q − z) · s as float32 (G, g, C), from the codes of `quantize_units` (q = code + qmin)."""
    q = codes.astype(np.int32) + scheme.qmin - zero[:, None, :]
    return (q * scale[:, None, :]).astype(np.float32)
