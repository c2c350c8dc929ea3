"""How a weight is quantized (`Scheme`): bits, symmetric or asymmetric, the units that share a scale
(per tensor, per output channel, per group of inputs), and how each unit's range is chosen. The grid
(minitrain/quant/grid.py) and the quantizer (minitrain/quant/affine.py) both read it.

Each field's choices are the records of a `Registry` (minitrain/common/registry.py), in the order `quantize:`'s
schema and `minitrain quantize --help` list them; tests/test_registries.py runs every record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from minitrain.common.registry import Registry


@dataclass(frozen=True)
class BitWidth:
    """Codes of `name` bits: 2^bits levels at most, packed 8 // bits to a byte (minitrain/quant/bit_packing.py)."""

    name: int


@dataclass(frozen=True)
class Grid:
    """Where the levels of `bits` sit: `qmin(bits)`..`qmax(bits)`; a symmetric grid is centred on 0 (z = 0)."""

    name: str
    symmetric: bool
    qmin: Callable[[int], int]
    qmax: Callable[[int], int]


@dataclass(frozen=True)
class Granularity:
    """The units sharing a scale: `shape(rows, cols, group_size)` is the (G, g, C) a weight (in, out) is viewed as
    (ValueError if it cannot be cut so); `grouped`: it needs a group_size."""

    name: str
    shape: Callable[[int, int, int | None], tuple[int, int, int]]
    grouped: bool = False


@dataclass(frozen=True)
class RangeMethod:
    """How each unit's [lo, hi] is chosen: `ranges`, by dotted path (it quantizes: minitrain/quant/affine.py, which
    imports this file), is ranges(units, scheme, gram) -> (lo, hi); `observer`: QAT's name for it (PyTorch's)."""

    name: str
    ranges: str
    observer: str


def _groups(rows: int, cols: int, group_size: int | None) -> tuple[int, int, int]:
    if rows % group_size:
        raise ValueError(f"group_size {group_size} does not divide the {rows} inputs of a {(rows, cols)} weight")
    return rows // group_size, group_size, cols


BITS = Registry("bit width", [BitWidth(2), BitWidth(4), BitWidth(8)])
SCHEMES = Registry("quantization scheme", [
    Grid("symmetric", True, qmin=lambda bits: -(2 ** (bits - 1) - 1), qmax=lambda bits: 2 ** (bits - 1) - 1),
    Grid("asymmetric", False, qmin=lambda bits: 0, qmax=lambda bits: 2**bits - 1),
])
GRANULARITIES = Registry("granularity", [
    Granularity("per_tensor", lambda rows, cols, group_size: (1, rows * cols, 1)),
    Granularity("per_channel", lambda rows, cols, group_size: (1, rows, cols)),
    Granularity("per_group", _groups, grouped=True),
])
METHODS = Registry("range method", [
    RangeMethod("minmax", "minitrain.quant.affine.minmax_ranges", observer="minmax"),
    RangeMethod("percentile", "minitrain.quant.affine.percentile_ranges", observer="percentile"),
    RangeMethod("mse", "minitrain.quant.affine.mse_ranges", observer="histogram"),
])
# QAT's observers, named as PyTorch names them, and the range method each is (minitrain/training/qat.py)
OBSERVER_METHODS = {method.observer: method.name for method in METHODS.values()}


@dataclass(frozen=True)
class Scheme:
    """How a weight is quantized: bits, symmetric or not, the units that share a scale, how ranges are chosen."""

    bits: int = 8
    scheme: str = "symmetric"
    granularity: str = "per_channel"
    group_size: int | None = None
    method: str = "minmax"
    percentile: float = 99.99

    def __post_init__(self) -> None:
        choices = ((self.bits, BITS, "bits"), (self.scheme, SCHEMES, "scheme"),
                   (self.granularity, GRANULARITIES, "granularity"), (self.method, METHODS, "method"))
        for value, allowed, name in choices:
            if value not in tuple(allowed):  # a tuple: an unhashable value is just not a choice
                raise ValueError(f"quantization {name} must be one of {', '.join(map(str, allowed))}, got {value!r}")
        if GRANULARITIES[self.granularity].grouped and not (self.group_size and self.group_size >= 1):
            raise ValueError(f"quantization granularity {self.granularity} needs group_size >= 1")
        if not 50 < self.percentile <= 100:
            raise ValueError(f"quantization percentile must be in (50, 100], got {self.percentile}")

    @property
    def symmetric(self) -> bool:
        return SCHEMES[self.scheme].symmetric

    @property
    def qmin(self) -> int:
        return SCHEMES[self.scheme].qmin(self.bits)

    @property
    def qmax(self) -> int:
        return SCHEMES[self.scheme].qmax(self.bits)

    def units(self, weight: np.ndarray) -> np.ndarray:
        """A view of W (in, out) as (G, g, C): the values of one unit are [G, :, C]."""
        return weight.reshape(GRANULARITIES[self.granularity].shape(*weight.shape, self.group_size))
