"""Rules about table tasks (sequential models, data sources, splits, metrics, losses), a `RuleBook` like the
others (minitrain/config/rule.py)."""

from __future__ import annotations

import math

from minitrain.autograd.loss_kinds import LOSSES
from minitrain.common.errors import DataError
from minitrain.config.data_section import on_pretrained_base
from minitrain.config.problems import Problem
from minitrain.config.rule import RuleBook, given, mode_fits
from minitrain.config.schema import TASK_METRICS
from minitrain.config.table_sections import IMAGE_AUGMENTATIONS, TEXT_AUGMENTATIONS
from minitrain.models.registry import LANGUAGE_MODELS
from minitrain.models.sequential import output_width, resolve_widths

LANGUAGE_MODELING = "language_modeling"


def _task_of(sections) -> str | None:
    """The task when the config alone tells it: language_modeling for a language model, the `task` key for a
    sequential model (None: inferred from the data)."""
    if sections["model"].type in LANGUAGE_MODELS:
        return LANGUAGE_MODELING
    return sections["task"]


RULES = RuleBook()
rule = RULES.rule


@rule("task", "model")
def _task_fits_model(sections, raw):
    """task must fit model.type: language_modeling for minigpt, mlp_lm; classification, regression for sequential."""
    task, kind = sections["task"], sections["model"].type
    if task is None:
        return
    if kind in LANGUAGE_MODELS and task != LANGUAGE_MODELING:
        yield Problem(("task",), f"{task} needs model.type sequential (a {kind} model is a language model)")
    if kind not in LANGUAGE_MODELS and task == LANGUAGE_MODELING:
        yield Problem(("task",), "language_modeling needs model.type minigpt or mlp_lm; a sequential model "
                                 "classifies or regresses the rows of a table")


@rule("model")
def _sequential_layers_fit(sections, raw):
    """model.layers of a sequential model: given, with a linear layer, widths that chain, and softmax only last.

    Each layer's in_features (or dim) must be the width before it; widths left out are filled in from the data."""
    model = sections["model"]
    if model.type in LANGUAGE_MODELS:
        return
    if not model.layers:
        yield Problem(("model", "layers"), "a sequential model needs its layers, e.g. [{linear: {out_features: "
                                           "10}}]")
        return
    layers = [layer.model_dump() for layer in model.layers]
    try:
        resolve_widths(layers, None)
    except DataError as exc:
        yield Problem(exc.key, exc.detail)
        return
    if output_width(layers) is None:
        yield Problem(("model", "layers"), "has no linear layer: nothing would map the features to the outputs")


@rule("task", "model", "training")
def _metrics_fit_task(sections, raw):
    """training.val_metrics must be the task's (a language model's, a classifier's or a regressor's metrics).

    loss, perplexity, token_accuracy, exact_match for a language model; accuracy, precision, recall, f1, auc_roc,
    confusion_matrix for classification; mse, mae, r2 for regression."""
    task, metrics = _task_of(sections), sections["training"].val_metrics
    allowed = set(TASK_METRICS[task]) if task else set(TASK_METRICS["classification"]) | set(
        TASK_METRICS["regression"])
    allowed.add("perplexity")  # always in the list (schema.ALWAYS_MEASURED); a table task does not log it
    for i, metric in enumerate(metrics):
        if metric in allowed:
            continue
        index = _position(raw, metric, i)
        if task == LANGUAGE_MODELING:
            hint = "; for a language model's accuracy use token_accuracy" if metric == "accuracy" else ""
            yield Problem(("training", "val_metrics", index),
                          f"{metric} is a {_owner(metric)}'s metric; a language model's are loss, perplexity, "
                          f"token_accuracy and exact_match{hint}")
        else:
            yield Problem(("training", "val_metrics", index),
                          f"{metric} is a {_owner(metric)}'s metric; {task or 'a table task'}'s are "
                          f"{', '.join(TASK_METRICS[task]) if task else 'those of classification or regression'}")


def _owner(metric: str) -> str:
    owners = {"language_modeling": "language model", "classification": "classifier", "regression": "regressor"}
    return next(owners[t] for t, metrics in TASK_METRICS.items() if metric in metrics)


def _position(raw, metric: str, fallback: int) -> int:
    """Where the user wrote `metric` in training.val_metrics (the schema reorders the list)."""
    written = raw.get("training", {}).get("val_metrics") if isinstance(raw.get("training"), dict) else None
    return written.index(metric) if isinstance(written, list) and metric in written else fallback


@rule("task", "model", "training")
def _loss_fits_task(sections, raw):
    """training.loss: cross_entropy for classification and language models; mse or huber for regression."""
    task, loss = _task_of(sections), sections["training"].loss
    if loss is None or task is None:
        return
    if task not in LOSSES[loss].tasks:
        fits = " or ".join(name for name, kind in LOSSES.items() if task in kind.tasks)
        yield Problem(("training", "loss"), f"{loss} does not fit the task {task}; use {fits}")


