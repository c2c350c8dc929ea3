"""Quantization-aware training (QAT): train with the weights rounded as they will be stored.

Each chosen linear layer gets a fake quantizer as its `weight_transform` (minitrain/nn/linear.py), so every
forward pass computes with ŵ = dequantize(quantize(w)) while the optimizer updates the float weights w, and the
straight-through estimator (minitrain/quant/tape_ops.py) carries the gradient of ŵ back to w. The model learns
weights that survive rounding; quantizing it after training (the `quantize:` section) stores exactly the ŵ it
was trained with, since the ranges come from the same rule.

The observer chooses each unit's range from the current weights on every pass, as PyTorch's weight observers do:

    minmax      the extremes
    percentile  the calibration.percentile-th percentiles (outliers clipped)
    histogram   the range with the smallest rounding error, which PyTorch's HistogramObserver approximates
                from a histogram; here the search runs over the weights themselves (the mse method)
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from minitrain.nn import Module
from minitrain.quant.scheme import Scheme
from minitrain.quant.tape_ops import fake_quantize


def attach_fake_quantizers(model: Module, scheme: Scheme, paths: Iterable[str]) -> list[str]:
    """Give each linear layer at `paths` a fake quantizer by `scheme`; returns the paths."""
    paths = list(paths)
    for path in paths:
        model.get_submodule(path).weight_transform = partial(fake_quantize, scheme=scheme)
    return paths


def detach_fake_quantizers(model: Module) -> None:
    """Back to plain float weights in every layer (e.g. to compare with the fake-quantized model)."""
    for _, module in model.named_modules():
        if getattr(module, "weight_transform", None) is not None:
            module.weight_transform = None
