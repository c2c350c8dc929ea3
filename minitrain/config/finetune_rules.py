"""Rules about the `lora:` and `quantize:` sections, a `RuleBook` like the others (minitrain/config/rule.py)."""

from __future__ import annotations

import math

from minitrain.config.finetune_sections import CalibrationConfig, QuantizeConfig
from minitrain.config.problems import Problem
from minitrain.config.rule import RuleBook, unknown_layers
from minitrain.lora import resolve_targets
from minitrain.models.registry import linear_module_paths, parameter_shapes
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
    yield from unknown_layers(("quantize", "exclude"), quantize.exclude, paths,
                              "; embeddings, the tied output layer included, are never quantized")
    if quantize.granularity == "per_group":
        shapes = dict(parameter_shapes(model.architecture()))
        kept = [p for p in paths if not any(module_matches(p, name) for name in quantize.exclude)]
        widths = sorted({shapes[f"{p}.weight"][0] for p in kept})
        bad = [w for w in widths if w % quantize.group_size]
        if bad:
            yield Problem(("quantize", "group_size"), f"{quantize.group_size} does not divide the inputs of every "
                                                      f"quantized layer ({', '.join(map(str, widths))}); choose a "
                                                      f"divisor of {math.gcd(*widths)}")


@rule("quantize")
def _calibration_samples_feed_mse(sections, raw):
    """quantize.calibration.samples are read by method mse only (minmax and percentile read the weights alone)."""
    calibration = sections["quantize"].calibration
    if calibration.samples and calibration.method != "mse":
        yield Problem(("quantize", "calibration", "samples"), f"method {calibration.method} reads the weights alone; "
                                                              "samples weigh the error of method mse")


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


def calibration_warnings(quantize: QuantizeConfig) -> list[str]:
    """The quantize.calibration keys set away from their defaults that change nothing: after QAT the file is
    written with qat.observer's ranges (the weights QAT computed with), so calibration.method and samples are
    not read; calibration.percentile is read by the percentile method (or observer) only."""
    if not quantize.enabled:
        return []
    given, default = quantize.calibration, CalibrationConfig()
    qat = quantize.qat.enabled
    why = {"method": qat, "samples": qat,
           "percentile": (quantize.qat.observer if qat else given.method) != "percentile"}
    because = (f"after QAT the file is written with qat.observer's ranges ({quantize.qat.observer}), the weights QAT "
               "computed with; choose them with qat.observer") if qat else "only method percentile reads it"
    return [f"quantize.calibration.{key}: {getattr(given, key)!r} has no effect: {because}"
            for key, unused in why.items() if unused and getattr(given, key) != getattr(default, key)]
