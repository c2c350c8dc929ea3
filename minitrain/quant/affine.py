"""Integer (affine) quantization of a weight matrix: what `minitrain quantize` and quantization-aware training do.

Every value of a unit (the whole tensor, one output channel, or one group of inputs of a channel) shares a scale
s and a zero point z, q = clamp(round(w / s) + z, qmin, qmax) and ŵ = (q − z) · s, symmetric (z = 0) or
asymmetric: the grid itself is minitrain/quant/grid.py.

[lo, hi] is the unit's range, widened to include 0 (so 0 is exactly representable), and chosen by `method`:
minmax (the extreme values), percentile (the P-th percentiles: outliers are clipped so the rest get a finer
grid) or mse (the clipping, from 100 % down to 50 % of the extremes, whose error ‖ΔW‖² is smallest; with the
inputs' Gram matrix H = XᵀX from calibration data, the output error ‖XΔW‖² = Σ_c Δw_cᵀ H Δw_c instead).

Granularity, for a weight W (in, out) applied as x·W: per_tensor (one unit), per_channel (a unit per output
column), per_group (a unit per `group_size` consecutive inputs of each column; group_size must divide `in`).
Shapes: W is viewed as units (G, g, C) — G groups of g rows, C columns — and each scale is (G, C).

Bound, by construction: a value inside its unit's range [(qmin − z)·s, (qmax − z)·s] is off by at most s/2
(NumPy's rounding, half to even); with minmax so is every value (the rounded zero point leaves any out < s/2).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from minitrain.common.registry import load
from minitrain.quant.grid import dequantize_units, quantize_units, scale_and_zero
from minitrain.quant.scheme import METHODS, Scheme

MSE_CLIP_RATIOS = np.linspace(1.0, 0.5, 21)  # the ranges the mse search tries, as shares of the minmax range


class Quantized(NamedTuple):
    """A weight in integers: codes (G, g, C) as q − qmin in [0, 2^bits) (uint8), scale and zero point (G, C)."""

    codes: np.ndarray
    scale: np.ndarray  # float32
    zero_point: np.ndarray  # int32; 0 everywhere for symmetric


def unit_ranges(units: np.ndarray, scheme: Scheme, gram: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] of each unit (each (G, C)) by `scheme.method` (its record's `ranges`), always containing 0.

    `gram` (in, in), the calibration inputs' XᵀX, makes the mse search minimise the output error instead of the
    weight error (per_tensor has no input axis to weigh, so it keeps the weight error)."""
    return load(METHODS[scheme.method].ranges)(units, scheme, gram)


def minmax_ranges(units: np.ndarray, scheme: Scheme, gram: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The extreme values of each unit, widened to include 0."""
    return np.minimum(units.min(axis=1), 0.0), np.maximum(units.max(axis=1), 0.0)


def percentile_ranges(units: np.ndarray, scheme: Scheme, gram: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The (100 − P)-th and P-th percentiles of each unit, widened to include 0."""
    lo = np.percentile(units, 100 - scheme.percentile, axis=1)
    hi = np.percentile(units, scheme.percentile, axis=1)
    return np.minimum(lo, 0.0), np.maximum(hi, 0.0)


def mse_ranges(units: np.ndarray, scheme: Scheme, gram: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Of the minmax range scaled by each of MSE_CLIP_RATIOS, the one whose error (`_error_weights`) is least."""
    lo, hi = minmax_ranges(units, scheme)
    weigh = _error_weights(units, scheme, gram)
    best_error = best_lo = best_hi = None
    for ratio in MSE_CLIP_RATIOS:
        trial_lo, trial_hi = lo * ratio, hi * ratio
        scale, zero = scale_and_zero(trial_lo, trial_hi, scheme)
        error = weigh(units - dequantize_units(quantize_units(units, scale, zero, scheme), scale, zero, scheme))
        if best_error is None:
            best_error, best_lo, best_hi = error, trial_lo, trial_hi
        else:
            better = error < best_error
            best_error = np.where(better, error, best_error)
            best_lo, best_hi = np.where(better, trial_lo, best_lo), np.where(better, trial_hi, best_hi)
    return best_lo, best_hi


def _error_weights(units: np.ndarray, scheme: Scheme, gram: np.ndarray | None):
    """The error of each unit for a difference ΔW viewed as units: Σ Δw² or, with `gram`, Σ Δwᵀ H Δw."""
    if gram is None or scheme.granularity == "per_tensor":
        return lambda delta: np.einsum("gkc,gkc->gc", delta, delta)
    n_groups, group = units.shape[0], units.shape[1]
    blocks = np.stack([gram[i * group:(i + 1) * group, i * group:(i + 1) * group] for i in range(n_groups)])
    return lambda delta: np.einsum("gkc,gkl,glc->gc", delta, blocks, delta)


def quantize(weight: np.ndarray, scheme: Scheme, gram: np.ndarray | None = None) -> Quantized:
    """A 2-D weight (in, out) in integers, by `scheme` (ranges chosen with `gram` when given)."""
    units = scheme.units(np.asarray(weight, dtype=np.float32))
    scale, zero = scale_and_zero(*unit_ranges(units, scheme, gram), scheme)
    return Quantized(quantize_units(units, scale, zero, scheme), scale, zero)


def dequantize(quantized: Quantized, scheme: Scheme, shape: tuple[int, int]) -> np.ndarray:
    """The float32 weight of `shape` that `quantize` stored."""
    codes, scale, zero = quantized
    return dequantize_units(codes, scale, zero, scheme).reshape(shape)


def fake_quantize_array(weight: np.ndarray, scheme: Scheme) -> tuple[np.ndarray, np.ndarray]:
    """(ŵ, inside): the weight quantized and back in one go, and where it lay inside its unit's grid range (the
    positions a straight-through estimator passes gradients to)."""
    units = scheme.units(weight)
    scale, zero = scale_and_zero(*unit_ranges(units, scheme), scheme)
    lowest = ((scheme.qmin - zero) * scale)[:, None, :]
    highest = ((scheme.qmax - zero) * scale)[:, None, :]
    rounded = dequantize_units(quantize_units(units, scale, zero, scheme), scale, zero, scheme)
    inside = (units >= lowest) & (units <= highest)
    return rounded.astype(weight.dtype).reshape(weight.shape), inside.reshape(weight.shape)
