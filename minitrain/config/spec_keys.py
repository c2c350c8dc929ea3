"""What happens to each key of the YAML-mode spec (entrenar v1.0) in minitrain: the tables `spec_shape.py` translates
by, and the lookups over them.

    RENAMED     the same setting under minitrain's name: optimizer.lr → optimizer.lr_max, with VALUE_MAPS where
                the spec's words differ (scheduler.name cosine_annealing → warmup_cosine)
    NO_EFFECT   accepted, and does nothing here (data.loader.num_workers...); `validate` lists them
    NOT_YET     refused: a later version of minitrain adds it (data sources, tracking...). The one table of
                planned features: it shrinks as they arrive.
    CANNOT      refused: it cannot work on CPU NumPy, is another tool's format or service, or would mean pickle;
                each reason names its own cause and says what to do instead.

A table key is a dotted path, with `*` for every item of a list, or `path=pattern` for the values of that key
matching a shell-style pattern (`model.device=cuda*`). Keys whose value changes shape (optimizer.betas, the root
seed...) are `spec_shape.py`'s converters. docs/yaml-mode.md has a row for every key of the spec.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import Any

from minitrain.config.source import KeyPath, dotted
from minitrain.models.registry import DEFAULT_TYPE

SPEC_VERSION = "1.0"  # the `entrenar:` header this minitrain reads
FORMAT_VERSION = 1  # minitrain's own header, `minitrain: 1`
SPEC_OUTPUT_DIR = "./output"  # output.dir of a spec-shaped manifest that sets none (the spec's Appendix A)

RENAMED: dict[str, str] = {
    "optimizer.name": "optimizer.type",
    "optimizer.lr": "optimizer.lr_max",
    "optimizer.param_groups": "optimizer.groups",
    "optimizer.groups.*.params": "optimizer.groups.*.pattern",
    "scheduler.name": "scheduler.type",
    "scheduler.warmup.steps": "scheduler.warmup_steps",
    "scheduler.warmup.ratio": "scheduler.warmup_ratio",
    "scheduler.warmup.start_lr": "scheduler.warmup_start_lr",
    "scheduler.T_max": "scheduler.decay_steps",
    "scheduler.eta_min": "optimizer.lr_min",
    "scheduler.max_lr": "optimizer.lr_max",
    "training.max_steps": "training.total_steps",
    "training.gradient.accumulation_steps": "training.grad_accumulation",
    "training.gradient.clip_norm": "training.clip",
    "training.gradient.clip_value": "training.clip_value",
    "training.validation.every": "training.val_every",
    "training.validation.every_epoch": "training.val_every_epoch",
    "training.validation.metrics": "training.val_metrics",
    "training.validation.cross_validation": "training.cross_validation",
    "model.source": "model.init_from",
    "output.model.format": "output.model_format",
    "model.architecture.type": "model.type",
    "model.architecture.hidden_size": "model.d_model",
    "model.architecture.num_layers": "model.n_layer",
    "model.architecture.num_heads": "model.n_head",
    "model.architecture.vocab_size": "model.vocab_size",
    "model.architecture.max_seq_length": "model.max_seq_len",
    "model.architecture.layers": "model.layers",
    "data.train": "data.train_path",
    "data.val": "data.val_path",
    "data.test": "data.test_path",
    "data.loader.batch_size": "training.batch_size",
    "data.loader.shuffle": "training.shuffle",
    "data.loader.drop_last": "training.drop_last",
    "data.loader.seed": "training.data_seed",
    "monitoring.terminal.enabled": "monitoring.progress",
    "monitoring.terminal.refresh_rate": "monitoring.dashboard.refresh_ms",
    "monitoring.terminal.metrics": "monitoring.dashboard.metrics",
    "monitoring.terminal.charts": "monitoring.dashboard.charts",
    # the publish spec's names (simplify-entrenar §3.2-3.3): a Hub id or a local path, the loader's batch, the
    # output folder (as Hugging Face's TrainingArguments.output_dir)
    "model.path": "model.init_from",
    "data.batch_size": "training.batch_size",
    "training.output_dir": "output.dir",
}

VALUE_MAPS: dict[str, dict[Any, Any]] = {
    "scheduler.name": {"cosine_annealing": "warmup_cosine", "cosine": "warmup_cosine"},  # both warm up first
    "monitoring.terminal.enabled": {True: "auto", False: "none"},
    "model.architecture.type": {"transformer": DEFAULT_TYPE},  # the default family is the transformer, GPT-2
}

NO_EFFECT: dict[str, tuple[str, str]] = {
    # key: (what its value must be, why it changes nothing here)
    "data.loader.num_workers": ("int>=0", "batches are gathered from arrays in memory by the training process"),
    "data.loader.pin_memory": ("bool", "there is no GPU to copy batches to"),
    "data.loader.prefetch_factor": ("int>=1", "batches are gathered from arrays in memory by the training process"),
    "model.device=auto": ("", "minitrain always runs on the CPU"),
    "model.device=cpu": ("", "minitrain always runs on the CPU"),
    "model.format=safetensors": ("", "model.source is read by what it is: a .gguf file as GGUF, a model file or "
                                     "folder as safetensors"),
    "model.format=gguf": ("", "model.source is read by what it is: a .gguf file (llama, qwen2, or a gpt2 GGUF "
                              "minitrain exported) as GGUF, a model file or folder as safetensors"),
    "training.deterministic": ("bool", "minitrain is always deterministic: the same config and seeds give the "
                                       "same bytes"),
    "training.benchmark=false": ("", "there is no cuDNN autotuner to turn off"),
    "training.mixed_precision.enabled=false": ("", "minitrain trains in model.dtype throughout"),
    "training.mixed_precision.dtype": ("", "mixed precision is not used"),
    "training.mixed_precision.loss_scale": ("", "mixed precision is not used"),
    "output.model.save_optimizer": ("bool", "checkpoints always hold the optimizer state (resuming needs it); "
                                            "the final model file holds the weights"),
    "output.model.save_scheduler": ("bool", "checkpoints always hold the schedule state (resuming needs it)"),
    "output.report.enabled": ("bool", "report.md is always written"),
    "output.report.include_plots": ("bool", "report.md always shows the loss curve"),
}

# The planned features, one line each: refused as "not supported yet" until they arrive. Each says what to do
# meanwhile.
_LATER = "is planned for a later minitrain"
NOT_YET: dict[str, str] = {
    "data.augmentation.*.color_jitter": f"color jitter {_LATER}; random_crop, horizontal_flip and normalize "
                                        "are there for images",
}

_EXPORT = "`minitrain export` the model to a Hugging Face folder and go on with PyTorch"
_PICKLE = ("pt files are pickles, which run code when they are loaded; minitrain reads and writes safetensors and "
           "GGUF")
_OTHER_FORMAT = ("apr is entrenar's own format; minitrain reads and writes safetensors and GGUF (`minitrain export "
                 "--format hf|gguf` converts)")
CANNOT: dict[str, str] = {
    "training.distributed": "these are PyTorch DDP's keys; minitrain's data parallelism is runtime.data_parallel "
                            "{workers: N, backend: local | ray} (docs/distributed.md)",
    "training.mixed_precision.enabled=true": "float16/bfloat16 mixed precision needs a GPU's half-precision units "
                                             "(NumPy computes float16 slower than float32); use model.dtype float32",
    "training.benchmark=true": "there is no cuDNN autotuner on the CPU; minitrain's kernels are fixed",
    "data.format=ald": "ald is entrenar's own format; write the table as parquet, arrow, csv or json",
    "data.preprocessing.*.tokenize": "minitrain's language models read characters: the character tokenizer is "
                                     "built from the training split, and a subword tokenizer's ids would mean "
                                     "nothing to them",
    "data.augmentation.*.back_translate": "back-translation needs translation models, which minitrain does not "
                                          "have; random_swap and random_delete work on characters",
    "model.device=cuda*": f"minitrain runs NumPy on the CPU; for a GPU, {_EXPORT}",
    "model.device=mps*": f"minitrain runs NumPy on the CPU; for a GPU, {_EXPORT}",
    "model.dtype=float16": "float16 training needs loss scaling and a GPU to pay off; use float32 (or float64)",
    "model.dtype=bfloat16": "NumPy has no bfloat16; use float32 (or float64)",
    "model.format=pt": _PICKLE,
    "model.format=apr": _OTHER_FORMAT,
    "output.model.format=pt": _PICKLE,
    "output.model.format=apr": _OTHER_FORMAT,
    "output.report.format=pdf": "report.md is markdown and format html writes report.html; print that to PDF",
    "monitoring.tracking.backend=trueno-db": "trueno-db is entrenar's own database; use mlflow (a local SQLite "
                                             "file or your server), tensorboard or jsonl",
    "monitoring.tracking.backend=wandb": "Weights & Biases is a hosted service minitrain does not reach; use mlflow "
                                         "(a local SQLite file or your server), tensorboard or jsonl",
    "output.registry": "minitrain cannot reach the pacha:// registry; a publish: {repo: user/name} section "
                       "uploads the model to the Hugging Face Hub",
    "quality": "the quality score is computed by every run (report.md, `minitrain info`), not configured",
    "quantize.scheme=dynamic": "dynamic quantization rounds the activations at run time to feed integer matrix "
                               "kernels; minitrain computes in float32 from dequantized weights, so it would cost "
                               "accuracy and gain nothing: use symmetric or asymmetric (weights only)",
}

# The spec keys that spec.py's headers and converters read (neither renamed nor without effect), as JSON Schemas.
OWN_KEYS: dict[str, dict[str, Any]] = {
    "entrenar": {"const": SPEC_VERSION, "description": "the YAML-mode spec's version"},
    "minitrain": {"const": FORMAT_VERSION, "description": "minitrain's config format"},
    "seed": {"type": ["integer", "null"], "minimum": 0, "description": "training.rng_seed; data_seed = seed + 1"},
    "optimizer.betas": {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                        "minItems": 2, "maxItems": 2, "description": "[beta1, beta2]"},
    "training.early_stopping.enabled": {"type": "boolean", "description": "false turns early stopping off"},
    "training.effective_batch_size": {"type": ["integer", "string"],
                                      "description": "checked: batch_size × grad_accumulation"},
}

_NO_SERVICE = "minitrain reaches no service but the Hugging Face Hub; download the files and give their local path"
URI_SCHEMES = {"hf://": None, "pacha://": _NO_SERVICE, "s3://": _NO_SERVICE, "http://": _NO_SERVICE,
               "https://": _NO_SERVICE}

# Sections that exist only in the spec's shape: spec_shape.py empties them by its moves, then removes them.
SPEC_SECTIONS = ("data.loader", "training.gradient", "training.validation", "training.mixed_precision",
                 "scheduler.warmup", "model.architecture", "output.model", "monitoring.terminal")


def key_path(dotted_key: str) -> KeyPath:
    """`optimizer.groups.*.pattern` -> ('optimizer', 'groups', '*', 'pattern')."""
    return tuple(int(p) if p.isdigit() else p for p in dotted_key.split("."))


def _matches(pattern: KeyPath, path: KeyPath) -> bool:
    return len(pattern) == len(path) and all(p == "*" or p == q for p, q in zip(pattern, path, strict=True))


def aliases(path: KeyPath) -> list[KeyPath]:
    """The other spellings of one setting: the minitrain key of a spec key, or the spec keys of a minitrain key."""
    found = []
    for spec, home in RENAMED.items():
        spec_path, home_path = key_path(spec), key_path(home)
        if "*" not in spec_path and path in (spec_path, home_path):
            found.append(home_path if path == spec_path else spec_path)
    return found


def value_word(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def classify(path: KeyPath, value: Any) -> tuple[str, str, str] | None:
    """("no_effect" | "not_yet" | "cannot", reason, what the value must be: a VALUE_KINDS key) for a key and its
    value, or None for a key of neither."""
    for kind, table in (("cannot", CANNOT), ("not_yet", NOT_YET), ("no_effect", NO_EFFECT)):
        for key, reason in table.items():
            listed, _, pattern = key.partition("=")
            if not _matches(key_path(listed), path):
                continue
            if pattern and not (isinstance(value, str | bool | int | float) and
                                fnmatch.fnmatchcase(value_word(value).lower(), pattern)):
                continue
            return (kind, reason, "") if isinstance(reason, str) else (kind, reason[1], reason[0])
    return None


def refusal(path: KeyPath) -> str | None:
    """Why the key at `path` (or a section above it) is refused whatever its value, or None."""
    for end in range(1, len(path) + 1):
        found = classify(path[:end], None)
        if found is not None and found[0] != "no_effect":
            return f"{dotted(path[:end])} is not supported: {found[1]}"
    return None


def accepted_values(path: KeyPath) -> list[str]:
    """The values the tables accept for `path` when they list it value by value (model.device: auto, cpu)."""
    return [key.partition("=")[2] for key in NO_EFFECT
            if "=" in key and _matches(key_path(key.partition("=")[0]), path)]


# What a key without effect must hold (NO_EFFECT's first column): a check, its words, and its JSON Schema.
VALUE_KINDS: dict[str, tuple[Callable[[Any], bool], str, dict[str, Any]]] = {
    "bool": (lambda v: isinstance(v, bool), "true or false", {"type": "boolean"}),
    "int>=0": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0",
               {"type": "integer", "minimum": 0}),
    "int>=1": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "an integer >= 1",
               {"type": "integer", "minimum": 1}),
    "number>0": (lambda v: isinstance(v, int | float) and not isinstance(v, bool) and v > 0, "a number > 0",
                 {"type": "number", "exclusiveMinimum": 0}),
    "": (lambda v: True, "anything", {}),  # the value is in the key (model.device=cpu)
}


def spec_keys_in(section: KeyPath) -> list[str]:
    """The spec's own key names directly under `section` (list indices skipped), for suggestions."""
    keys = [*RENAMED, *NO_EFFECT, *NOT_YET, *CANNOT, *OWN_KEYS]
    prefix = "".join(f"{part}." for part in section if not isinstance(part, int))
    return sorted({k.partition("=")[0][len(prefix):].split(".")[0] for k in keys
                   if k.startswith(prefix) and "*" not in k[len(prefix):].split(".")[0]})
