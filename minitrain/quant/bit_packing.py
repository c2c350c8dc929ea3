"""Small integers packed into bytes: 8/bits of them per uint8, the first in the highest bits.

A 4-bit weight stored one per uint8 would take half its byte for nothing; packed, n codes take n·bits/8 bytes,
which is where a quantized file's size comes from.

    bits 4:  byte = c0 << 4 | c1                   c0 = byte >> 4,  c1 = byte & 0xF
    bits 2:  byte = c0 << 6 | c1 << 4 | c2 << 2 | c3
"""

from __future__ import annotations

import numpy as np

PACKABLE_BITS = (2, 4, 8)


def pack_bits(codes: np.ndarray, bits: int) -> np.ndarray:
    """Codes in [0, 2^bits) (any shape) -> uint8 (ceil(n·bits/8),), row-major order, zero-padded at the end."""
    if bits not in PACKABLE_BITS:
        raise ValueError(f"pack_bits: bits must be one of {PACKABLE_BITS}, got {bits}")
    flat = np.asarray(codes).reshape(-1)
    if flat.size and not 0 <= int(flat.min()) <= int(flat.max()) < 1 << bits:
        raise ValueError(f"pack_bits: codes span {int(flat.min())}..{int(flat.max())}, outside the {bits}-bit "
                         f"range 0..{(1 << bits) - 1}")
    flat = flat.astype(np.uint8)
    per_byte = 8 // bits
    padded = np.zeros(-(-flat.size // per_byte) * per_byte, dtype=np.uint8)
    padded[: flat.size] = flat
    lanes = padded.reshape(-1, per_byte)
    packed = np.zeros(len(lanes), dtype=np.uint8)
    for lane in range(per_byte):
        packed |= lanes[:, lane] << np.uint8(8 - bits * (lane + 1))
    return packed


def unpack_bits(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first `count` codes of `pack_bits`'s output, as uint8 (count,)."""
    if bits not in PACKABLE_BITS:
        raise ValueError(f"unpack_bits: bits must be one of {PACKABLE_BITS}, got {bits}")
    per_byte = 8 // bits
    if packed.size * per_byte < count:
        raise ValueError(f"unpack_bits: {packed.size} bytes hold {packed.size * per_byte} codes, not {count}")
    mask = np.uint8((1 << bits) - 1)
    lanes = [(packed >> np.uint8(8 - bits * (lane + 1))) & mask for lane in range(per_byte)]
    return np.stack(lanes, axis=1).reshape(-1)[:count]
