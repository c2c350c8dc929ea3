"""Config problems: collected all together, each naming its key path and its line, raised as one error.

A user who mistypes three keys should learn about all three in one go, each with a place to jump to:

    error: experiments/x/config.yaml has 2 problems:
      experiments/x/config.yaml:12: optimizer.lr_mx: unknown key — did you mean 'lr_max'?
      experiments/x/config.yaml:20: training.batch_size: must be >= 1 (got 0)

`ConfigError` is a `UserError` with exit code 2, so every CLI prints it without a traceback.
"""

from __future__ import annotations

import difflib
import re
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from minitrain.common.errors import BAD_INPUT, HUB_FAILED, UserError
from minitrain.config.source import ConfigSource, KeyPath, dotted
from minitrain.config.spec_keys import spec_keys_in
from minitrain.config.tokens import mask_tokens

UNION_TAGS = ("<rule>", "<mapping>")  # the tags of schema.AlertEntry, which pydantic puts in error locations

EXIT_INVALID_CONFIG = BAD_INPUT


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config: the key path at fault and a sentence saying what and how to fix it."""

    path: KeyPath
    message: str
    exit_code: int = BAD_INPUT  # HUB_FAILED: a Hub request failed while checking it (`exit_code_of`)


def exit_code_of(error: Exception) -> int:
    """The exit code of a problem found by catching `error`: a failed Hub request's (5), else bad input (2)."""
    return HUB_FAILED if getattr(error, "exit_code", None) == HUB_FAILED else BAD_INPUT


class ConfigError(UserError):
    """Every problem found in a config, as one message; `source` None: a config built in code. Its exit code is
    bad input's (2), or a failed Hub request's (5) when that is every problem (docs/yaml-mode.md's table)."""

    def __init__(self, problems: list[Problem], source: ConfigSource | None) -> None:
        self.problems = problems
        self.source = source = source or ConfigSource()
        where = source.path or "the config"
        count = f"{len(problems)} problem" + ("s" if len(problems) != 1 else "")
        lines = [
            f"  {_where(source, p.path, source.spell_message(p.message))}: "
            + (f"{dotted(source.spelled(p.path))}: " if p.path else "") + source.spell_message(p.message)
            for p in _ordered(problems, source)
        ]
        # A token pasted into the config is refused (loader.py), and never echoed: not in a value, key or --set.
        codes = {p.exit_code for p in problems}
        super().__init__(mask_tokens(f"{where} has {count}:\n" + "\n".join(lines)),
                         codes.pop() if len(codes) == 1 else EXIT_INVALID_CONFIG)


def _where(source: ConfigSource, path: KeyPath, message: str) -> str:
    """Where a problem is (`source.where`) and, when that is the file, each override its message names, which the
    file's value clashes with: `--set training.max_steps=5, c.yaml:2: training.epochs: give only one of ...`; a
    key without a line of its own (a default) is the override's alone."""
    where = source.where(path)
    if where in source.origins.values():
        return where
    section = source.spelled(path)[:-1]
    named = [origin for key, origin in source.origins.items() if len(key) > 1 and (
        _names(message, dotted(key)) or (key[:-1] == section and _names(message, str(key[-1]))))]
    if not named:
        return where
    return ", ".join(dict.fromkeys([*named, *([] if where == (source.path or "<config>") else [where])]))


