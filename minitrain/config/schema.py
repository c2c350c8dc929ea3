"""The training config, as pydantic v2 models: one class per YAML section (the `data:` section in data_section.py).

Every model forbids unknown keys (a typo is an error, never silently ignored) and validates strictly: a quoted
`"8"` is not a number and `true` is not an integer. Ranges live on the fields (`lr_max > 0`, `0 < beta1 < 1`);
rules that involve several keys (`d_model % n_head == 0`, "clip given twice") live in `rules.py`, and rules
that need the data files (`max_seq_len` ≥ the longest encoded record) in `datacheck.py`.

Defaults are lab 01's values, so lab 01's config block (which leaves most keys out of some sections) means what
the lab says. docs/yaml-mode.md documents every key.

Where lab 01 and the YAML-mode issue disagree on a key's home, both homes are accepted and giving a setting in
both is an error: `optimizer.clip` or `training.clip` (gradient-norm clipping), `scheduler.total_steps` or
`training.total_steps`. Use the resolved properties on `Config` (`clip_norm`, `total_steps`, ...) rather than
reading one home. The spec's manifest shape (`optimizer.lr`, `data.loader.batch_size`, ...) is not a second
schema: `spec_shape.py` moves its keys to their homes here before validation. Keys added after lab 01's first
runs are `ADDED_KEYS` (below).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, create_model, model_validator

from minitrain.autograd.loss_kinds import CONFIG_LOSSES
from minitrain.common.registry import keyword_defaults
from minitrain.common.strict import Count, PositiveInt, Section
from minitrain.config.data_section import DataConfig, on_pretrained_base, text_data_defaults
from minitrain.config.distillation_section import DistillationConfig
from minitrain.config.fields import Duration, RunName, SeedInt, parse_duration
from minitrain.config.finetune_sections import LoraConfig, QuantizeConfig
from minitrain.config.observing import CallbackEntry
from minitrain.config.problems import model_at
from minitrain.config.pruning_section import PruningConfig
from minitrain.config.run_sections import MonitoringConfig, OutputConfig, PublishConfig, RuntimeConfig
from minitrain.config.section import Metric, fill_defaults
from minitrain.config.source import ConfigSource
from minitrain.config.table_sections import CrossValidationConfig
from minitrain.models.registry import DEFAULT_TYPE, FAMILIES, model_keys
from minitrain.optim.factory import OPTIMIZERS
from minitrain.optim.schedule import SCHEDULES


class _ModelSection(Section):
    """The model: its family (`type`) and shape (defaults: lab 01's locked Phase 17 MiniGPT).

    Every family takes init_from, dtype and freeze, and the keys of vocab_size, max_seq_len and dropout its
    model's constructor takes; its own keys come from its record (`FAMILIES`, minitrain/models/registry.py), e.g.
    `type: minigpt` (the default) n_layer, n_head, d_model, d_ff and attn_scale. Giving a key the chosen type does
    not use is an error.
    """

    type: Literal[tuple(FAMILIES)] = DEFAULT_TYPE

    @model_validator(mode="after")
    def _type_defaults(self) -> ModelConfig:
        fill_defaults(self, MODEL_KEYS[self.type], model_keys(self.type))
        return self

    def architecture(self) -> dict[str, Any]:
        """The constructor keys of the chosen family (what `minitrain.models.registry.build_model` takes); a
        nested section (a sequential model's layers) as the plain data it was written as."""
        keys = {k: getattr(self, k) for k in model_keys(self.type) if getattr(self, k) is not None}
        return {"type": self.type, **{k: _plain(v) for k, v in keys.items()}}

    @property
    def width(self) -> int:
        """The width of the model's typical matrix product (the family's record says which: d_model for MiniGPT)."""
        return FAMILIES[self.type].width(self.architecture())


_HOME_FIELDS: dict[str, Any] = {  # the keys every family has (vocab_size ... dropout: those whose models take them)
    "vocab_size": (PositiveInt, 64),
    "max_seq_len": (PositiveInt, 32),
    "dropout": (float, Field(0.0, ge=0.0, lt=1.0)),
    "init_from": (str | None, Field(None, min_length=1, description="safetensors file, export folder or Hub id")),
    "dtype": (Literal["float32", "float64"], Field("float32", description="parameters and activations")),
    "freeze": (list[Annotated[str, Field(min_length=1)]], Field(
        default_factory=list, description="parameter name globs or module paths to keep fixed (no gradient, no "
                                          "optimizer state)")),
}


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value.model_dump() if isinstance(value, BaseModel) else value


def _model_fields() -> dict[str, Any]:
    """Every family's own keys and the keys every family has, in config.resolved.yaml's order: the order the
    keys have always had, then those of families registered later. A key two families share is declared once,
    by the first family that has it."""
    fields = dict(_HOME_FIELDS)
    for family in FAMILIES.values():
        for key, field in family.keys.model_fields.items():
            fields.setdefault(key, (field.annotation, field))
    known = [key for key in _RESOLVED_ORDER if key in fields]
    return {key: fields[key] for key in [*known, *(key for key in fields if key not in _RESOLVED_ORDER)]}


_RESOLVED_ORDER = ("n_layer", "n_head", "d_model", "d_ff", "vocab_size", "max_seq_len", "dropout", "init_from", "dtype",
                   "attn_scale", "context", "d_embed", "hidden", "activation", "freeze", "layers")
ModelConfig = create_model("ModelConfig", __base__=_ModelSection, __module__=__name__, __doc__=_ModelSection.__doc__,
                           **_model_fields())

_MODEL_ANY_FAMILY = {"type", "init_from", "dtype", "freeze"}  # the others are keys when the model takes them
MODEL_KEYS: dict[str, set[str]] = {name: _MODEL_ANY_FAMILY | set(model_keys(name)) for name in FAMILIES}


class ParamGroup(Section):
    """Overrides for the parameters whose names match `pattern` (fnmatch); the first matching group wins.

    Passed to the optimizer as one of its `groups` rules (minitrain/optim/groups.py).
    """

    pattern: str = Field(min_length=1, description="glob on parameter names, e.g. 'transformer.h.*.attn.*'")
    lr_scale: float | None = Field(None, ge=0, description="this group's lr = schedule lr · lr_scale")
    lr: float | None = Field(None, gt=0, description="this group's own peak lr: lr_scale = lr / optimizer.lr_max")
    weight_decay: float | None = Field(None, ge=0)


def _signature_defaults(cls: type) -> dict[str, Any]:
    """Keyword arguments of `cls.__init__` with their defaults (inspect.Parameter.empty when required)."""
    return keyword_defaults(cls, skip=("named_params", "optimizer", "buffer", "betas"))  # a config says beta1/beta2


class OptimizerConfig(Section):
    """The optimizer, its peak/floor learning rates (lab 01 keeps both here) and gradient clipping.

    Keys left out take the chosen type's own defaults (torch's): adamw weight_decay 0.01, adagrad eps 1e-10...
    Which keys each type takes is `OPTIMIZER_KEYS` (read from the optimizers' signatures); giving a key another
    type uses is an error. `kwargs()` is what `minitrain.optim.build_optimizer(type, params, **kwargs)` takes.
    """

    type: Literal[tuple(OPTIMIZERS)] = "adamw"  # the registry's names (minitrain/optim/factory.py)
    lr_max: float | None = Field(None, gt=0, description="peak learning rate (the optimizer's lr)")
    lr_min: float = Field(0.0, ge=0, description="floor the schedule decays to")
    beta1: float | None = Field(None, gt=0, lt=1)
    beta2: float | None = Field(None, gt=0, lt=1)
    eps: float | None = Field(None, gt=0)
    weight_decay: float | None = Field(None, ge=0)
    momentum: float | None = Field(None, ge=0, lt=1)
    dampening: float | None = Field(None, ge=0, le=1)
    nesterov: bool | None = None
    alpha: float | None = Field(None, gt=0, lt=1, description="RMSprop's smoothing constant")
    centered: bool | None = None
    lr_decay: float | None = Field(None, ge=0, description="Adagrad's lr decay")
    initial_accumulator_value: float | None = Field(None, ge=0)
    amsgrad: bool | None = Field(None, description="adam/adamw: divide by the largest second moment so far")
    history_size: PositiveInt | None = Field(None, description="lbfgs: the (step, gradient change) pairs kept")
    clip: float | None = Field(None, gt=0, description="max global gradient L2 norm (lab 01's home)")
    clip_value: float | None = Field(None, gt=0, description="clip each gradient element to ±clip_value")
    groups: list[ParamGroup] = Field(default_factory=list, description="per-parameter overrides by name")

    @model_validator(mode="after")
    def _type_defaults(self) -> OptimizerConfig:
        defaults = _signature_defaults(OPTIMIZERS[self.type])
        fill_defaults(self, OPTIMIZER_KEYS[self.type] | {"lr_max"}, {**defaults, "lr_max": defaults["lr"]})
        return self

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `build_optimizer(self.type, named_params, **kwargs)`."""
        keys = {k: getattr(self, k) for k in _signature_defaults(OPTIMIZERS[self.type]) if k not in ("lr", "groups")}
        groups = []
        for group in self.groups:
            rule = group.model_dump(exclude_none=True, exclude={"lr"})
            if group.lr is not None:  # the spec's absolute lr: the schedule scales every group alike
                rule["lr_scale"] = group.lr / self.lr_max
            groups.append(rule)
        return {"lr": self.lr_max, **keys, **({"groups": groups} if groups else {})}


_OPTIMIZER_HOME_KEYS = {"type", "lr_max", "lr_min", "clip", "clip_value", "groups"}
OPTIMIZER_KEYS: dict[str, set[str]] = {
    name: _OPTIMIZER_HOME_KEYS | (set(_signature_defaults(cls)) - {"lr", "groups"}) for name, cls in OPTIMIZERS.items()
}


class SchedulerConfig(Section):
    """The learning-rate schedule from optimizer.lr_max towards optimizer.lr_min, after `warmup_steps`.

    Lab 01 gives no `type`: warmup_cosine is the default. Which keys each type takes is `SCHEDULER_KEYS` (read
    from the schedules' signatures); keys left out take the schedule's defaults. `metric` (plateau) names what
    the loop reports to the schedule after each evaluation.
    """

    type: Literal[tuple(SCHEDULES)] = "warmup_cosine"  # the registry's names (minitrain/optim/schedule.py)
    warmup_steps: Count = 0
    warmup_ratio: float | None = Field(None, ge=0, lt=1, description="warm-up as a share of the run's steps")
    warmup_start_lr: float = Field(0.0, ge=0, description="the warm-up rises from here to lr_max")
    total_steps: PositiveInt | None = Field(None, description="lab 01's home of training.total_steps")
    decay_steps: PositiveInt | None = Field(None, description="steps of the decay after the warm-up (spec: T_max)")
    step_size: PositiveInt | None = Field(None, description="step: multiply by gamma every step_size steps")
    gamma: float | None = Field(None, gt=0, le=1, description="step / exponential decay factor")
    factor: float | None = Field(None, gt=0, lt=1, description="plateau: multiply by factor on a plateau")
    patience: Count | None = Field(None, description="plateau: evaluations without improvement tolerated")
    threshold: float | None = Field(None, ge=0, description="plateau: relative change that counts")
    mode: Literal["min", "max"] | None = None
    cooldown: Count | None = Field(None, description="plateau: evaluations ignored after a cut")
    metric: Metric = "val_loss"
    pct_start: float | None = Field(None, gt=0, lt=1, description="one_cycle: share of steps spent rising")
    div_factor: float | None = Field(None, ge=1, description="one_cycle: start lr = lr_max / div_factor")
    final_div_factor: float | None = Field(None, ge=1, description="one_cycle: end lr = start / final_div_factor")
    anneal_strategy: Literal["cos", "linear"] | None = Field(None, description="one_cycle: curve shape")

    @model_validator(mode="after")
    def _type_defaults(self) -> SchedulerConfig:
        fill_defaults(self, SCHEDULER_KEYS[self.type], _signature_defaults(SCHEDULES[self.type]))
        return self


_SCHEDULER_HOME_KEYS = {"type", "warmup_steps", "warmup_ratio", "total_steps"}
SCHEDULER_KEYS: dict[str, set[str]] = {
    name: _SCHEDULER_HOME_KEYS | (set(_signature_defaults(cls)) - {"lr_max", "lr_min"}) | (
        {"metric"} if cls.follows_metric else set()
    )
    for name, cls in SCHEDULES.items()
}


class CheckpointConfig(Section):
    """Checkpoint cadence: every `save_every` steps, keep the newest `keep_last`, and the best by `metric`."""

    save_every: PositiveInt | None = Field(500, description="steps between checkpoints; null: only the last")
    keep_last: PositiveInt | None = Field(3, description="newest checkpoints kept; null keeps all")
    save_best: bool = False
    metric: Metric = "val_loss"
    mode: Literal["min", "max"] = "min"


class EarlyStoppingConfig(Section):
    """Stop when `metric` has not improved by more than `min_delta` for `patience` evaluations."""

    metric: Metric = "val_loss"
    patience: PositiveInt = 5
    min_delta: float = Field(0.0, ge=0)
    mode: Literal["min", "max"] = "min"


# The metrics of each task (minitrain/training/tasks.py); a table task logs no perplexity. training.val_metrics
# chooses among them all, kept in this order.
TASK_METRICS = {"language_modeling": ("loss", "perplexity", "token_accuracy", "exact_match"),
                "classification": ("loss", "accuracy", "precision", "recall", "f1", "auc_roc", "confusion_matrix"),
                "regression": ("loss", "mse", "mae", "r2")}
VAL_METRICS: tuple[str, ...] = tuple(dict.fromkeys(m for metrics in TASK_METRICS.values() for m in metrics))
ValMetric = Literal[VAL_METRICS]
ALWAYS_MEASURED = ["loss", "perplexity"]  # val_loss and val_ppl: best checkpoints and early stopping read them


class TrainingConfig(Section):
    """The loop: batch, length (exactly one of total_steps / epochs / duration), cadences, seeds."""

    batch_size: PositiveInt = 8
    shuffle: bool = Field(True, description="false: every epoch in file order (no data RNG)")
    drop_last: bool = Field(True, description="false: an epoch ends with a smaller batch of the rest")
    total_steps: PositiveInt | None = None
    epochs: PositiveInt | None = None
    duration: Duration | None = Field(None, description="wall-clock budget, e.g. '90s' or '1h30m'")
    grad_accumulation: PositiveInt = 1
    gradient_checkpointing: bool = Field(False, description="recompute each layer in backward: less memory, same "
                                         "numbers (llama)")
    clip: float | None = Field(None, gt=0, description="max global gradient L2 norm")
    clip_value: float | None = Field(None, gt=0, description="clip each gradient element to ±clip_value")
    val_every: PositiveInt = 50
    val_every_epoch: bool = Field(False, description="validate at the end of each epoch (and the last step)")
    val_metrics: list[ValMetric] = Field(default_factory=lambda: list(ALWAYS_MEASURED),
                                         description="what each validation logs besides loss and perplexity")
    log_every: PositiveInt = 10
    loss_reduction: Literal["token_mean"] = "token_mean"
    loss: Literal[CONFIG_LOSSES] | None = Field(  # the loss registry (minitrain/autograd/loss_kinds.py)
        None, description="default: cross_entropy (classification, language models), mse (regression)")
    huber_delta: float = Field(1.0, gt=0, description="huber: where the loss turns from squared to linear")
    cross_validation: CrossValidationConfig | None = Field(None, description="k models on k folds: mean ± std")
    rng_seed: SeedInt = 42
    data_seed: SeedInt = 7
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    early_stopping: EarlyStoppingConfig | None = None

    @model_validator(mode="after")
    def _metrics_in_order(self) -> TrainingConfig:
        # loss and perplexity are always measured; the list is kept in one order, so equal choices hash equal.
        chosen = set(self.val_metrics) | set(ALWAYS_MEASURED)
        object.__setattr__(self, "val_metrics", [m for m in VAL_METRICS if m in chosen])
        return self


class Config(Section):
    """A whole training config. Build it with `minitrain.config.load_config` (which runs every rule)."""

    name: RunName | None = None
    version: str | None = Field(None, min_length=1)
    description: str | None = None
    task: Literal["language_modeling", "classification", "regression"] | None = Field(
        None, description="default: language_modeling for minigpt and mlp_lm; inferred from the target column for "
                          "sequential models")
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    monitoring: MonitoringConfig = Field(default_factory=MonitoringConfig)
    lora: LoraConfig = Field(default_factory=LoraConfig)
    quantize: QuantizeConfig = Field(default_factory=QuantizeConfig)
    distillation: DistillationConfig = Field(default_factory=DistillationConfig)
    pruning: PruningConfig = Field(default_factory=PruningConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    publish: PublishConfig | None = None
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    callbacks: list[CallbackEntry] = Field(default_factory=list, description="config/observing.py")

    # Where the config came from (file, text, --set list, line numbers); set by the loader.
    _source: ConfigSource | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _text_data_defaults(self) -> Config:
        # A run on a pretrained base reads text records with the base's tokenizer: no character vocabulary, no
        # verb hold-out, and the text defaults for the keys left out (object.__setattr__: not what the user wrote).
        data = self.data
        for key, value in text_data_defaults(self.model).items() if on_pretrained_base(self.model) else ():
            if key not in data.model_fields_set or (value is not None and getattr(data, key) is None):
                object.__setattr__(data, key, value)
        return self

    @property
    def source(self) -> ConfigSource | None:
        """The file, its text, the `--set` overrides and the key → line map; None for configs built in code."""
        return self._source

    @property
    def is_table_task(self) -> bool:
        """A sequential model on a table (classification or regression), not a language model on text."""
        return FAMILIES[self.model.type].reads == "table"

    @property
    def on_pretrained_base(self) -> bool:
        """A fine-tune of a pretrained base (Llama family, or GPT-2 with its own tokenizer) on text records."""
        return on_pretrained_base(self.model)

    @property
    def clip_norm(self) -> float | None:
        """Max global gradient norm, from optimizer.clip or training.clip (the rules forbid both)."""
        return self.training.clip if self.training.clip is not None else self.optimizer.clip

    @property
    def clip_value(self) -> float | None:
        """Per-element gradient clip, from training.clip_value or optimizer.clip_value."""
        return self.training.clip_value if self.training.clip_value is not None else self.optimizer.clip_value

    @property
    def total_steps(self) -> int | None:
        """Steps given directly (training.total_steps or scheduler.total_steps); None for epochs/duration."""
        return self.training.total_steps or self.scheduler.total_steps

    @property
    def duration_seconds(self) -> float | None:
        """The wall-clock budget of training.duration in seconds; None when the length is in steps/epochs."""
        return parse_duration(self.training.duration) if self.training.duration else None

    def resolve_steps(self, steps_per_epoch: int | None = None) -> int | None:
        """Optimizer steps this run takes: total_steps, or epochs · steps_per_epoch; None for a duration run.

        A duration run stops on the clock, so its number of steps is unknown in advance; the loop decides the
        schedule's horizon (from a few timed steps, or the dry run from one timed micro-batch).
        """
        if self.total_steps is not None:
            return self.total_steps
        if self.training.epochs is not None:
            if steps_per_epoch is None or steps_per_epoch < 1:
                raise ValueError("training.epochs needs the batcher's steps_per_epoch (>= 1) to count steps")
            return self.training.epochs * steps_per_epoch
        return None

    def resolve_warmup(self, total_steps: int | None) -> int:
        """Warm-up steps: scheduler.warmup_steps, or warmup_ratio · total_steps rounded (below total_steps, and 0
        while the run's length is unknown)."""
        ratio = self.scheduler.warmup_ratio
        if ratio is None:
            return self.scheduler.warmup_steps
        return min(round(ratio * total_steps), total_steps - 1) if total_steps else 0

    def resolve_val_every(self, steps_per_epoch: int) -> int:
        """Steps between validations: training.val_every, or one epoch's steps with val_every_epoch."""
        return max(steps_per_epoch, 1) if self.training.val_every_epoch else self.training.val_every

    def scheduler_kwargs(self, total_steps: int | None) -> dict[str, Any]:
        """Keyword arguments for `build_scheduler(cfg.scheduler.type, optimizer, **kwargs)`.

        `total_steps` is the run's resolved length (`resolve_steps`); lr_max and lr_min come from the optimizer
        section, where lab 01 keeps them.
        """
        values = {
            **{k: getattr(self.scheduler, k) for k in SCHEDULER_KEYS[self.scheduler.type] if k != "type"},
            "lr_max": self.optimizer.lr_max,
            "lr_min": self.optimizer.lr_min,
            "total_steps": total_steps,
            "warmup_steps": self.resolve_warmup(total_steps),
        }
        return {k: values[k] for k in _signature_defaults(SCHEDULES[self.scheduler.type])}

    @property
    def tokens_per_step_max(self) -> int:
        """Upper bound on tokens one optimizer step sees: batch_size · grad_accumulation · max_seq_len."""
        return self.training.batch_size * self.training.grad_accumulation * self.model.max_seq_len

    @property
    def output_dir(self) -> str:
        """The run folder: output.dir, or runs/<name> when it is not set."""
        return self.output.dir or f"runs/{self.name or 'run'}"


# Keys added after lab 01's first runs, by section (() for the top level; "*" stands for every item of a list).
# resolved_dict leaves a key out while it holds its neutral value, the one that means "as before" (its schema
# default, or the one its type fills in), so earlier runs keep their config.resolved.yaml and config hash.
_ADDED = {
    (): ("task", "lora", "quantize", "distillation", "pruning", "callbacks", "runtime"),
    ("model",): ("type", "attn_scale", "freeze", "dtype"),
    ("data",): ("test_path", "source", "target", "split", "preprocessing", "augmentation", "image_shape",
                "packing", "overflow", "tokenizer"),
    ("optimizer",): ("amsgrad", "groups.*.lr"),
    ("scheduler",): ("warmup_ratio", "warmup_start_lr", "decay_steps", "anneal_strategy"),
    ("training",): ("shuffle", "drop_last", "val_every_epoch", "val_metrics", "loss", "huber_delta",
                    "cross_validation", "gradient_checkpointing"),
    ("publish",): ("merge_adapters",),
    ("distillation",): ("stages",),
    ("monitoring",): ("tracking", "system", "dashboard"),
    ("output",): ("metrics", "report", "model_format", "gguf_dtype", "plots"),
}
_TYPE_FILLED = {("optimizer", "amsgrad"): False, ("scheduler", "anneal_strategy"): "cos"}  # schema default: None


def schema_default(path: tuple[str, ...]) -> Any:
    """The schema's default for the key at `path` ("*": an item of a list), a section's as plain data."""
    value = model_at(Config, tuple(p for p in path[:-1] if p != "*")).model_fields[path[-1]].get_default(
        call_default_factory=True)
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


ADDED_KEYS: dict[tuple[str, ...], Any] = {
    path: _TYPE_FILLED.get(path, schema_default(path))
    for section, keys in _ADDED.items() for path in ((*section, *key.split(".")) for key in keys)
}
