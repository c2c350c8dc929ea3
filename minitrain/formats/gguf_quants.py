"""The GGML tensor types a GGUF is written in (`TENSOR_TYPES`), and minitrain's own NumPy quantizers for the block
formats the `gguf` package reads but cannot write (Q4_K, Q5_K, Q6_K) and for Q4_0 (which it writes: the bytes are
the same, tests/formats/test_gguf_quants.py). Each is a reading of ggml's reference quantizer
(`quantize_row_*_ref` in ggml-quants.c, what `llama-quantize` runs without an importance matrix), done for every
block of a tensor at once; the byte layouts are ggml's, so llama.cpp and `gguf.quants.dequantize` read them.

    Q4_0  blocks of 32: f16 d, 16 bytes of 4-bit codes q;   x ≈ d·(q − 8), d = x_amax / −8 (x_amax: the value of
          largest |x|, its sign kept, so it is −8·d exactly)
    Q4_K  super-blocks of 256 = 8 sub-blocks of 32, 144 bytes: f16 d, f16 dmin, 12 bytes holding 8 six-bit scales
          and 8 six-bit mins, 128 bytes of 4-bit codes;   x ≈ d·sc_j·q − dmin·m_j in sub-block j
    Q5_K  the same with 5-bit codes, their fifth bits in 32 bytes of their own (176 bytes)
    Q6_K  super-blocks of 256 = 16 sub-blocks of 16, 210 bytes: 6-bit codes (128 bytes low 4 bits, 64 bytes high 2),
          16 int8 scales, f16 d;   x ≈ d·sc_j·(q − 32)

A K-quant fits each sub-block's grid first (`_fit_affine`: ggml's make_qkx2_quants, a least-squares line through
the codes, tried at a few grid spacings, weighted by av|x| + |x|; `_fit_symmetric`: make_qx_quants, weighted by x²),
then rounds the sub-blocks' scales (and mins) to six bits of the super-block's largest, and codes every value again
on the grid it got. Each quantizer returns the bytes and the float32 values they stand for, computed as ggml
dequantizes them. Q8_0, Q5_0 and Q5_1 (llama.cpp's fallbacks for rows of other lengths) are the `gguf` package's
quantizers, which it writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from minitrain.common.registry import Registry

U8, F16, F32 = np.uint8, np.float16, np.float32
GROUP_MAX_EPS = 1e-15  # ggml's bound below which a group counts as all zero


def q4_0(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 (module docstring) of `w` (float32, rows a multiple of 32 long): (bytes (..., n/32·18), values)."""
    x = w.reshape(-1, 32)
    extreme = np.take_along_axis(x, np.abs(x).argmax(-1)[:, None], -1)  # the first of largest |x|, as ggml picks
    d = extreme / F32(-8)
    inverse = np.divide(F32(1), d, out=np.zeros_like(d), where=d != 0)
    q = np.minimum(15, np.trunc(x * inverse + F32(8.5))).astype(U8)  # ggml's (int8)(x/d + 8.5): round half up
    d16 = d.astype(F16)
    packed = np.concatenate([d16.view(U8), q[:, :16] | q[:, 16:] << 4], axis=-1)
    return _rows(packed, w), (d16.astype(F32) * (q.astype(F32) - 8)).reshape(w.shape)


def _fit_affine(x: np.ndarray, w: np.ndarray, nmax: int, rmin: float, nstep: int) -> tuple[np.ndarray, np.ndarray]:
    """ggml's make_qkx2_quants for each row of `x` (G, n) with weights `w`: (scale, m), x ≈ scale·l − m with codes
    l in 0..nmax, m ≥ 0. The grid is first the row's range [min(x, 0), max x] in nmax steps; then, for spacings
    (max − min)/(nmax + rmin + 0.1·k), k = 0..nstep, the codes l that spacing gives and the weighted least-squares
    line through them (m held at 0 where the line would put it below 0); the fit of least weighted squared error
    is kept."""
    lo, hi = np.minimum(x.min(-1), 0), x.max(-1)
    flat = hi == lo
    span = np.where(flat, 1, hi - lo)
    sum_w, sum_x = w.sum(-1), (w * x).sum(-1)

    def codes(spacing_inverse):
        return np.clip(np.rint(spacing_inverse[:, None] * (x - lo[:, None])), 0, nmax)  # rint: ggml's nearest_int

    def error(scale, low, levels):
        return (w * (scale[:, None] * levels + low[:, None] - x) ** 2).sum(-1)

    scale, low = span / nmax, lo
    best = error(scale, low, codes(nmax / span))
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in range(nstep + 1):
            levels = codes((F32(rmin + 0.1 * k) + nmax) / span)
            sum_l, sum_l2, sum_xl = (w * levels).sum(-1), (w * levels**2).sum(-1), (w * levels * x).sum(-1)
            det = sum_w * sum_l2 - sum_l**2
            this_scale, this_low = (sum_w * sum_xl - sum_x * sum_l) / det, (sum_l2 * sum_x - sum_l * sum_xl) / det
            this_scale = np.where(this_low > 0, sum_xl / sum_l2, this_scale)
            this_low = np.minimum(this_low, 0)
            err = error(this_scale, this_low, levels)
            better = (det > 0) & (err < best)
            scale, low, best = np.where(better, this_scale, scale), np.where(better, this_low, low), np.where(
                better, err, best)
    return np.where(flat, 0, scale), -low


