"""How much each weight matters: the scores the pruning methods rank by, and one-shot pruning of a model.

    magnitude   S_ij = |W_ij|, compared over the whole layer (Han et al. 2015)
    wanda       S_ij = |W_ij| · ‖X_i‖₂, compared within each output (Sun et al. 2023, "A Simple and Effective
                Pruning Approach for Large Language Models"): X (N, in) is every input the layer saw over the
                calibration tokens, so ‖X_i‖₂ = √(Σ_n X_ni²) is how strongly input i is driven. In the paper's
                (out, in) layout the score is |W| · ‖X‖ broadcast along rows and each row is compared; in
                minitrain's (in, out) layout that row is a column, the norm multiplies row i.

A weight that is small but fed a large input (LLMs have a few such outlier features) matters more than its
magnitude says: that is what Wanda adds. ‖X_i‖₂² is the diagonal of XᵀX (`calibration_grams`, padded positions
left out), the Gram matrix the mse quantizer weighs its rounding error by too (minitrain/training/ptq.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from minitrain.common.registry import Registry
from minitrain.nn import Module, inference
from minitrain.pruning.masks import UNSTRUCTURED, apply_masks, keep_mask


def magnitude_scores(weight: np.ndarray, input_norm: np.ndarray | None = None) -> np.ndarray:
    """|W| (in, out); the inputs are not read."""
    return np.abs(weight.astype(np.float64))


def wanda_scores(weight: np.ndarray, input_norm: np.ndarray) -> np.ndarray:
    """|W_ij| · ‖X_i‖₂: weight (in, out), input_norm (in,) -> (in, out)."""
    return np.abs(weight.astype(np.float64)) * np.asarray(input_norm, dtype=np.float64)[:, None]


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


@dataclass(frozen=True)
class PruningMethod:
    """`scores(weight (in, out), input_norm (in,) or None) -> (in, out)`, compared within `group` as its paper
    prunes (masks.py); `calibrated`: it reads the inputs' norms, so it needs calibration batches."""

    name: str
    scores: Callable[[np.ndarray, np.ndarray | None], np.ndarray]
    group: str
    calibrated: bool = False


METHODS: Registry[PruningMethod] = Registry("pruning method", [
    PruningMethod("magnitude", magnitude_scores, "layer"),
    PruningMethod("wanda", wanda_scores, "output", calibrated=True),
])


def input_norms(model: Module, batches: list, paths: Sequence[str]) -> dict[str, np.ndarray]:
    """{path: ‖X_i‖₂ (in,)} of the inputs each layer sees over the calibration `batches` (real positions only)."""
    grams = calibration_grams(model, batches, paths)
    return {path: np.sqrt(np.diag(gram)) for path, gram in grams.items()}


@dataclass
class Pruning:
    """One-shot pruning of a model's linear layers: the settings and each layer's mask (True: kept)."""

    method: str
    sparsity: float
    structure: str
    paths: list[str]
    masks: dict[str, np.ndarray] = field(default_factory=dict)
    calibration_samples: int = 0
    exclude: list[str] = field(default_factory=list)

    def metadata(self) -> dict:
        """What the pruned model file records under "pruning"."""
        return {"method": self.method, "sparsity": self.sparsity, "structure": self.structure,
                "group": METHODS[self.method].group, "calibration_samples": self.calibration_samples,
                "exclude": self.exclude,
                "layers": {p: int(np.count_nonzero(~m)) for p, m in self.masks.items()}}


def prune_model(model: Module, method: str, sparsity: float, paths: Sequence[str], structure: str = UNSTRUCTURED,
                calibration: list | None = None) -> dict[str, np.ndarray]:
    """Prune `model`'s layers at `paths` in place, one shot; return their masks. A calibrated method (wanda)
    needs `calibration` batches (the inputs' norms); magnitude reads the weights alone."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    record = METHODS[method]
    if record.calibrated and not calibration:
        raise ValueError(f"{method} weighs each weight by its input's norm: it needs calibration batches")
    norms = input_norms(model, calibration, paths) if record.calibrated else {}
    masks = {}
    for path in paths:
        scores = record.scores(model.get_submodule(path).weight.data, norms.get(path))
        try:
            masks[path] = keep_mask(scores, sparsity, structure, record.group)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
    apply_masks(model, masks)
    return masks
