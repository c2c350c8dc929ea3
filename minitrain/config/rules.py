"""Rules that involve more than one key. Each is a small function registered with `@rule`.

`needs` names the sections a rule reads; it runs whenever those sections passed the schema, so one broken
section does not hide the problems of another. A rule with `needs=()` reads the raw YAML mapping (the rules about
a setting given in two homes, which are about presence, not values). `RULES` doubles as the list of checks that
docs/yaml-mode.md documents and `minitrain validate` counts.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from minitrain.architectures import linear_module_paths, parameter_shapes
from minitrain.config.problems import Problem, suggest
from minitrain.config.schema import HIGHER_IS_BETTER, MODEL_KEYS, OPTIMIZER_KEYS, SCHEDULER_KEYS, ModelConfig
from minitrain.lora import resolve_targets
from minitrain.nn.module import module_matches, name_matches

Check = Callable[[Mapping[str, Any], Mapping[str, Any]], Iterator[Problem]]


@dataclass(frozen=True)
class Rule:
    name: str
    needs: tuple[str, ...]
    doc: str
    check: Check


RULES: list[Rule] = []


def rule(*needs: str) -> Callable[[Check], Check]:
    """Register `check(sections, raw)`; its docstring's first line is the rule as users read it."""

    def register(check: Check) -> Check:
        doc = (check.__doc__ or "").strip().splitlines()[0]
        RULES.append(Rule(check.__name__.lstrip("_"), needs, doc, check))
        return check

    return register


def run_rules(sections: Mapping[str, BaseModel], raw: Mapping[str, Any]) -> list[Problem]:
    """Every problem found by the rules whose sections are all valid."""
    problems: list[Problem] = []
    for r in RULES:
        if all(name in sections for name in r.needs):
            problems += r.check(sections, raw)
    return problems


def _given(raw: Mapping[str, Any], section: str, key: str) -> bool:
    # A key counts as given when it is in the YAML (or --set) with a non-null value.
    part = raw.get(section)
    return isinstance(part, Mapping) and part.get(key) is not None


# --- a setting in two homes, and the length of the run ----------------------------------------------------


def _one_home(raw: Mapping[str, Any], key: str, homes: tuple[str, str]) -> Iterator[Problem]:
    first, second = homes
    if _given(raw, first, key) and _given(raw, second, key):
        yield Problem((second, key), f"also given as {first}.{key}; give it in one place only")


@rule()
def _clip_in_one_place(sections, raw):
    """optimizer.clip and training.clip are the same setting: give at most one (same for clip_value)."""
    yield from _one_home(raw, "clip", ("optimizer", "training"))
    yield from _one_home(raw, "clip_value", ("optimizer", "training"))


@rule()
def _total_steps_in_one_place(sections, raw):
    """scheduler.total_steps (lab 01) and training.total_steps are the same setting: give at most one."""
    yield from _one_home(raw, "total_steps", ("scheduler", "training"))


@rule()
def _warmup_in_one_form(sections, raw):
    """scheduler.warmup_steps and scheduler.warmup_ratio say the same thing: give at most one."""
    if _given(raw, "scheduler", "warmup_steps") and _given(raw, "scheduler", "warmup_ratio"):
        yield Problem(("scheduler", "warmup_ratio"), "also given as scheduler.warmup_steps; give one of them")


@rule()
def _validation_cadence_in_one_form(sections, raw):
    """training.val_every and training.val_every_epoch say the same thing: give at most one."""
    if _given(raw, "training", "val_every") and _given(raw, "training", "val_every_epoch"):
        yield Problem(("training", "val_every_epoch"), "also given as training.val_every; give one of them")


@rule()
def _one_run_length(sections, raw):
    """Exactly one of training.total_steps (or scheduler.total_steps), training.epochs, training.duration."""
    given = [
        f"{section}.{key}"
        for section, key in (
            ("training", "total_steps"), ("scheduler", "total_steps"), ("training", "epochs"),
            ("training", "duration"),
        )
        if _given(raw, section, key)
    ]
    kinds = {g.split(".")[1] for g in given}
    if not kinds:
        yield Problem(
            ("training",),
            "say how long to train: set one of training.total_steps (or scheduler.total_steps), "
            "training.epochs, training.duration",
        )
    elif len(kinds) > 1:
        section, key = given[-1].split(".")
        others = ", ".join(g for g in given if g.split(".")[1] != key)
        yield Problem((section, key), f"give only one of total_steps / epochs / duration (also given: {others})")