def _names(message: str, key: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(key)}(?![\w\[])", message) is not None


def _ordered(problems: list[Problem], source: ConfigSource) -> list[Problem]:
    # File order reads best; problems without a line (defaults, --set) come last, in the order found.
    def line(p: Problem) -> int:
        path = source.spelled(p.path)
        for end in range(len(path), -1, -1):
            if path[:end] in source.lines and path[:end] not in source.origins:
                return source.lines[path[:end]]
        return 1 << 30

    return sorted(problems, key=line)


def suggest(word: str, choices: typing.Iterable[str]) -> str | None:
    """The choice `word` most plausibly misspells, ignoring case (difflib ratio ≥ 0.75: `lr_mx` → `lr_max`,
    `AdamW` → `adamw`, but not `validation` → `duration`), or None."""
    best, best_ratio = None, 0.75
    for choice in choices:  # the first of equally close choices wins: `beta` → `beta1`, not `beta2`
        ratio = difflib.SequenceMatcher(None, word.lower(), str(choice).lower()).ratio()
        if ratio > best_ratio or (ratio == best_ratio and best is None):
            best, best_ratio = choice, ratio
    return best


def did_you_mean(word: str, choices: typing.Iterable[str]) -> str:
    """" — did you mean 'X'?" for the choice `word` most plausibly misspells (`suggest`), or ""."""
    close = suggest(word, choices)
    return f" — did you mean '{close}'?" if close else ""


# Other tools' names for minitrain keys (Hugging Face's TrainingArguments and configs, nanoGPT, PyTorch): a
# suggestion by meaning where spelling cannot find one.
FOREIGN_KEYS = {
    "learning_rate": "optimizer.lr_max", "min_lr": "optimizer.lr_min", "final_lr": "optimizer.lr_min",
    "adam_beta1": "optimizer.beta1", "adam_beta2": "optimizer.beta2", "adam_epsilon": "optimizer.eps",
    "weight_decay_rate": "optimizer.weight_decay", "max_grad_norm": "training.clip",
    "grad_clip": "training.clip", "clip_grad_norm": "training.clip", "gradient_clipping": "training.clip",
    "gradient_accumulation_steps": "training.grad_accumulation", "num_train_epochs": "training.epochs",
    "num_epochs": "training.epochs", "max_epochs": "training.epochs",
    "per_device_train_batch_size": "training.batch_size", "train_batch_size": "training.batch_size",
    "seed": "training.rng_seed (and training.data_seed for the data order)",
    "eval_steps": "training.val_every", "eval_interval": "training.val_every", "logging_steps": "training.log_every",
    "log_interval": "training.log_every", "save_steps": "training.checkpoint.save_every",
    "save_total_limit": "training.checkpoint.keep_last", "lr_scheduler_type": "scheduler.type",
    "warmup": "scheduler.warmup_steps", "n_embd": "model.d_model", "hidden_size": "model.d_model",
    "n_positions": "model.max_seq_len", "n_ctx": "model.max_seq_len", "block_size": "model.max_seq_len",
    "max_position_embeddings": "model.max_seq_len", "n_inner": "model.d_ff", "intermediate_size": "model.d_ff",
    "num_hidden_layers": "model.n_layer", "num_layers": "model.n_layer", "n_layers": "model.n_layer",
    "num_attention_heads": "model.n_head", "num_heads": "model.n_head", "n_heads": "model.n_head",
    "resid_pdrop": "model.dropout", "embd_pdrop": "model.dropout", "attn_pdrop": "model.dropout",
    "output_dir": "output.dir",
}


def model_at(root: type[BaseModel], path: KeyPath) -> type[BaseModel] | None:
    """The pydantic model class that validates the mapping at `path` (list indices skipped), or None."""
    model: type[BaseModel] | None = root
    for part in path:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(part)
        model = _model_in(field.annotation) if field else None
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    # Unwrap Optional[...] and list[...] down to a model class.
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _sections_with_key(root: type[BaseModel], key: str, prefix: KeyPath = ()) -> list[str]:
    # Every dotted section of the schema that does have `key`, to say where a misplaced key belongs.
    found = []
    for name, field in root.model_fields.items():
        sub = _model_in(field.annotation)
        if sub is None:
            continue
        if key in sub.model_fields:
            found.append(dotted((*prefix, name)))
        found += _sections_with_key(sub, key, (*prefix, name))
    return found


def unknown_key_message(root: type[BaseModel], path: KeyPath) -> str:
    """'unknown key — did you mean X?' for the last part of `path`, or where the key belongs instead."""
    key = str(path[-1])
    parent = model_at(root, path[:-1])
    valid = [field.alias or name for name, field in parent.model_fields.items()] if parent else []  # as spelled
    if key in FOREIGN_KEYS:  # another tool's name for one of ours: surer than a spelling guess (n_embd, not d_embed)
        return f"unknown key — minitrain calls this {FOREIGN_KEYS[key]}"
    if hint := did_you_mean(key, [*valid, *spec_keys_in(path[:-1])]):
        return "unknown key" + hint
    homes = _sections_with_key(root, key)
    if homes:
        return f"unknown key here — '{key}' belongs in {' or '.join(homes)}"
    return f"unknown key; valid keys here: {', '.join(valid)}"


def _literal_choices(error: dict) -> list[str]:
    expected = str(error.get("ctx", {}).get("expected", ""))
    return re.findall(r"'([^']*)'", expected) or re.findall(r"-?\d+", expected)  # words are quoted, numbers not


def from_validation_error(
    root: type[BaseModel], error: ValidationError, prefix: KeyPath = ()
) -> list[Problem]:
    """Problems for every error pydantic found, with readable messages and suggestions."""
    problems = []
    for err in error.errors():
        path: KeyPath = (*prefix, *(part for part in err["loc"] if part not in UNION_TAGS))
        kind = err["type"]
        got = err.get("input")
        if kind == "extra_forbidden":
            message = unknown_key_message(root, path)
        elif kind == "missing":
            message = "required key is missing"
        elif kind == "literal_error":
            choices = _literal_choices(err)
            hint = did_you_mean(got, choices) if isinstance(got, str) else ""
            message = f"must be one of {', '.join(choices)} (got {got!r}){hint}"
        elif kind == "value_error":
            message = str(err["ctx"]["error"])
        else:
            message = _plain(err["msg"]) + f" (got {got!r})"
        problems.append(Problem(path, message))
    return problems


def _plain(msg: str) -> str:
    # pydantic's "Input should be greater than 0" reads better as "must be greater than 0".
    return re.sub(r"^Input should be", "must be", msg)
