"""A run on a pretrained base (`model.type: llama` with `model.init_from`: a Hugging Face folder, a Hub id or a
.gguf file; or `model.type: minigpt` with a GPT-2 that brings its own tokenizer; minitrain/hub/pretrained.py reads
them).

    read_base(spec)                  the base's architecture and tokenizer without its weights (config.json or the
                                     GGUF metadata, read by `describe_base`; a Hub id is fetched into the Hugging
                                     Face cache first)
    complete_model_section(cfg)      the config with every architecture key of `model:` filled from the base; a key
                                     the config gives must equal the base's, except a Llama's max_seq_len, which
                                     may be shorter than the base's context (RoPE has no position table to cut;
                                     MiniGPT's learned positions are one: n_positions rows, all kept)
    load_base_weights(model, spec)   the base's float32 weights (a GGUF dequantized) into a built model
    run_model(run_dir)               a finished run's model (a LoRA run: the base rebuilt from model.init_from and
                                     its adapters put in) and the tokenizer the run saved in RUN/tokenizer/; its
                                     max_seq_len is the base's context again when the base can still be read (the
                                     run's rows may have been shorter: the network is the same, RoPE has no table)
    run_state(run_dir)               the config and float32 state of `run_model` with its adapters merged, and the
                                     tokenizer, building no model (the adapters folded with NumPy: what export
                                     writes; a QLoRA run's into its NF4 base dequantized, or with `float_base`
                                     into the float base it was quantized from)

The architecture filled in is what config.resolved.yaml records, so a run folder says exactly what was trained.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from minitrain.common.errors import UserError
from minitrain.config.problems import ConfigError, Problem
from minitrain.config.schema import Config, ModelConfig
from minitrain.config.source import ConfigSource
from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
from minitrain.hub.pretrained import base_kind, describe_base, download_base, load_pretrained_base
from minitrain.hub.run_folder import RunInfo, locate, read_run
from minitrain.hub.sources import built
from minitrain.lora import LoraSettings, check_base, merged_state, settings_of
from minitrain.models.registry import FAMILIES, family_of, linear_module_paths, model_keys
from minitrain.nn import Module

TOKENIZER_DIR = "tokenizer"  # RUN/tokenizer/: the base's tokenizer files, byte for byte


def architecture(kind: str) -> list[str]:
    """The base's architecture keys: its constructor's, but dropout (a fine-tune may choose its own)."""
    return [key for key in model_keys(kind) if key != "dropout"]


class BaseInfo(NamedTuple):
    model_config: dict[str, Any]  # the minitrain Llama config of the base (max_seq_len: its context)
    tokenizer: PretrainedTokenizer
    where: str  # the file or folder read, for messages


def read_base(spec: str | Path) -> BaseInfo:
    """The architecture and tokenizer of a base (see the module docstring); UserError when it cannot be read or
    minitrain cannot reproduce it. Cached per file state: a run asks several times."""
    spec = str(spec)
    path = Path(spec)
    stamp = path / "config.json" if path.is_dir() else path
    key = (stamp.stat().st_mtime_ns, stamp.stat().st_size) if stamp.is_file() else None
    return _read_base(spec, key)


@functools.lru_cache(maxsize=4)
def _read_base(spec: str, _stamp: tuple[int, int] | None) -> BaseInfo:
    # hub/pretrained.py `describe_base` reads it; a Hub id is first fetched whole (the weights too: the run reads
    # them next), and its snapshot folder read as any other.
    source = download_base(spec) if base_kind(spec, "model.init_from ") == "hub" else spec
    model, tokenizer, facts = describe_base(source)
    return BaseInfo(model, tokenizer, facts["path"])


def _plain(value: Any) -> Any:
    return value.model_dump() if hasattr(value, "model_dump") else value


def complete_model_section(cfg: Config) -> Config:
    """`cfg` with the model section's architecture keys filled from its base (a no-op for other runs, and for a
    config already completed). One ConfigError lists every key that differs from the base."""
    if not cfg.on_pretrained_base:
        return cfg
    model = cfg.model
    base = read_base(model.init_from)
    given = {k for k in model.model_fields_set if getattr(model, k) is not None}
    values = {k: _plain(getattr(model, k)) for k in given}
    problems = []
    for key in architecture(model.type):
        theirs = base.model_config.get(key)
        if key not in given:
            values[key] = theirs
        elif key == "max_seq_len" and not FAMILIES[model.type].learned_positions:
            if values[key] > theirs:
                problems.append(Problem(("model", key), f"{values[key]} is longer than the context of the base "
                                                        f"{model.init_from} ({theirs} positions)"))
        elif values[key] != theirs:
            problems.append(Problem(("model", key), f"{values[key]!r}, but the base {model.init_from} has "
                                                    f"{theirs!r}; leave the key out (it is read from the base) or "
                                                    "make it equal"))
    if problems:
        raise ConfigError(problems, cfg.source or ConfigSource())
    return cfg.model_copy(update={"model": ModelConfig.model_validate(values)})


def load_base_weights(model: Module, spec: str) -> str:
    """Load the base's float32 weights into `model` (built from the completed config); return where they came
    from (the manifest's init_from)."""
    _, state, where = _checked_base(spec, model.config)
    model.load_state_dict(state, source=f"model.init_from {spec}")
    return where


def _checked_base(spec: str, model_config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray], str]:
    """The base's model config (its context among it), float32 weights and where they came from, refused unless
    its architecture is `model_config`'s."""
    config, state, _, facts = load_pretrained_base(spec)
    family = family_of(config)
    differ = [f"{k} {config.get(k)!r} (the model: {model_config.get(k)!r})" for k in architecture(family.name)
              if (k != "max_seq_len" or family.learned_positions) and config.get(k) != model_config.get(k)]
    if differ:
        raise UserError(f"model.init_from {spec}: a base of another architecture: {', '.join(differ)}", 2)
    return config, state, str(facts.get("path", spec))


