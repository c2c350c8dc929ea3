"""Gradual magnitude pruning during training (Zhu & Gupta 2017, "To prune, or not to prune"), the `pruning:`
section of a config.

The sparsity rises from s_i to s_f along a cubic, fast at first while the network can still recover, then
slower, at the step boundaries t ∈ {t₀, t₀ + Δt, ..., t₀ + nΔt = t_end} (a boundary t: t updates done):

    s_t = s_f + (s_i − s_f) · (1 − (t − t₀) / (t_end − t₀))³          (s_t = s_f when t_end = t₀)

At each such boundary every layer's mask prunes its lowest |W| until round(s_t · size) weights are pruned; a
weight once pruned stays pruned (it scores below every kept one). After every update the masks are applied again
(W ← W ⊙ mask), so a pruned weight is 0 in every forward pass and in every file the run writes; before every
update its gradient is set to 0 too (after the clip), so an element-wise optimizer's state of a weight pruned
before the first update stays 0 and the weight never moves (the lottery ticket's retraining,
minitrain/training/lottery.py). Boundary 0 (t₀ = 0) prunes the weights the run starts from, before the first
update: a pruned model file fine-tuned with `sparsity` its own and t₀ = t_end = 0 keeps exactly its own zeros
(they score lowest), which is how a recovery fine-tune holds a Wanda mask.

The masks are the pruner's state: `state_dict()` goes into every checkpoint (each mask's bits, packed, in
base64), `load_state_dict` takes it back, so a resumed run prunes exactly as an uninterrupted one.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.nn import Module
from minitrain.pruning.masks import apply_masks, keep_mask
from minitrain.pruning.scores import magnitude_scores


def cubic_sparsity(t: int, final: float, initial: float = 0.0, start: int = 0, end: int = 0) -> float:
    """Zhu & Gupta's s_t (module docstring) at boundary t: `initial` before `start`, `final` from `end` on."""
    if t < start:
        return initial
    if t >= end:
        return final
    return final + (initial - final) * (1.0 - (t - start) / (end - start)) ** 3


class GradualPruner:
    """Prunes `paths` of `model` along the cubic schedule and holds the masks (True: kept) between boundaries."""

    def __init__(self, paths: Sequence[str], final: float, initial: float = 0.0, start: int = 0,
                 end: int | None = None, every: int = 1) -> None:
        self.paths, self.final, self.initial = list(paths), final, initial
        self.start, self.end, self.every = start, start if end is None else end, every
        self.masks: dict[str, np.ndarray] = {}

    def prunes_at(self, t: int) -> bool:
        """Whether boundary t is one of the schedule's: t₀, t₀ + Δt, ..., and t_end itself."""
        return self.start <= t <= self.end and ((t - self.start) % self.every == 0 or t == self.end)

    def begin(self, model: Module, saved: Mapping[str, Any] | None, source: object = "the checkpoint") -> None:
        """Before the first step: a resume takes back the `saved` masks of the checkpoint `source`; a fresh run
        (`saved` None) is at boundary 0, before the first update (it prunes only when t₀ = 0)."""
        if saved is None:
            self.after_update(0, model)
        else:
            self.load_state_dict(saved, model, source)

    def before_update(self, model: Module) -> None:
        """Zero the gradient of every pruned weight (after the clip, whose norm still counts it), so the optimizer's
        state of a pruned weight stays 0 and an element-wise optimizer moves only the kept ones."""
        for path, mask in self.masks.items():
            grad = model.get_submodule(path).weight.grad
            if grad is not None:
                grad[~mask] = 0.0

    def after_update(self, t: int, model: Module) -> None:
        """At boundary t (t updates done): new masks if the schedule prunes here, then W ← W ⊙ mask."""
        if self.prunes_at(t):
            target = cubic_sparsity(t, self.final, self.initial, self.start, self.end)
            for path in self.paths:
                weight = model.get_submodule(path).weight.data
                pruned = ~self.masks[path] if path in self.masks else None
                self.masks[path] = keep_mask(magnitude_scores(weight), target, exclude_pruned=pruned)
        apply_masks(model, self.masks)

    def state_dict(self) -> dict[str, Any]:
        """The masks as JSON: {"masks": {path: {"shape", "bits"}}}, bits np.packbits then base64."""
        return {"masks": {path: {"shape": list(mask.shape), "bits": base64.b64encode(np.packbits(mask)).decode()}
                          for path, mask in self.masks.items()}}

    def load_state_dict(self, state: Mapping[str, Any], model: Module, source: object = "the checkpoint") -> None:
        """Take back `state_dict()`'s masks, each checked against its layer (a damaged record: one UserError naming
        `source` and the layer)."""
        masks = state.get("masks") if isinstance(state, Mapping) else None
        if not isinstance(masks, Mapping) or not set(masks) <= set(self.paths):
            raise UserError(f"{source}: its pruning record is missing, damaged or names layers this run does not "
                            "prune", 2)
        restored = {}
        for path, saved in masks.items():
            shape = tuple(model.get_submodule(path).weight.shape)
            try:
                bits = np.frombuffer(base64.b64decode(saved["bits"], validate=True), dtype=np.uint8)
                ok = tuple(saved["shape"]) == shape and bits.size == -(-int(np.prod(shape)) // 8)
            except (TypeError, KeyError, ValueError):
                ok = False
            if not ok:
                raise UserError(f"{source}: its pruning mask of {path} is damaged or not of shape {shape}", 2)
            restored[path] = np.unpackbits(bits, count=int(np.prod(shape))).astype(bool).reshape(shape)
        self.masks = restored
