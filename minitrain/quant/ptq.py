"""Post-training quantization (PTQ) of a trained model's linear layers, with optional calibration data.

    paths = quantizable_paths(model, exclude)                 the linear layers, minus `exclude`
    grams = calibration_grams(model, batches, paths)          XᵀX of each layer's inputs (calibration samples)
    quantized = quantize_weights(model, scheme, paths, grams)  {path: Quantized}

Only linear layers' weights are quantized (W·A32: activations stay float32, and so do the biases, LayerNorms and
embeddings, MiniGPT's output layer included since it is tied to the token embedding): they are where the
parameters are (93 % of lab 01's MiniGPT). Calibration matters only for the mse method, which then picks each
unit's clipping by the output error ‖X·ΔW‖² on real inputs rather than by the weight error ‖ΔW‖².
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from minitrain.nn import Linear, Module, inference
from minitrain.nn.module import module_matches
from minitrain.quant.affine import Quantized, quantize
from minitrain.quant.scheme import Scheme


def quantizable_paths(model: Module, exclude: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(paths of the linear layers to quantize, the `exclude` entries that name no linear layer)."""
    paths = [path for path, module in model.named_modules() if isinstance(module, Linear)]
    unmatched = [name for name in exclude if not any(module_matches(p, name) for p in paths)]
    kept = [p for p in paths if not any(module_matches(p, name) for name in exclude)]
    return kept, unmatched


def calibration_grams(model: Module, batches: Iterable, paths: Sequence[str]) -> dict[str, np.ndarray]:
    """XᵀX (in, in), float64, of the inputs each layer at `paths` sees over `batches` (real positions only)."""
    grams: dict[str, np.ndarray] = {}
    layers = {path: model.get_submodule(path) for path in paths}
    current_mask: list[np.ndarray] = []

    def recorder(path: str, forward):
        def record(x):
            rows = x.data.reshape(-1, x.shape[-1])[current_mask[0].reshape(-1)].astype(np.float64)
            grams[path] = grams.get(path, 0) + rows.T @ rows
            return forward(x)
        return record

    for path, layer in layers.items():
        layer.forward = recorder(path, layer.forward)  # an instance attribute: a forward hook, undone below
    try:
        with inference(model):
            for batch in batches:
                current_mask[:] = [np.asarray(batch.attn_pad_mask, dtype=bool)]
                model(batch.input, attn_pad_mask=batch.attn_pad_mask)
    finally:
        for layer in layers.values():
            del layer.forward
    return grams


def quantize_weights(
    model: Module, scheme: Scheme, paths: Sequence[str], grams: dict[str, np.ndarray] | None = None
) -> dict[str, Quantized]:
    """Each layer's weight at `paths` in integers by `scheme` (mse ranges weighed by `grams` when given)."""
    grams = grams or {}
    return {path: quantize(model.get_submodule(path).weight.data, scheme, grams.get(path)) for path in paths}
