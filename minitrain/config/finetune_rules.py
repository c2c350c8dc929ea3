"""Rules about the `lora:` and `quantize:` sections, a `RuleBook` like the others (minitrain/config/rule.py)."""

from __future__ import annotations

import math

from minitrain.config.finetune_sections import CalibrationConfig, QuantizeConfig
from minitrain.config.problems import Problem
from minitrain.config.rule import RuleBook, unknown_layers
from minitrain.lora import resolve_targets
from minitrain.models.registry import layout_of, linear_module_paths, parameter_shapes
from minitrain.nn.module import module_matches

RULES = RuleBook()
rule = RULES.rule


@rule("lora", "model")
def _lora_adapts_a_trained_model(sections, raw):
    """lora.enabled needs model.init_from (the trained model it adapts) and no model.freeze (LoRA freezes the base)."""
    lora, model = sections["lora"], sections["model"]
    if lora.enabled and model.init_from is None:
        yield Problem(("lora", "enabled"), "LoRA adapts a trained model: set model.init_from to it (a run, a model "
                                           "file, an export folder or a Hub id); a lora: section is on unless it "
                                           "says enabled: false")
    if lora.enabled and model.freeze:
        yield Problem(("model", "freeze"), "LoRA already freezes every base weight (lora.bias chooses the biases "
                                           "that train); leave model.freeze out")


@rule("lora", "model")
def _lora_targets_match(sections, raw):
    """Each lora.target_modules entry, and lora.target_modules_pattern, must name at least one linear layer."""
    lora = sections["lora"]
    if not lora.enabled:
        return
    chosen, problems = resolve_targets(lora.target_modules, lora.target_modules_pattern,
                                       linear_module_paths(sections["model"].architecture()))
    for index, message in problems.items():
        yield Problem(("lora", "target_modules_pattern") if index is None else ("lora", "target_modules", index),
                      message)
    if not chosen and not problems:
        yield Problem(("lora", "target_modules"), "names no layer: give target_modules or target_modules_pattern")


@rule("quantize", "model")
def _quantize_names_and_groups_fit(sections, raw):
    """Each quantize.exclude entry names a linear layer; per_group's group_size must divide every layer's inputs."""
    quantize, model = sections["quantize"], sections["model"]
    if not quantize.enabled:
        return
    paths = linear_module_paths(model.architecture())
    yield from unknown_layers(("quantize", "exclude"), quantize.exclude, [*paths, *stays_float(model.architecture())])
    if quantize.granularity == "per_group":
        shapes = dict(parameter_shapes(model.architecture()))
        kept = [p for p in paths if not any(module_matches(p, name) for name in quantize.exclude)]
        widths = sorted({shapes[f"{p}.weight"][0] for p in kept})
        bad = [w for w in widths if w % quantize.group_size]
        if bad:
            yield Problem(("quantize", "group_size"), f"{quantize.group_size} does not divide the inputs of every "
                                                      f"quantized layer ({', '.join(map(str, widths))}); choose a "
                                                      f"divisor of {math.gcd(*widths)}")


# The Hugging Face names of layers a language model keeps in float (a model with a Hugging Face layout): minitrain
# quantizes linear layers only, so excluding these asks for what is already true.
FLOAT_NAMES = {"embed_tokens": "the token embedding", "lm_head": "the output head, tied to the token embedding"}


def stays_float(architecture: dict) -> dict[str, str]:
    """{module: what it is} for the modules quantization leaves in float whatever quantize.exclude says: those
    holding parameters but no linear layer (embeddings, norms), and FLOAT_NAMES where they name no linear layer
    (an untied lm_head is one, and is quantized)."""
    linear = linear_module_paths(architecture)
    owners = {name.rpartition(".")[0]: "not a linear layer" for name, _ in parameter_shapes(architecture)}
    spec = FLOAT_NAMES if layout_of(architecture) else {}
    return {path: why for path, why in {**owners, **spec}.items()
            if not any(module_matches(p, path) for p in linear)}


@rule("quantize")
def _calibration_samples_feed_mse(sections, raw):
    """quantize.calibration.samples are read by method mse only (minmax and percentile read the weights alone)."""
    calibration = sections["quantize"].calibration
    if calibration.samples and calibration.method != "mse":
        yield Problem(("quantize", "calibration", "samples"),
                      f"method {calibration.method} sets each range from the weights alone: minitrain quantizes "
                      "weights only and computes in float, so there are no activations to calibrate; samples "
                      "weigh the rounding error of method mse (give method: mse, or leave samples out)")


@rule("quantize", "lora")
def _quantize_a_whole_model(sections, raw):
    """quantize.qat.enabled needs quantize.enabled, and quantize cannot follow a LoRA run (merge it first)."""
    quantize, lora = sections["quantize"], sections["lora"]
    if quantize.qat.enabled and not quantize.enabled:
        yield Problem(("quantize", "qat", "enabled"), "QAT trains for the quantization after training: set "
                                                      "quantize.enabled too")
    if quantize.enabled and lora.enabled:
        yield Problem(("quantize", "enabled"), "a LoRA run ends with adapters, not a whole model: `minitrain "
                                               "merge-adapters` the run, then `minitrain quantize` the merged model")


def quantize_warnings(quantize: QuantizeConfig, architecture: dict) -> list[str]:
    """The quantize keys given that change nothing: group_size but per_group, qat.observer with QAT off, exclude
    entries that stay float anyway (`stays_float`), and the calibration keys set away from their defaults that
    are not read (`calibration_warnings`)."""
    if not quantize.enabled:
        return []
    floats = stays_float(architecture)
    unused = [("group_size", quantize, quantize.granularity != "per_group",
               f"granularity {quantize.granularity} has no groups (per_group reads it)"),
              ("qat.observer", quantize.qat, not quantize.qat.enabled, "QAT is off (qat.enabled: false)")]
    found = [f"quantize.{key}: {getattr(section, key.rpartition('.')[2])!r} has no effect: {why}"
             for key, section, off, why in unused if off and key.rpartition(".")[2] in section.model_fields_set]
    linear = linear_module_paths(architecture)
    for i, name in enumerate(quantize.exclude):
        floating = [why for path, why in floats.items() if module_matches(path, name)]
        if floating and not any(module_matches(p, name) for p in linear):
            found.append(f"quantize.exclude[{i}]: {name!r} is {floating[0]}; minitrain quantizes linear layers "
                         "only, so it stays float anyway")
    return found + calibration_warnings(quantize)


def calibration_warnings(quantize: QuantizeConfig) -> list[str]:
    """The quantize.calibration keys set away from their defaults that change nothing: after QAT the file is
    written with qat.observer's ranges (the weights QAT computed with), so calibration.method and samples are
    not read; calibration.percentile is read by the percentile method (or observer) only."""
    given, default = quantize.calibration, CalibrationConfig()
    qat = quantize.qat.enabled
    why = {"method": qat, "samples": qat,
           "percentile": (quantize.qat.observer if qat else given.method) != "percentile"}
    because = (f"after QAT the file is written with qat.observer's ranges ({quantize.qat.observer}), the weights QAT "
               "computed with; choose them with qat.observer") if qat else "only method percentile reads it"
    return [f"quantize.calibration.{key}: {getattr(given, key)!r} has no effect: {because}"
            for key, unused in why.items() if unused and getattr(given, key) != getattr(default, key)]