def _fit_symmetric(x: np.ndarray, nmax: int) -> np.ndarray:
    """ggml's make_qx_quants (weights x²) for each row of `x` (G, n): the scale s, x ≈ s·l with l in −nmax..nmax−1.
    The grid puts the value of largest |x| at −nmax; spacings max/(nmax + 0.1·k), k = −9..9, are tried, each
    with the weighted least-squares scale of its codes, and the one of least weighted squared error kept."""
    extreme = np.take_along_axis(x, np.abs(x).argmax(-1)[:, None], -1)[:, 0]
    zero = np.abs(extreme) < GROUP_MAX_EPS
    extreme = np.where(zero, 1, extreme)
    w = x * x

    def fit(spacing_inverse):
        levels = np.clip(np.rint(spacing_inverse[:, None] * x), -nmax, nmax - 1)
        return (w * x * levels).sum(-1), (w * levels**2).sum(-1)

    with np.errstate(divide="ignore", invalid="ignore"):
        sum_lx, sum_l2 = fit(-nmax / extreme)
        scale = np.where(sum_l2 > 0, sum_lx / sum_l2, 0)
        best = scale * sum_lx
        for k in (*range(-9, 0), *range(1, 10)):
            lx, l2 = fit(-(nmax + F32(0.1 * k)) / extreme)
            better = (l2 > 0) & (lx * lx > best * l2)  # (lx/l2)·lx > best, without dividing by 0
            scale = np.where(better, lx / l2, scale)
            best = np.where(better, scale * lx, best)
    return np.where(zero, 0, scale).astype(F32)


def _six_bit(values: np.ndarray, largest: np.ndarray) -> np.ndarray:
    """Each sub-block's scale (or min) as a 6-bit multiple of its super-block's largest / 63."""
    inverse = np.divide(F32(63), largest, out=np.zeros_like(largest), where=largest > 0)
    return np.clip(np.rint(inverse[:, None] * values), 0, 63).astype(U8)


def _affine_k(w: np.ndarray, nmax: int, rmin: float, nstep: int):
    """The shared half of Q4_K and Q5_K: (d, dmin (f16, (S, 1)), the 12 scale bytes (S, 12), codes (S, 8, 32),
    values) for the S super-blocks of `w`."""
    x = w.reshape(-1, 8, 32)
    weights = np.sqrt((x * x).mean(-1, keepdims=True)) + np.abs(x)  # ggml's av_x + |x|
    scale, low = (v.reshape(-1, 8) for v in _fit_affine(x.reshape(-1, 32), weights.reshape(-1, 32), nmax, rmin,
                                                         nstep))
    top_scale, top_low = np.maximum(scale.max(-1), 0), np.maximum(low.max(-1), 0)
    ls, lm = _six_bit(scale, top_scale), _six_bit(low, top_low)
    d, dmin = (top_scale / 63).astype(F16)[:, None], (top_low / 63).astype(F16)[:, None]
    step, offset = d.astype(F32) * ls.astype(F32), dmin.astype(F32) * lm.astype(F32)  # (S, 8), as ggml multiplies
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.clip(np.rint((x + offset[..., None]) / step[..., None]), 0, nmax)
    q = np.where(step[..., None] > 0, q, 0).astype(U8)  # a sub-block of scale 0 is all −m whatever its codes
    # ggml's 12 bytes: scales 0-3 and mins 0-3 in the low 6 bits of bytes 0-7, the low 4 bits of scales/mins 4-7
    # in bytes 8-11, their high 2 bits in the top bits of bytes 0-7.
    scale_bytes = np.concatenate([ls[:, :4] | (ls[:, 4:] >> 4) << 6, lm[:, :4] | (lm[:, 4:] >> 4) << 6,
                                  (ls[:, 4:] & 15) | (lm[:, 4:] & 15) << 4], axis=-1)
    values = step[..., None] * q.astype(F32) - offset[..., None]
    return d, dmin, scale_bytes, q, values.reshape(w.shape)


def _nibbles(q: np.ndarray) -> np.ndarray:
    """Codes (S, 8, 32) as 128 bytes: sub-blocks 2i and 2i+1 in the low and high 4 bits of bytes 32i..32i+31."""
    q = (q & 15).reshape(-1, 4, 2, 32)
    return (q[:, :, 0] | q[:, :, 1] << 4).reshape(-1, 128)


