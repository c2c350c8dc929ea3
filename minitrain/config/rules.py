"""Rules that involve more than one key. Each is a small function collected by `@rule` into `CORE_RULES`
(what a rule is: minitrain/config/rule.py); `RULES` joins them with the fine-tuning and table rules of their own
modules, and doubles as the list of checks that docs/yaml-mode.md documents and `minitrain validate` counts.
"""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel

from minitrain.common.registry import keyword_defaults
from minitrain.config import finetune_rules, parallel_rules, pruning_section, table_rules, text_rules
from minitrain.config.observing import CALLBACKS, DASHBOARD_FIGURES, METRIC_ALIASES, logged_key
from minitrain.config.problems import Problem, did_you_mean
from minitrain.config.rule import RUN_LENGTHS, Rule, RuleBook, given, mode_fits, one_home
from minitrain.config.schema import MODEL_KEYS, OPTIMIZER_KEYS, SCHEDULER_KEYS, ModelConfig
from minitrain.models.registry import FAMILIES, LANGUAGE_MODELS, parameter_shapes, refusal
from minitrain.nn.module import name_matches
from minitrain.optim.factory import OPTIMIZERS
from minitrain.optim.schedule import SCHEDULES

CORE_RULES = RuleBook()
rule = CORE_RULES.rule


# --- a setting in two homes, and the length of the run ----------------------------------------------------


@rule()
def _clip_in_one_place(sections, raw):
    """optimizer.clip and training.clip are the same setting: give at most one (same for clip_value)."""
    yield from one_home(raw, "clip", ("optimizer", "training"))
    yield from one_home(raw, "clip_value", ("optimizer", "training"))


@rule()
def _total_steps_in_one_place(sections, raw):
    """scheduler.total_steps (lab 01) and training.total_steps are the same setting: give at most one."""
    yield from one_home(raw, "total_steps", ("scheduler", "training"))


@rule()
def _warmup_in_one_form(sections, raw):
    """scheduler.warmup_steps and scheduler.warmup_ratio say the same thing: give at most one."""
    if given(raw, "scheduler", "warmup_steps") and given(raw, "scheduler", "warmup_ratio"):
        yield Problem(("scheduler", "warmup_ratio"), "also given as scheduler.warmup_steps; give one of them")


@rule()
def _validation_cadence_in_one_form(sections, raw):
    """training.val_every and training.val_every_epoch say the same thing: give at most one."""
    if given(raw, "training", "val_every") and given(raw, "training", "val_every_epoch"):
        yield Problem(("training", "val_every_epoch"), "also given as training.val_every; give one of them")


@rule()
def _one_run_length(sections, raw):
    """Exactly one of training.total_steps (or scheduler.total_steps), training.epochs, training.duration."""
    named = [f"{section}.{key}" for section, key in RUN_LENGTHS if given(raw, section, key)]
    kinds = {g.split(".")[1] for g in named}
    if not kinds:
        yield Problem(("training",),
                      "say how long to train: set one of training.total_steps (or scheduler.total_steps), "
                      "training.epochs, training.duration")
    elif len(kinds) > 1:
        section, key = named[-1].split(".")
        others = ", ".join(g for g in named if g.split(".")[1] != key)
        yield Problem((section, key), f"give only one of total_steps / epochs / duration (also given: {others})")


# --- model --------------------------------------------------------------------------------------------------


@rule("model")
def _model_keys_fit_type(sections, raw):
    """Each model key must be one its type uses (n_layer, d_model... with minigpt; context, hidden... with mlp_lm)."""
    yield from _keys_of_type(sections["model"], "model", MODEL_KEYS)


@rule("model")
def _family_keys_agree(sections, raw):
    """The model's keys obey its family's rules (its record's `check`), e.g. heads that divide the width.

    docs/yaml-mode.md lists each family's; a model file's config is held to the same (models/family.py)."""
    for key, why in FAMILIES[sections["model"].type].check(sections["model"].architecture()):
        yield Problem(("model", key), why)


@rule("model", "training")
def _gradient_checkpointing_fits_type(sections, raw):
    """training.gradient_checkpointing needs a model type that can recompute its layers in backward (llama)."""
    if sections["training"].gradient_checkpointing and (why := refusal(sections["model"].type, "recomputation")):
        yield Problem(("training", "gradient_checkpointing"), f"{why}; set it to false")


# --- optimizer ----------------------------------------------------------------------------------------------


def _keys_of_type(section: BaseModel, name: str, table: Mapping[str, set[str]]) -> Iterator[Problem]:
    allowed = table[section.type]
    for key in sorted(section.model_fields_set - allowed):
        users = sorted(t for t, keys in table.items() if key in keys)
        yield Problem((name, key),
                      f"{name} type {section.type} does not use {key} (it belongs to {', '.join(users)})")


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


