"""A quantized model file: a minitrain safetensors model file whose linear weights are stored as integers.

    <layer>.weight.codes        uint8: the integers q − qmin of the weight viewed as units (G, g, C), row-major,
                                packed `bits` to a byte (two per byte at 4 bits, four at 2 bits)
    <layer>.weight.scale        float32 (G, C): one scale per unit
    <layer>.weight.zero_point   uint8 (G, C): one zero point per unit (asymmetric only; 0 when symmetric)
    <any other tensor>          float32, as in a model file (biases, LayerNorms, embeddings, excluded layers)

    metadata  kind "quantized", model_config, quantization {bits, scheme, granularity, group_size, method,
              percentile, calibration_samples, exclude}, quantized {"<layer>.weight": [in, out]}

G, g, C are the weight's units (minitrain/quant/affine.py): per_tensor (1, in·out, 1), per_channel (1, in, out),
per_group (in/group_size, group_size, out). `load_model_file` returns the dequantized float32 weights, so every
reader of model files (sample, export, init_from, `minitrain info`) takes a quantized file as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.quant.affine import Quantized, dequantize
from minitrain.quant.bit_packing import pack_bits, unpack_bits
from minitrain.quant.scheme import Scheme

KIND = "quantized"
SCHEME_KEYS = ("bits", "scheme", "granularity", "group_size", "method", "percentile")


def quantized_tensors(
    state: Mapping[str, np.ndarray], quantized: Mapping[str, Quantized], scheme: Scheme
) -> tuple[dict[str, np.ndarray], dict[str, list[int]]]:
    """(the file's tensors, {weight name: its shape}) for a model's float `state` and its quantized layers."""
    tensors = dict(state)
    shapes = {}
    for path, (codes, scale, zero) in quantized.items():
        name = f"{path}.weight"
        shapes[name] = list(tensors.pop(name).shape)
        tensors[f"{name}.codes"] = pack_bits(codes, scheme.bits)
        tensors[f"{name}.scale"] = scale.astype(np.float32)
        if not scheme.symmetric:
            tensors[f"{name}.zero_point"] = zero.astype(np.uint8)
    return tensors, shapes


def scheme_of(metadata: Mapping[str, Any]) -> Scheme:
    settings = metadata.get("quantization") or {}
    return Scheme(**{k: settings[k] for k in SCHEME_KEYS if k in settings})


def dequantized_state(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, Any], where: str) -> dict:
    """The float32 state dict a quantized file stands for: every quantized weight dequantized."""
    try:
        scheme = scheme_of(metadata)
        state = {name: a for name, a in tensors.items()
                 if not name.endswith((".codes", ".scale", ".zero_point"))}  # fmt: skip
        for name, shape in (metadata.get("quantized") or {}).items():
            rows, cols = shape
            units = scheme.units(np.empty((rows, cols), dtype=np.float32)).shape
            codes = unpack_bits(tensors[f"{name}.codes"], scheme.bits, rows * cols).reshape(units)
            zero = tensors.get(f"{name}.zero_point", np.zeros(units[0::2], dtype=np.uint8)).astype(np.int32)
            state[name] = dequantize(Quantized(codes, tensors[f"{name}.scale"], zero), scheme, (rows, cols))
    except (KeyError, ValueError, TypeError) as e:
        raise UserError(f"{where}: a quantized model file whose tensors do not fit its metadata ({e})") from None
    return state