# --- model --------------------------------------------------------------------------------------------------


@rule("model")
def _model_keys_fit_type(sections, raw):
    """Each model key must be one its type uses (n_layer, d_model... with minigpt; context, hidden... with mlp_lm)."""
    yield from _keys_of_type(sections["model"], "model", MODEL_KEYS)


@rule("model")
def _heads_divide_width(sections, raw):
    """model.d_model must be divisible by model.n_head (each head gets d_model / n_head dimensions)."""
    model = sections["model"]
    if model.type == "minigpt" and model.d_model % model.n_head:
        yield Problem(
            ("model", "n_head"),
            f"d_model {model.d_model} is not divisible by n_head {model.n_head}; each head needs "
            f"d_model / n_head dimensions",
        )


# --- optimizer ----------------------------------------------------------------------------------------------


def _keys_of_type(section: BaseModel, name: str, table: Mapping[str, set[str]]) -> Iterator[Problem]:
    allowed = table[section.type]
    for key in sorted(section.model_fields_set - allowed):
        users = sorted(t for t, keys in table.items() if key in keys)
        yield Problem(
            (name, key),
            f"{name} type {section.type} does not use {key} (it belongs to {', '.join(users)})",
        )


@rule("optimizer")
def _optimizer_keys_fit_type(sections, raw):
    """Each optimizer key must be one its type uses (e.g. momentum with sgd/rmsprop, beta1 with adam*/lamb)."""
    yield from _keys_of_type(sections["optimizer"], "optimizer", OPTIMIZER_KEYS)


@rule("optimizer")
def _lr_floor_below_peak(sections, raw):
    """optimizer.lr_min must not exceed optimizer.lr_max."""
    opt = sections["optimizer"]
    if opt.lr_min > opt.lr_max:
        yield Problem(("optimizer", "lr_min"), f"lr_min {opt.lr_min:g} is above lr_max {opt.lr_max:g}")


@rule("optimizer")
def _nesterov_needs_momentum(sections, raw):
    """optimizer.nesterov needs optimizer.momentum > 0 and optimizer.dampening = 0 (as torch.optim.SGD)."""
    opt = sections["optimizer"]
    if opt.nesterov and opt.momentum == 0:
        yield Problem(("optimizer", "nesterov"), "nesterov needs momentum > 0")
    if opt.nesterov and opt.dampening != 0:
        yield Problem(("optimizer", "nesterov"), "nesterov needs dampening = 0")


@rule("optimizer")
def _group_overrides_something(sections, raw):
    """Each optimizer.groups entry must set lr_scale (or lr) or weight_decay."""
    for i, group in enumerate(sections["optimizer"].groups):
        if group.lr_scale is None and group.lr is None and group.weight_decay is None:
            yield Problem(("optimizer", "groups", i), "overrides nothing: set lr_scale (or lr) or weight_decay")
        if group.lr_scale is not None and group.lr is not None:
            yield Problem(("optimizer", "groups", i, "lr"), "also given as lr_scale; give one of them")


def parameter_names(model: ModelConfig) -> list[str]:
    """The model's parameter names for this shape, in model order (`minitrain.architectures.parameter_shapes`)."""
    return [name for name, _ in parameter_shapes(model.architecture())]


@rule("model")
def _freeze_matches(sections, raw):
    """Each model.freeze pattern must match at least one parameter name, and something must be left to train."""
    model = sections["model"]
    if not model.freeze:
        return  # the names grow with n_layer: list them only when there is a pattern to match
    names = parameter_names(model)
    for i, pattern in enumerate(model.freeze):
        if not any(name_matches(name, pattern) for name in names):
            yield Problem(("model", "freeze", i), f"pattern {pattern!r} matches no parameter (names look like "
                                                  f"{names[2 % len(names)]!r})")  # fmt: skip
    if all(any(name_matches(n, p) for p in model.freeze) for n in names):
        yield Problem(("model", "freeze"), "freezes every parameter: nothing would be trained")