@rule("optimizer", "model", "training", "pruning")
def _full_batch_optimizer_fits(sections, raw):
    """optimizer.type lbfgs and cg are full-batch: a table's sequential model, without clipping, dropout or pruning.
    (Each of the three changes the objective or its gradient between the line search's evaluations.)"""
    opt, training = sections["optimizer"], sections["training"]
    if not OPTIMIZERS[opt.type].full_batch:
        return
    kind = sections["model"].type
    if kind in LANGUAGE_MODELS:
        yield Problem(("optimizer", "type"), f"{opt.type} is a full-batch method (its line search re-evaluates the "
                                             f"loss on one fixed batch); a {kind} language model trains on "
                                             "mini-batches: choose adamw, adam, sgd, rmsprop, adagrad or lamb")
    for key in ("clip", "clip_value"):
        if getattr(opt, key) is not None or getattr(training, key) is not None:
            yield Problem(("optimizer", key), f"{opt.type}'s line search needs the loss's own gradient, not a "
                                              "clipped one")
    for i, layer in enumerate((raw.get("model") or {}).get("layers") or []):
        if isinstance(layer, dict) and layer.get("dropout"):
            yield Problem(("model", "layers", i, "dropout"), f"{opt.type}'s line search compares losses of one "
                                                             "objective; dropout draws another at each evaluation")
    if sections["pruning"].enabled:
        yield Problem(("pruning", "enabled"), f"{opt.type}'s line search recomputes gradients the pruning mask does "
                                              "not reach: prune with a mini-batch optimizer, or prune the trained "
                                              "model (`minitrain prune`)")


@rule("optimizer")
def _group_overrides_something(sections, raw):
    """Each optimizer.groups entry must set lr_scale (or lr) or weight_decay."""
    for i, group in enumerate(sections["optimizer"].groups):
        if group.lr_scale is None and group.lr is None and group.weight_decay is None:
            yield Problem(("optimizer", "groups", i), "overrides nothing: set lr_scale (or lr) or weight_decay")
        if group.lr_scale is not None and group.lr is not None:
            yield Problem(("optimizer", "groups", i, "lr"), "also given as lr_scale; give one of them")


def parameter_names(model: ModelConfig) -> list[str]:
    """The model's parameter names for this shape, in model order (`minitrain.models.registry.parameter_shapes`)."""
    return [name for name, _ in parameter_shapes(model.architecture())]


def _matches_no_parameter(path: tuple, pattern: str, names: list[str]) -> Problem:
    return Problem(path, f"pattern {pattern!r} matches no parameter (names look like {names[2 % len(names)]!r})")


@rule("model")
def _freeze_matches(sections, raw):
    """Each model.freeze pattern must match at least one parameter name, and something must be left to train."""
    model = sections["model"]
    if not model.freeze:
        return  # the names grow with n_layer: list them only when there is a pattern to match
    names = parameter_names(model)
    for i, pattern in enumerate(model.freeze):
        if not any(name_matches(name, pattern) for name in names):
            yield _matches_no_parameter(("model", "freeze", i), pattern, names)
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
            yield _matches_no_parameter(("optimizer", "groups", i, "pattern"), group.pattern, names)


# --- scheduler ----------------------------------------------------------------------------------------------


@rule("scheduler")
def _scheduler_keys_fit_type(sections, raw):
    """Each scheduler key must be one its type uses (step_size/gamma with step, factor/patience with plateau...)."""
    yield from _keys_of_type(sections["scheduler"], "scheduler", SCHEDULER_KEYS)


@rule("scheduler")
def _schedule_has_its_keys(sections, raw):
    """Keys a schedule type has no default for must be given (step_size for step, gamma for exponential)."""
    sched = sections["scheduler"]
    for key, default in keyword_defaults(SCHEDULES[sched.type], skip=("optimizer", "lr_max", "total_steps")).items():
        if default is inspect.Parameter.empty and getattr(sched, key) is None:
            yield Problem(("scheduler", key), f"scheduler type {sched.type} needs {key}")


@rule("scheduler")
def _one_cycle_has_own_warmup(sections, raw):
    """scheduler type one_cycle warms up by pct_start, so scheduler.warmup_steps must be 0."""
    sched = sections["scheduler"]
    own = "pct_start" in SCHEDULER_KEYS[sched.type]  # its signature has a rising phase of its own
    if own and sched.warmup_steps:
        yield Problem(("scheduler", "warmup_steps"), f"{sched.type} warms up by pct_start; set warmup_steps to 0")
    if own and sched.warmup_ratio:
        yield Problem(("scheduler", "warmup_ratio"), f"{sched.type} warms up by pct_start; leave warmup_ratio out")


