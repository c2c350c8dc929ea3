"""How much each weight matters: the pruning methods' registry, their scores, and one-shot pruning of a model.

    magnitude   S_ij = |W_ij|, compared over the whole layer (Han et al. 2015)
    wanda       S_ij = |W_ij| · ‖X_i‖₂, compared within each output (Sun et al. 2023, "A Simple and Effective
                Pruning Approach for Large Language Models"): X (N, in) is every input the layer saw over the
                calibration tokens, so ‖X_i‖₂ = √(Σ_n X_ni²) is how strongly input i is driven. In the paper's
                (out, in) layout the score is |W| · ‖X‖ broadcast along rows and each row is compared; in
                minitrain's (in, out) layout that row is a column, the norm multiplies row i.
    sparsegpt   w² / [H⁻¹]²_cc with H = 2XᵀX, chosen block by block while the kept weights are updated to make up
                for the pruned ones (Frantar & Alistarh 2023; sparsegpt.py)
    lottery     magnitude per layer, round after round, each followed by retraining from the weights of an early
                step (Frankle & Carbin 2019; minitrain/training/lottery.py)

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
from minitrain.pruning.masks import UNSTRUCTURED, keep_mask
from minitrain.pruning.sparsegpt import sparsegpt_prune


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


def scored(scores: Callable[[np.ndarray, np.ndarray | None], np.ndarray], group: str) -> Callable:
    """The `prune` of a method that ranks by a score (`scores(weight, input_norm or None)`) and moves no weight:
    the lowest scores of each `group` (masks.py) set to zero."""
    def prune(weight: np.ndarray, gram: np.ndarray | None, sparsity: float, structure: str):
        mask = keep_mask(scores(weight, None if gram is None else np.sqrt(np.diag(gram))), sparsity, structure, group)
        return np.where(mask, weight, 0).astype(weight.dtype), mask
    return prune


@dataclass(frozen=True)
class PruningMethod:
    """`prune(weight (in, out), gram XᵀX (in, in) or None, sparsity, structure) -> (pruned weight, keep mask)`;
    `group`: what its exact count is compared within (recorded in the file); `calibrated`: it reads the layer's
    inputs, so it needs calibration batches; `retrains`: it trains between prunings, so `minitrain prune` runs it
    as training runs (the lottery ticket, minitrain/training/lottery.py), `prune` being one of its prunings."""

    name: str
    prune: Callable[[np.ndarray, np.ndarray | None, float, str], tuple[np.ndarray, np.ndarray]]
    group: str
    calibrated: bool = False
    retrains: bool = False


METHODS: Registry[PruningMethod] = Registry("pruning method", [
    PruningMethod("magnitude", scored(magnitude_scores, "layer"), "layer"),
    PruningMethod("wanda", scored(wanda_scores, "output"), "output", calibrated=True),
    PruningMethod("sparsegpt", sparsegpt_prune, "block", calibrated=True),
    PruningMethod("lottery", scored(magnitude_scores, "layer"), "layer", retrains=True),
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
        raise ValueError(f"{method} reads each layer's inputs: it needs calibration batches")
    grams = calibration_grams(model, calibration, paths) if record.calibrated else {}
    masks = {}
    for path in paths:
        weight = model.get_submodule(path).weight.data
        try:
            weight[...], masks[path] = record.prune(weight, grams.get(path), sparsity, structure)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
    return masks