@rule("optimizer", "model")
def _group_matches(sections, raw):
    """Each optimizer.groups pattern must match at least one parameter name of the model."""
    if not sections["optimizer"].groups:
        return  # the names grow with n_layer: list them only when there is a pattern to match
    names = parameter_names(sections["model"])
    for i, group in enumerate(sections["optimizer"].groups):
        if not fnmatch.filter(names, group.pattern):
            yield Problem(
                ("optimizer", "groups", i, "pattern"),
                f"pattern {group.pattern!r} matches no parameter (names look like {names[2 % len(names)]!r})",
            )


# --- scheduler ----------------------------------------------------------------------------------------------


@rule("scheduler")
def _scheduler_keys_fit_type(sections, raw):
    """Each scheduler key must be one its type uses (step_size/gamma with step, factor/patience with plateau...)."""
    yield from _keys_of_type(sections["scheduler"], "scheduler", SCHEDULER_KEYS)


@rule("scheduler")
def _schedule_has_its_keys(sections, raw):
    """Keys a schedule type has no default for must be given (step_size for step, gamma for exponential)."""
    sched = sections["scheduler"]
    for key in sched.required_keys():
        if getattr(sched, key) is None:
            yield Problem(("scheduler", key), f"scheduler type {sched.type} needs {key}")


@rule("scheduler")
def _one_cycle_has_own_warmup(sections, raw):
    """scheduler type one_cycle warms up by pct_start, so scheduler.warmup_steps must be 0."""
    sched = sections["scheduler"]
    if sched.type == "one_cycle" and sched.warmup_steps:
        yield Problem(("scheduler", "warmup_steps"), "one_cycle warms up by pct_start; set warmup_steps to 0")
    if sched.type == "one_cycle" and sched.warmup_ratio:
        yield Problem(("scheduler", "warmup_ratio"), "one_cycle warms up by pct_start; leave warmup_ratio out")


@rule("scheduler", "training")
def _warmup_ends_before_the_end(sections, raw):
    """scheduler.warmup_steps must be smaller than the total steps (when the steps are given directly)."""
    sched, training = sections["scheduler"], sections["training"]
    total = training.total_steps or sched.total_steps
    if total is not None and sched.warmup_steps >= total:
        yield Problem(
            ("scheduler", "warmup_steps"), f"warmup_steps {sched.warmup_steps} must be below total_steps {total}"
        )


@rule("scheduler", "optimizer")
def _warmup_starts_below_the_peak(sections, raw):
    """scheduler.warmup_start_lr must not exceed optimizer.lr_max (the warm-up rises to it)."""
    start, peak = sections["scheduler"].warmup_start_lr, sections["optimizer"].lr_max
    if start > peak:
        yield Problem(("scheduler", "warmup_start_lr"), f"warmup_start_lr {start:g} is above lr_max {peak:g}")


@rule("scheduler", "optimizer")
def _one_cycle_ends_at_one_floor(sections, raw):
    """one_cycle ends at optimizer.lr_min when it is above 0, so scheduler.final_div_factor cannot also be given."""
    sched, opt = sections["scheduler"], sections["optimizer"]
    if sched.type == "one_cycle" and opt.lr_min > 0 and "final_div_factor" in sched.model_fields_set:
        yield Problem(("scheduler", "final_div_factor"), f"one_cycle ends at optimizer.lr_min ({opt.lr_min:g}) "
                                                         "when it is above 0; give lr_min or final_div_factor")


@rule("scheduler", "training")
def _one_cycle_rises_for_a_step(sections, raw):
    """one_cycle needs total_steps >= 2 and pct_start · total_steps > 1 (a rising phase of at least a step)."""
    sched, training = sections["scheduler"], sections["training"]
    total = training.total_steps or sched.total_steps
    if sched.type == "one_cycle" and total is not None and (total < 2 or sched.pct_start * total <= 1):
        yield Problem(
            ("scheduler", "pct_start"), f"pct_start {sched.pct_start:g} · total_steps {total} must exceed 1"
        )