def _base_context(base: str | None, trained: int) -> int:
    """The base's context (positions), or `trained` when the base is gone (a full fine-tune's model file stands
    alone) or cannot be read."""
    try:
        return max(trained, int(read_base(base).model_config["max_seq_len"])) if base else trained
    except (UserError, OSError):
        return trained


def _run_weights(run_dir: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray], PretrainedTokenizer, RunInfo,
                                               LoraSettings | None, str | None]:
    """A finished run on a pretrained base, read: its model config (without "lora"; its max_seq_len the base's
    context again, see the module docstring), the weights to load (a LoRA run's: its base's, read once and checked
    to be the ones the adapter was trained on), the tokenizer, the run, its LoRA settings and its base (found)."""
    info = read_run(run_dir)
    folder = (info.run_dir or Path(run_dir)) / TOKENIZER_DIR
    if not (folder / "tokenizer.json").is_file():
        raise UserError(f"{run_dir}: no {TOKENIZER_DIR}/tokenizer.json: not a run on a pretrained base", 2)
    tokenizer = PretrainedTokenizer.from_folder(folder)
    settings = settings_of(info.model_config)
    recorded = settings.base if settings is not None else info.section("model").get("init_from")
    found = locate(recorded, info.run_dir)
    base = str(found) if found is not None else recorded
    config = {k: v for k, v in info.model_config.items() if k != "lora"}
    trained = config["max_seq_len"]
    if settings is None:
        return {**config, "max_seq_len": _base_context(base, trained)}, info.state, tokenizer, info, None, base
    base_config, state, _ = _checked_base(base, info.model_config)
    check_base(settings, state, str(info.model_path), settings.base)
    config["max_seq_len"] = max(trained, int(base_config["max_seq_len"]))
    return config, state, tokenizer, info, settings, base


def run_model(run_dir: str | Path) -> tuple[Module, PretrainedTokenizer]:
    """A finished run's model and tokenizer (see the module docstring)."""
    config, state, tokenizer, info, settings, base = _run_weights(run_dir)
    source = str(info.model_path) if settings is None else f"model.init_from {base}"
    model = built(info.model_config, state, source, settings, info.state, str(info.model_path))
    model.config["max_seq_len"] = config["max_seq_len"]
    return model, tokenizer


def run_state(run_dir: str | Path, float_base: bool = False) -> tuple[dict[str, Any], dict[str, np.ndarray],
                                                                      PretrainedTokenizer]:
    """What `merge_adapters(run_model(run_dir))` holds, building no model: its config, its float32 state (a LoRA
    run's adapters folded into the base by `merged_state`), and the tokenizer."""
    config, state, tokenizer, info, settings, _ = _run_weights(run_dir)
    if settings is not None:
        quantized = replace(settings, quantize_base=settings.quantize_base and not float_base)
        state = merged_state(state, info.state, quantized, linear_module_paths(config))
    return config, state, tokenizer