def q4_k(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K (module docstring) of `w` (float32, rows a multiple of 256 long): (bytes, values)."""
    d, dmin, scale_bytes, q, values = _affine_k(w, nmax=15, rmin=-1.0, nstep=20)
    packed = np.concatenate([d.view(U8), dmin.view(U8), scale_bytes, _nibbles(q)], axis=-1)
    return _rows(packed, w), values


def q5_k(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q5_K (module docstring): Q4_K's layout with 5-bit codes; bit j of high-bit byte i is code i of sub-block j's
    fifth bit."""
    d, dmin, scale_bytes, q, values = _affine_k(w, nmax=31, rmin=-0.5, nstep=15)
    high = ((q >> 4) << np.arange(8, dtype=U8)[:, None]).sum(1, dtype=U8)  # (S, 32)
    packed = np.concatenate([d.view(U8), dmin.view(U8), scale_bytes, high, _nibbles(q)], axis=-1)
    return _rows(packed, w), values


def q6_k(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q6_K (module docstring) of `w` (float32, rows a multiple of 256 long): (bytes, values). The largest |scale|
    of a super-block is stored as −128 steps of d (its sign kept), the others rounded to int8 steps."""
    x = w.reshape(-1, 16, 16)
    scale = _fit_symmetric(x.reshape(-1, 16), 32).reshape(-1, 16)
    extreme = np.take_along_axis(scale, np.abs(scale).argmax(-1)[:, None], -1)
    zero = np.abs(extreme) < GROUP_MAX_EPS
    inverse = np.where(zero, 0, F32(-128) / np.where(zero, 1, extreme))
    d = np.where(zero, 0, 1 / np.where(zero, 1, inverse)).astype(F16)
    sc = np.clip(np.rint(inverse * scale), -128, 127).astype(np.int8)
    step = d.astype(F32) * sc.astype(F32)  # (S, 16)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.clip(np.rint(x / step[..., None]), -32, 31)
    q = np.where(step[..., None] != 0, q, 0)
    codes = (q + 32).astype(U8).reshape(-1, 2, 4, 32)  # two halves of 128, four quarters of 32
    # ggml's layout: per half, low 4 bits of quarters 0/1 with 2/3 in the high nibble (64 bytes), the high 2 bits
    # of the four quarters in one byte each (32 bytes).
    low = ((codes[:, :, :2] & 15) | (codes[:, :, 2:] & 15) << 4).reshape(-1, 128)
    high = ((codes >> 4) << (2 * np.arange(4, dtype=U8))[:, None]).sum(2, dtype=U8).reshape(-1, 64)
    packed = np.concatenate([low, high, sc.view(U8), d.view(U8)], axis=-1)
    return _rows(packed, w), (step[..., None] * q.astype(F32)).reshape(w.shape)


def _rows(packed: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The blocks of `w` back in its rows: (..., bytes per row), the shape the gguf writer takes for raw types."""
    return packed.reshape(*w.shape[:-1], -1)


def _by_gguf(name: str) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    def encode(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import gguf
        from gguf.quants import dequantize, quantize

        kind = gguf.GGMLQuantizationType[name]
        data = quantize(w, kind)
        return data, dequantize(data, kind)
    return encode


@dataclass(frozen=True)
class TensorType:
    """A GGML tensor type: `encode` turns a float32 array whose rows are a multiple of `block` long into (what the
    gguf writer stores, the float32 values it stands for); `fallback` is llama.cpp's type for a row of another
    length (its tensor_type_fallback; F16 where llama.cpp has none)."""

    name: str  # gguf.GGMLQuantizationType's name
    block: int
    encode: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    fallback: str = "F16"


def _f16(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half = w.astype(F16)
    return half, half.astype(F32)


TENSOR_TYPES: Registry[TensorType] = Registry("GGUF tensor type", [
    TensorType("F32", 1, lambda w: (w, w)),
    TensorType("F16", 1, _f16),
    TensorType("Q8_0", 32, _by_gguf("Q8_0")),
    TensorType("Q5_0", 32, _by_gguf("Q5_0")),
    TensorType("Q5_1", 32, _by_gguf("Q5_1")),
    TensorType("Q4_0", 32, q4_0),
    TensorType("Q4_K", 256, q4_k, fallback="Q5_0"),
    TensorType("Q5_K", 256, q5_k, fallback="Q5_1"),
    TensorType("Q6_K", 256, q6_k, fallback="Q8_0"),
])


def fitting(name: str, row: int) -> TensorType:
    """The type `name`, or llama.cpp's fallback (in turn) until one whose blocks fit a row of `row` values."""
    kind = TENSOR_TYPES[name]
    while row % kind.block:
        kind = TENSOR_TYPES[kind.fallback]
    return kind
