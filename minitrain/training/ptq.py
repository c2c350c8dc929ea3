"""Post-training quantization of a trained model, end to end: what `minitrain quantize` and a config's `quantize:`
section run.

    quantization = quantize_model(model, scheme, exclude, calibration)   the integers, in memory
    write_quantized(path, model, quantization)                          the file (minitrain/quant/qfile.py)
    dequantized_model(model, quantization)                              a float copy that computes like the file

`quantize_run(SOURCE, OUT, scheme, ...)` does all three for a run folder or model file and scores the float and
the quantized model on the run's val split (perplexity, exact match), so every quantized file comes with what it
cost: its size against float32's, and the change in val PPL and exact match.

Only linear layers' weights are quantized (W·A32: activations stay float32, and so do the biases, LayerNorms and
embeddings, MiniGPT's output layer included since it is tied to the token embedding): they are where the
parameters are (93 % of lab 01's MiniGPT). Calibration matters only for the mse method, which then picks each
unit's clipping by the output error ‖X·ΔW‖² on real inputs rather than by the weight error ‖ΔW‖².
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.common.paths import recorded_path
from minitrain.config.data_section import DataConfig
from minitrain.config.datacheck import load_split
from minitrain.data.batcher import EvalBatcher, encode_split
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.run_folder import RunInfo, read_run
from minitrain.lora import settings_of
from minitrain.models.registry import build_model
from minitrain.nn import Linear, Module
from minitrain.nn.module import module_matches
from minitrain.pruning.scores import calibration_grams
from minitrain.quant.affine import Quantized, quantize
from minitrain.quant.qfile import KIND, dequantized_state, quantized_tensors
from minitrain.quant.scheme import Scheme
from minitrain.runs.model_files import save_model_file
from minitrain.training.artifacts import non_finite_scores
from minitrain.training.qat import detach_fake_quantizers
from minitrain.training.scoring import EVAL_BATCH_SIZE, score_records


@dataclass
class Quantization:
    """A model's linear weights in integers: the scheme, the layers, their integers, what the file records."""

    scheme: Scheme
    paths: list[str]
    weights: dict[str, Quantized]
    calibration_samples: int
    exclude: list[str]

    def metadata(self) -> dict[str, Any]:
        s = self.scheme
        settings = {"bits": s.bits, "scheme": s.scheme, "granularity": s.granularity, "method": s.method,
                    "calibration_samples": self.calibration_samples, "exclude": self.exclude}
        if s.granularity == "per_group":
            settings["group_size"] = s.group_size
        if s.method == "percentile":
            settings["percentile"] = s.percentile
        return settings