@rule("scheduler")
def _plateau_mode_fits_metric(sections, raw):
    """scheduler.mode must fit scheduler.metric: max for accuracy-like metrics, min for loss-like ones."""
    sched = sections["scheduler"]
    wanted = "max" if sched.metric in HIGHER_IS_BETTER else "min"
    if sched.type == "plateau" and sched.mode != wanted:
        better = "higher" if wanted == "max" else "lower"
        yield Problem(("scheduler", "mode"), f"{sched.metric} is {better}-is-better, so mode must be {wanted} "
                                             f"(got {sched.mode})")


# --- training -----------------------------------------------------------------------------------------------


@rule("monitoring", "training")
def _alerts_watch_logged_metrics(sections, raw):
    """Each alert's metric must be one the run logs (loss, lr, grad_norm, val_loss, val_ppl, chosen val metrics)."""
    logged = logged_metrics(sections["training"])
    for i, alert in enumerate(sections["monitoring"].alert_rules()):
        if alert.kind != "nan" and alert.metric not in logged:
            close = suggest(alert.metric, logged)
            hint = f" — did you mean '{close}'?" if close else ""
            yield Problem(("monitoring", "alerts", i), f"{alert.metric} is never logged, so this alert could never "
                                                       f"fire{hint}; logged: {', '.join(logged)}")


def logged_metrics(training: BaseModel) -> list[str]:
    """The keys of train_log.jsonl rows: a train row's, then a val row's (with the val_metrics chosen)."""
    extra = [f"val_{m}" for m in training.val_metrics if m not in ("loss", "perplexity", "confusion_matrix")]
    return ["step", "loss", "lr", "grad_norm", "val_loss", "val_ppl", *extra]


# --- data ---------------------------------------------------------------------------------------------------


@rule("data")
def _plain_text_has_no_answer(sections, raw):
    """data.format text (plain lines) needs loss_on: all and heldout_policy: none (no verb|tense|form fields)."""
    data = sections["data"]
    if data.format == "text":
        if data.loss_on != "all":
            yield Problem(("data", "loss_on"), "plain-text lines have no answer part; use loss_on: all")
        if data.heldout_policy != "none":
            yield Problem(("data", "heldout_policy"), "plain-text lines have no verbs to hold out; use none")


@rule("data", "training")
def _exact_match_needs_answers(sections, raw):
    """training.val_metrics exact_match needs data.format jsonl (verb records with an answer to decode)."""
    if "exact_match" in sections["training"].val_metrics and sections["data"].format != "jsonl":
        yield Problem(("training", "val_metrics"), "exact_match decodes the answer of verb records; plain-text "
                                                   "lines have none")


# --- lora and quantize --------------------------------------------------------------------------------------


def linear_layers(model: ModelConfig) -> list[str]:
    """The paths of the model's linear layers for this shape (`minitrain.architectures.linear_module_paths`)."""
    return linear_module_paths(model.architecture())


@rule("lora", "model")
def _lora_adapts_a_trained_model(sections, raw):
    """lora.enabled needs model.init_from (the trained model it adapts) and no model.freeze (LoRA freezes the base)."""
    lora, model = sections["lora"], sections["model"]
    if lora.enabled and model.init_from is None:
        yield Problem(("lora", "enabled"), "LoRA adapts a trained model: set model.init_from to it (a run, a model "
                                           "file, an export folder or a Hub id)")
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
                                       linear_layers(sections["model"]))
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
    paths = linear_layers(model)
    for i, name in enumerate(quantize.exclude):
        if not any(module_matches(p, name) for p in paths):
            yield Problem(("quantize", "exclude", i), f"{name!r} names no linear layer (they are {', '.join(paths[:4])}"
                                                      f"{', ...' if len(paths) > 4 else ''}; embeddings, the tied "
                                                      "output layer included, are never quantized)")
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
        yield Problem(("quantize", "enabled"), "a LoRA run ends with adapters, not a whole model: `minitrain merge` "
                                               "the run, then `minitrain quantize` the merged model")


# The table tasks' rules live in their own module; importing it registers them here.
from minitrain.config import table_rules  # noqa: E402, F401