@rule("scheduler", "training")
def _warmup_ends_before_the_end(sections, raw):
    """scheduler.warmup_steps must be smaller than the total steps (when the steps are given directly)."""
    sched, training = sections["scheduler"], sections["training"]
    total = training.total_steps or sched.total_steps
    if total is not None and sched.warmup_steps >= total:
        yield Problem(("scheduler", "warmup_steps"), f"warmup_steps {sched.warmup_steps} must be below total_steps "
                                                     f"{total}")


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
    if "final_div_factor" in sched.model_fields_set & SCHEDULER_KEYS[sched.type] and opt.lr_min > 0:
        yield Problem(("scheduler", "final_div_factor"), f"{sched.type} ends at optimizer.lr_min ({opt.lr_min:g}) "
                                                         "when it is above 0; give lr_min or final_div_factor")


@rule("scheduler", "training")
def _one_cycle_rises_for_a_step(sections, raw):
    """one_cycle needs total_steps >= 2 and pct_start · total_steps > 1 (a rising phase of at least a step)."""
    sched, training = sections["scheduler"], sections["training"]
    total = training.total_steps or sched.total_steps
    if "pct_start" in SCHEDULER_KEYS[sched.type] and total is not None and (total < 2 or sched.pct_start * total <= 1):
        yield Problem(("scheduler", "pct_start"), f"pct_start {sched.pct_start:g} · total_steps {total} must exceed 1")


@rule("scheduler")
def _plateau_mode_fits_metric(sections, raw):
    """scheduler.mode must fit scheduler.metric: max for accuracy-like metrics, min for loss-like ones."""
    sched = sections["scheduler"]
    if SCHEDULES[sched.type].follows_metric:
        yield from mode_fits(("scheduler",), sched.metric, sched.mode)


# --- training -----------------------------------------------------------------------------------------------


@rule("monitoring", "training")
def _alerts_watch_logged_metrics(sections, raw):
    """Each alert's metric must be one the run logs (loss, lr, grad_norm, val_loss, val_ppl, chosen val metrics)."""
    logged = logged_metrics(sections["training"])
    for i, alert in enumerate(sections["monitoring"].alert_rules()):
        if alert.kind != "nan" and alert.metric not in logged:
            yield Problem(("monitoring", "alerts", i), f"{alert.metric} is never logged, so this alert could never "
                                                       f"fire{did_you_mean(alert.metric, logged)}; logged: "
                                                       f"{', '.join(logged)}")


@rule("monitoring", "training")
def _dashboard_shows_logged_metrics(sections, raw):
    """Each monitoring.dashboard metric and chart metric must be one the run logs (or throughput, eta)."""
    dashboard = sections["monitoring"].dashboard
    if dashboard is None:
        return
    logged = logged_metrics(sections["training"])
    named = [(("metrics", i), name, DASHBOARD_FIGURES) for i, name in enumerate(dashboard.metrics)]
    named += [(("charts", i, "metric"), c.metric, ()) for i, c in enumerate(dashboard.charts) if c.metric]
    for where, name, figures in named:
        if name not in figures and logged_key(name, logged) is None:
            known = [*logged, *figures]
            yield Problem(("monitoring", "dashboard", *where), f"{name} is never logged{did_you_mean(name, known)}; "
                                                              f"the dashboard shows {', '.join(known)}")


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


# --- callbacks and outputs ----------------------------------------------------------------------------------


@rule("callbacks")
def _callback_options_fit_type(sections, raw):
    """Each callbacks[].config key must be one its callback type uses (see "Callbacks" below)."""
    for i, entry in enumerate(sections["callbacks"]):
        uses = CALLBACKS[entry.type].options
        for key in sorted(entry.config.model_fields_set - set(uses)):
            takes = f"takes {', '.join(uses)}" if uses else "takes no config keys"
            yield Problem(("callbacks", i, "config", key), f"a {entry.type} callback {takes}")


@rule("callbacks")
def _custom_callbacks_name_a_function(sections, raw):
    """A custom callback needs entry_point ('module:function'); entry_point and args are for custom ones only."""
    for i, entry in enumerate(sections["callbacks"]):
        calls = CALLBACKS[entry.type].calls_entry_point
        if calls and entry.entry_point is None:
            yield Problem(("callbacks", i), f"a {entry.type} callback needs entry_point: 'module:function' (a "
                                            "function that takes the callback context)")
        for key in ("entry_point", "args"):
            if not calls and key in entry.model_fields_set:
                yield Problem(("callbacks", i, key), f"only a custom callback takes {key}")


@rule("callbacks")
def _callback_intervals_count_steps_or_epochs(sections, raw):
    """callbacks[].interval counts steps (trigger step) or epochs (epoch_end); other triggers take none."""
    for i, entry in enumerate(sections["callbacks"]):
        if entry.interval != 1 and entry.trigger not in ("step", "epoch_end"):
            yield Problem(("callbacks", i, "interval"), f"trigger {entry.trigger} acts at every {entry.trigger} "
                                                        "event; interval is for step or epoch_end")


