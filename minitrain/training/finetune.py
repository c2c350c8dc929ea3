"""What a run does to its model beyond plain training, set by the `lora:` and `quantize:` sections (run.py calls
these; docs/yaml-mode.md describes the keys).

    prepare_model      lora: load the base (model.init_from; `load_init_weights`: a pretrained Llama-family base
                       or a minitrain source) and add the adapters (QLoRA: the base in 4-bit blocks first);
                       quantize.qat: fake quantizers on the linear layers
    model_file_state   what the final model file holds: the adapters only for a LoRA run, else every weight
    after_training     lora: the adapters in PEFT's layout in RUN/adapter/; quantize: the quantized model file
                       RUN/quantized-int<bits>.safetensors, scored on val

A LoRA model loads its base on every build, a resume included: the base is part of the model, and a QLoRA
checkpoint does not hold it (its 4-bit blocks are no parameters; they are rebuilt, bit for bit, from the base).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from minitrain.config import Config
from minitrain.data.tokenizer import CharTokenizer
from minitrain.lora import adapter_state, add_adapters, base_weight_bytes, linear_paths, settings_of, with_base
from minitrain.lora.peft import write_peft_adapter
from minitrain.models.registry import family_of
from minitrain.nn import Module
from minitrain.nn.quantized import Linear4Bit
from minitrain.training.ptq import (
    calibration_batches,
    dequantized_model,
    quantizable_paths,
    quantize_model,
    write_quantized,
)
from minitrain.training.qat import attach_fake_quantizers
from minitrain.training.scoring import score_records

ADAPTER_DIR = "adapter"


def prepare_model(model: Module, cfg: Config, rng: np.random.Generator) -> str | None:
    """Adapt a freshly built model as `cfg` says; returns where a LoRA base came from (None otherwise)."""
    base = None
    if cfg.lora.enabled:
        base = load_init_weights(model, cfg)
        settings = with_base(cfg.lora.settings(linear_paths(model)), cfg.model.init_from, model.state_dict())
        add_adapters(model, settings, rng)
    if cfg.quantize.enabled and cfg.quantize.qat.enabled:
        paths, _ = quantizable_paths(model, cfg.quantize.exclude)
        attach_fake_quantizers(model, cfg.quantize.scheme_for(training=True), paths)
    return base


def load_init_weights(model: Module, cfg: Config) -> str:
    """Load the weights model.init_from names into `model`; return where they came from. A pretrained Llama-family
    base (minitrain/hub/pretrained_runs.py: float32, a GGUF dequantized), or any minitrain source
    (minitrain/hub/sources.py, whose vocabulary must be data.vocab_path's)."""
    if cfg.on_pretrained_base:
        from minitrain.hub.pretrained_runs import load_base_weights  # the Hub client is only needed here

        return load_base_weights(model, cfg.model.init_from)
    from minitrain.hub.sources import init_model_from

    return init_model_from(model, cfg.model.init_from, None if cfg.is_table_task else cfg.data.vocab_path)


def model_file_state(model: Module) -> dict[str, np.ndarray]:
    """The tensors of the final model file: a LoRA model's adapters (the base stays where model.init_from is),
    any other model's every weight (its own arrays: the file is written at once, no second copy of the model)."""
    return adapter_state(model) if settings_of(model) is not None else model.state_dict(copy=False)


def adapter_facts(model: Module) -> dict[str, Any]:
    """For a LoRA model, what the manifest records: the weights held in 4-bit blocks (QLoRA; they are no
    parameters, so `parameters` leaves them out), the trainable share of all weights, and the linear layers'
    weights in bytes as held."""
    if settings_of(model) is None:
        return {}
    quantized = four_bit_weights(model)[0]
    trainable, total = model.num_parameters(trainable_only=True), model.num_parameters() + quantized
    return {**({"quantized_parameters": quantized} if quantized else {}),
            "trainable_share": round(trainable / total, 6), "base_weight_bytes": base_weight_bytes(model)}


def four_bit_weights(model: Module) -> tuple[int, int, str]:
    """(weights, bytes, code book) of the 4-bit blocks a QLoRA model holds beside its parameters ((0, 0, "") for
    none): each weight counted once as the model has it, the bytes as stored (codes, scales)."""
    held = [m.weight for m in model.modules() if isinstance(m, Linear4Bit)]
    return sum(w.size for w in held), sum(w.nbytes for w in held), held[0].quant_type.upper() if held else ""


def after_training(
    cfg: Config, model: Module, out_dir: Path, tokenizer: CharTokenizer, train_records: list[dict],
    val_records: list[dict],
) -> dict[str, Any]:
    """The adapter folder and the quantized model file, when the config asks for them; what results.json gets."""
    results: dict[str, Any] = {}
    if settings_of(model) is not None:
        # A Llama's layers are torch.nn.Linear in transformers ((out, in) weights): fan_in_fan_out false.
        write_peft_adapter(out_dir / ADAPTER_DIR, model, fan_in_fan_out=family_of(model.config).fan_in_fan_out)
        results["adapter_dir"] = str(out_dir / ADAPTER_DIR)
    if cfg.quantize.enabled:
        q = cfg.quantize
        # After QAT, the ranges come from the observer the model trained with: the file stores the weights it used.
        samples = 0 if q.qat.enabled else q.calibration.samples
        calibration = calibration_batches(train_records, tokenizer, cfg.model.max_seq_len, cfg.data.loss_on,
                                          samples, cfg.training.data_seed)
        quantization = quantize_model(model, q.scheme_for(training=q.qat.enabled),
                                      q.linear_exclude(cfg.model.architecture()), calibration)
        scores = score_records(dequantized_model(model, quantization), tokenizer, val_records, cfg.data.loss_on)
        path = out_dir / f"quantized-int{q.bits}.safetensors"
        evaluation = {"qat": q.qat.enabled, **{f"val_{k}": v for k, v in scores.items()}}
        size = write_quantized(path, model, quantization, {"evaluation": evaluation})
        results["quantized"] = {"path": str(path), "file_bytes": size, **evaluation}
    return results
