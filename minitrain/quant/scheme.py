"""How a weight is quantized (`Scheme`): bits, symmetric or asymmetric, the units that share a scale
(per tensor, per output channel, per group of inputs), and how each unit's range is chosen. The grid
(minitrain/quant/grid.py) and the quantizer (minitrain/quant/affine.py) both read it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BITS = (2, 4, 8)
SCHEMES = ("symmetric", "asymmetric")
GRANULARITIES = ("per_tensor", "per_channel", "per_group")
METHODS = ("minmax", "percentile", "mse")
# QAT's observers, named as PyTorch names them, and the range method each is (minitrain/training/qat.py)
OBSERVER_METHODS = {"minmax": "minmax", "percentile": "percentile", "histogram": "mse"}


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
            if value not in allowed:
                raise ValueError(f"quantization {name} must be one of {', '.join(map(str, allowed))}, got {value!r}")
        if self.granularity == "per_group" and not (self.group_size and self.group_size >= 1):
            raise ValueError("quantization granularity per_group needs group_size >= 1")
        if not 50 < self.percentile <= 100:
            raise ValueError(f"quantization percentile must be in (50, 100], got {self.percentile}")

    @property
    def symmetric(self) -> bool:
        return self.scheme == "symmetric"

    @property
    def qmin(self) -> int:
        return -(2 ** (self.bits - 1) - 1) if self.symmetric else 0

    @property
    def qmax(self) -> int:
        return 2 ** (self.bits - 1) - 1 if self.symmetric else 2**self.bits - 1

    def units(self, weight: np.ndarray) -> np.ndarray:
        """A view of W (in, out) as (G, g, C): the values of one unit are [G, :, C]."""
        rows, cols = weight.shape
        if self.granularity == "per_tensor":
            return weight.reshape(1, rows * cols, 1)
        if self.granularity == "per_channel":
            return weight.reshape(1, rows, cols)
        if rows % self.group_size:
            raise ValueError(f"group_size {self.group_size} does not divide the {rows} inputs of a {weight.shape} "
                             "weight")
        return weight.reshape(rows // self.group_size, self.group_size, cols)