@rule("callbacks")
def _train_end_is_for_callbacks_that_need_no_step(sections, raw):
    """Trigger train_end is for sample_predictions and custom callbacks: the others act on a step of training."""
    for i, entry in enumerate(sections["callbacks"]):
        if entry.trigger == "train_end" and not CALLBACKS[entry.type].after_training:
            yield Problem(("callbacks", i, "trigger"), f"a {entry.type} callback logs or saves at a step; after "
                                                       "training there is none (the run saves its last checkpoint "
                                                       "itself): use step, validation or epoch_end")


@rule("callbacks", "model")
def _sample_predictions_need_a_language_model(sections, raw):
    """A sample_predictions callback needs a language model: it decodes answers, and a table model has none."""
    kind = sections["model"].type
    for i, entry in enumerate(sections["callbacks"]):
        if CALLBACKS[entry.type].reads not in ("", FAMILIES[kind].reads):
            yield Problem(("callbacks", i, "type"), f"a {entry.type} callback decodes a language model's "
                                                    f"answers; a {kind} model reads table rows, so it has none")


@rule("callbacks", "training")
def _one_best_checkpoint(sections, raw):
    """One rule keeps checkpoints/best.safetensors: training.checkpoint.save_best or one checkpoint callback's."""
    bests = [i for i, e in enumerate(sections["callbacks"]) if "save_best" in CALLBACKS[e.type].options
             and e.config.save_best]
    if (sections["training"].checkpoint.save_best and bests) or len(bests) > 1:
        yield Problem(("callbacks", bests[-1], "config", "save_best"), "checkpoints/best.safetensors is kept by "
                      "one rule only: training.checkpoint.save_best or one checkpoint callback's save_best")


@rule("callbacks")
def _checkpoint_callback_mode_fits_metric(sections, raw):
    """A checkpoint callback's mode must fit its metric: max for accuracy-like metrics, min for loss-like ones."""
    for i, entry in enumerate(sections["callbacks"]):
        if "mode" in CALLBACKS[entry.type].options:
            yield from mode_fits(("callbacks", i, "config"), entry.config.metric, entry.config.mode)


def logged_columns(training: BaseModel, callbacks: list) -> list[str] | None:
    """The columns of metrics.csv (globs for the callbacks' families), or None when a custom callback may log
    any name."""
    columns = {CALLBACKS[entry.type].logs for entry in callbacks} - {""}
    return None if "*" in columns else [*logged_metrics(training), *sorted(columns)]


@rule("output", "training", "callbacks")
def _included_metrics_are_logged(sections, raw):
    """Each output.metrics.include name must be a column the run logs (train_loss, learning_rate: loss, lr)."""
    include = sections["output"].metrics.include or []
    columns = logged_columns(sections["training"], sections["callbacks"])
    for i, name in enumerate(include if columns is not None else []):
        name = METRIC_ALIASES.get(name, name)
        if not any(fnmatch.fnmatchcase(c, name) or fnmatch.fnmatchcase(name, c) for c in columns):
            yield Problem(("output", "metrics", "include", i), f"{name} is never logged"
                                                                f"{did_you_mean(name, columns)}; logged: "
                                                                f"{', '.join(columns)}")


@rule("output", "model")
def _gguf_output_has_a_llama_cpp_layout(sections, raw):
    """output.model_format gguf needs a model llama.cpp runs: minigpt (attention by 1/sqrt(head size)) or llama."""
    model = sections["model"]
    if sections["output"].model_format != "gguf":
        return
    if why := refusal(model.type, "gguf"):
        yield Problem(("output", "model_format"), f"gguf: {why}")
    elif model.attn_scale is not None:
        yield Problem(("output", "model_format"), f"gguf: llama.cpp's gpt2 scales attention by 1/sqrt(head size) "
                                                  f"only, and model.attn_scale is {model.attn_scale:g}")


# Every rule, in the order they run and docs/yaml-mode.md lists them: these, the fine-tuning sections', the tables',
# those of runs on a pretrained base, data parallelism's.
RULES: tuple[Rule, ...] = (*CORE_RULES, *finetune_rules.RULES, *pruning_section.RULES, *table_rules.RULES,
                           *text_rules.RULES, *parallel_rules.RULES)


def run_rules(sections: Mapping[str, BaseModel], raw: Mapping[str, Any]) -> list[Problem]:
    """Every problem found by the rules whose sections are all valid."""
    problems: list[Problem] = []
    for r in RULES:
        if all(name in sections for name in r.needs):
            problems += r.check(sections, raw)
    return problems