def quantizable_paths(model: Module, exclude: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(paths of the linear layers to quantize, the `exclude` entries that name no linear layer)."""
    paths = [path for path, module in model.named_modules() if isinstance(module, Linear)]
    unmatched = [name for name in exclude if not any(module_matches(p, name) for p in paths)]
    kept = [p for p in paths if not any(module_matches(p, name) for name in exclude)]
    return kept, unmatched


def quantize_weights(
    model: Module, scheme: Scheme, paths: Sequence[str], grams: dict[str, np.ndarray] | None = None
) -> dict[str, Quantized]:
    """Each layer's weight at `paths` in integers by `scheme` (mse ranges weighed by `grams` when given)."""
    grams = grams or {}
    return {path: quantize(model.get_submodule(path).weight.data, scheme, grams.get(path)) for path in paths}


def quantize_model(
    model: Module, scheme: Scheme, exclude: list[str] | tuple[str, ...] = (), calibration: list | None = None
) -> Quantization:
    """Quantize `model`'s linear layers but `exclude`d ones; `calibration` batches weigh the mse method's error."""
    if settings_of(model) is not None:
        raise UserError("quantize: this model holds LoRA adapters; `minitrain merge-adapters` it first, then quantize "
                        "the merged model", 2)
    paths, unmatched = quantizable_paths(model, exclude)
    if unmatched:
        raise UserError(f"quantize: --exclude {', '.join(unmatched)} names no linear layer", 2)
    detach_fake_quantizers(model)  # a QAT model: quantize its float weights, by the same rule it trained with
    grams = calibration_grams(model, calibration, paths) if calibration else None
    samples = sum(len(batch.input) for batch in calibration) if calibration else 0
    try:
        weights = quantize_weights(model, scheme, paths, grams)
    except ValueError as e:
        raise UserError(f"quantize: {e}", 2) from None
    return Quantization(scheme, paths, weights, samples, list(exclude))


def write_quantized(path: str | Path, model: Module, quantization: Quantization, extra: dict | None = None) -> int:
    """Write the quantized model file; returns its size in bytes."""
    tensors, shapes = quantized_tensors(model.state_dict(), quantization.weights, quantization.scheme)
    meta = {"quantization": quantization.metadata(), "quantized": shapes, **(extra or {})}
    save_model_file(path, tensors, model.config, meta, kind=KIND)
    return Path(path).stat().st_size


def dequantized_model(model: Module, quantization: Quantization) -> Module:
    """A float32 copy of `model` whose quantized layers hold the dequantized weights (what loading the file gives)."""
    tensors, shapes = quantized_tensors(model.state_dict(), quantization.weights, quantization.scheme)
    twin = build_model(model.config)
    meta = {"quantization": quantization.metadata(), "quantized": shapes}
    twin.load_state_dict(dequantized_state(tensors, meta, "quantized model"))
    return twin


def float32_bytes(model: Module) -> int:
    """What the model's weights take as float32 (the size to compare a quantized file with)."""
    return sum(4 * p.size for p in model.parameters())


def calibration_batches(records: list[dict], tokenizer: CharTokenizer, seq_len: int, loss_on: str, samples: int,
                        seed: int) -> list:
    """`samples` records drawn without replacement (seeded), encoded as evaluation batches."""
    if samples <= 0:
        return []
    chosen = np.random.default_rng(seed).choice(len(records), size=min(samples, len(records)), replace=False)
    encoded = encode_split([records[i] for i in sorted(chosen)], tokenizer, seq_len, loss_on)
    return list(EvalBatcher(encoded, EVAL_BATCH_SIZE))


def whole_model(source: str | Path, command: str, vocab_path: str | Path | None = None
                ) -> tuple[RunInfo, Module, DataConfig, CharTokenizer]:
    """What `quantize` and `prune` start from: the whole model of a run folder or model file (a LoRA run, which
    holds adapters, is refused), the run's data section and its vocabulary (`vocab_path` when given)."""
    info = read_run(source)
    if info.adapter is not None:
        raise UserError(f"{command} {source}: a LoRA run holds adapters, not a whole model; `minitrain merge-adapters` "
                        f"it first, then {command} the merged run folder", 2)
    model = build_model(info.model_config)
    model.load_state_dict(info.state, source=str(info.model_path))
    data = info.data_config()
    return info, model, data, CharTokenizer.load(vocab_path or info.find(data.vocab_path) or data.vocab_path)


def quantize_run(source: str | Path, out: str | Path, scheme: Scheme, exclude: list[str] | tuple[str, ...] = (),
                 calibration_samples: int = 0, vocab_path: str | Path | None = None) -> dict[str, Any]:
    """Quantize the model of a run folder or model file into the file `out` and score both on the run's val
    split; returns the row `minitrain quantize` prints (sizes in bytes, val PPL and exact match of each)."""
    info, model, data, tokenizer = whole_model(source, "quantize", vocab_path)
    loss_on = data.loss_on
    calibration = []
    if calibration_samples:
        calibration = calibration_batches(load_split(data, "train"), tokenizer, model.config["max_seq_len"], loss_on,
                                          calibration_samples, seed=0)
    quantization = quantize_model(model, scheme, exclude, calibration)
    val = load_split(data, "val")
    before = score_records(model, tokenizer, val, loss_on)
    after = score_records(dequantized_model(model, quantization), tokenizer, val, loss_on)
    row = {"bits": scheme.bits, "scheme": scheme.scheme, "granularity": scheme.granularity,
           **({"group_size": scheme.group_size} if scheme.granularity == "per_group" else {}),
           "method": scheme.method, "float32_bytes": float32_bytes(model),
           "float32_val_ppl": before["ppl"], "val_ppl": after["ppl"],
           "float32_val_exact_match": before.get("exact_match"), "val_exact_match": after.get("exact_match")}
    overflowing = non_finite_scores(row)
    if overflowing:  # weights too large for float32 (a NaN or inf one is refused when the file is read)
        raise UserError(f"quantize {source}: {overflowing} on the val split; a model whose perplexity is not a "
                        "number is not quantized (nothing written)", 2)
    row["file_bytes"] = write_quantized(out, model, quantization, {"source": recorded_path(info.model_path),
                                                                   "evaluation": copy.deepcopy(row)})
    return row