@rule("training")
def _watched_metrics_point_the_right_way(sections, raw):
    """training.checkpoint and training.early_stopping watch a metric the run logs, with the mode that fits it.

    mode max for accuracy, precision, recall, f1, auc_roc and r2; min for the others."""
    training = sections["training"]
    watched = [(("training", "checkpoint"), training.checkpoint)]
    if training.early_stopping is not None:
        watched.append((("training", "early_stopping"), training.early_stopping))
    logged = {"loss", "val_loss", "val_ppl", *(f"val_{m}" for m in training.val_metrics)}
    for path, section in watched:
        if section.metric not in logged:
            yield Problem((*path, "metric"), f"{section.metric} is not measured: add "
                                             f"{section.metric.removeprefix('val_')} to training.val_metrics")
        yield from mode_fits(path, section.metric, section.mode)


@rule()
def _data_named_one_way(sections, raw):
    """data.source and data.train/val/test are two ways to name the data: give one; data.split needs data.source."""
    if given(raw, "data", "source"):
        for key in ("train_path", "val_path", "test_path"):
            if given(raw, "data", key):
                yield Problem(("data", key), "also given: data.source; give the data one way (a source, or the "
                                             "split files)")
    elif given(raw, "data", "split"):
        yield Problem(("data", "source"), "missing: data.split splits one source; give it (a file, folder or hf:// "
                                          "dataset)")


@rule("data")
def _split_ratios_sum_to_one(sections, raw):
    """data.split: train + val + test must be 1."""
    split = sections["data"].split
    if split is not None and not math.isclose(split.train + split.val + split.test, 1.0, abs_tol=1e-9):
        total = split.train + split.val + split.test
        yield Problem(("data", "split"), f"train {split.train:g} + val {split.val:g} + test {split.test:g} = "
                                         f"{total:g}, not 1")


@rule("data", "model")
def _table_keys_need_a_table_model(sections, raw):
    """data.source, target, preprocessing, split and image augmentations need a sequential model (source and split
    also serve a pretrained base's text records); text augmentations an LM.

    Text augmentations are random_swap and random_delete; image augmentations random_crop, horizontal_flip,
    normalize."""
    data, kind = sections["data"], sections["model"].type
    table = kind not in LANGUAGE_MODELS
    if not table:
        keys = ("target", "preprocessing") if on_pretrained_base(sections["model"]) else ("source", "target",
                                                                                         "preprocessing", "split")
        for key in keys:
            if given(raw, "data", key):
                also = " and pretrained bases (model.init_from)" if key in ("source", "split") else ""
                yield Problem(("data", key), f"is for tables (model.type sequential){also}; a {kind} model of its own "
                                             "reads its text from data.train and data.val")
    for i, step in enumerate(data.augmentation):
        if step.kind in IMAGE_AUGMENTATIONS and not table:
            yield Problem(("data", "augmentation", i), f"{step.kind} transforms image rows of a table (model.type "
                                                       "sequential)")
        if step.kind in TEXT_AUGMENTATIONS and table:
            yield Problem(("data", "augmentation", i), f"{step.kind} changes characters of a language model's text; "
                                                       "a table's rows have none")


@rule("data")
def _image_augmentations_know_the_image(sections, raw):
    """Image augmentations need data.image_shape; random_crop.size is its height and width; normalize, a channel's."""
    data = sections["data"]
    shape = data.image_shape
    for i, step in enumerate(data.augmentation):
        if step.kind not in IMAGE_AUGMENTATIONS:
            continue
        if shape is None:
            yield Problem(("data", "augmentation", i), f"{step.kind} needs data.image_shape (e.g. [8, 8]) to see "
                                                       "rows as images")
            continue
        channels = shape[2] if len(shape) == 3 else 1
        if step.kind == "random_crop" and step.options.size != shape[:2]:
            yield Problem(("data", "augmentation", i, "random_crop", "size"),
                          f"{step.options.size} must be the image's [height, width] {shape[:2]} (the crop is cut "
                          "from the padded image; val and predict read uncropped rows)")
        if step.kind == "normalize" and not len(step.options.mean) == len(step.options.std) == channels:
            yield Problem(("data", "augmentation", i, "normalize"), f"give {channels} mean and {channels} std "
                                                                    "(one per channel)")


@rule("model", "training")
def _cross_validation_needs_a_table(sections, raw):
    """training.cross_validation needs model.type sequential (a language model's val holds the held-out verbs)."""
    if sections["training"].cross_validation is not None and sections["model"].type in LANGUAGE_MODELS:
        yield Problem(("training", "cross_validation"), "needs model.type sequential; a language model's val split "
                                                        "holds the held-out verbs, which folds would train on. Tune "
                                                        "on data.dev_path and score val once")
