"""Where starting weights come from: `model.init_from: PATH | user/repo` and `minitrain init --base`.

A source is one of

    runs/lab01/                         a run folder (its final model, see minitrain/hub/run_folder.py)
    models/minigpt-....safetensors      a minitrain model file or training checkpoint
    exports/minigpt/                    an export folder: config.json + model.safetensors (+ vocab.json)
    exports/minigpt/model.safetensors   the weights of an export, with config.json beside them
    runs/lora/, models/...-lora-....    a LoRA run or adapter file: its base (recorded; `base=` overrides it)
                                        with the adapters merged in (minitrain/lora/adapter.py)
    user/repo                           a Hub model repo holding an export; downloaded with hf_hub_download
                                        into the standard Hugging Face cache (HF_HOME), so a second run, or
                                        one with HF_HUB_OFFLINE=1, reads the cached copy

A GPT-2 model trained with its own tokenizer (a folder or repo holding GPT-2's BPE: merges.txt, a BPE
tokenizer.json, or a vocab.json that is a token -> id table rather than minitrain's character vocabulary) is a
pretrained base (minitrain/data/gpt2_base.py): runs, `sample`, `eval` and `export` read it with its own tokenizer
(minitrain/hub/pretrained.py), and here, where character ids would be fed to it, it is refused with that reason.
minitrain's own exports (character vocab.json, WordLevel tokenizer.json) load as before.

A local path wins over a Hub id of the same spelling. Before anything is loaded, the source's architecture (its
family, `model.type`, and every key of it but dropout: n_layer, n_head, d_model, ... for MiniGPT) must equal the
config's, and the weights must fit it: every tensor present, none extra, every shape right; otherwise one error
lists what differs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import safetensors
import safetensors.numpy

from minitrain.common.errors import BAD_INPUT, ArgumentError, UserError
from minitrain.common.hub_id import hub_id_problem, missing_local_path, names_hub_repo
from minitrain.common.io import read_bytes, read_json_object, regular_file_problem
from minitrain.config.problems import Problem, exit_code_of
from minitrain.config.schema import Config
from minitrain.data.gpt2_base import own_tokenizer
from minitrain.data.tokenizer import CharTokenizer
from minitrain.formats.gpt2 import WEIGHTS_FILE, check_state_dict, from_gpt2_config
from minitrain.hub.hub_errors import download_repo
from minitrain.hub.run_folder import locate, read_run, run_of, run_vocab
from minitrain.lora import LoraSettings, add_adapters, check_base, load_adapter_state, merged_state, settings_of
from minitrain.models.registry import DEFAULT_TYPE, build_model, linear_module_paths, model_keys, model_type
from minitrain.nn import Module
from minitrain.runs.model_files import FORMAT as MINITRAIN_FORMAT
from minitrain.runs.model_files import check_tensors, load_model_file

HUB_REQUIRED = ("config.json", WEIGHTS_FILE)
HUB_OPTIONAL = ("vocab.json", "merges.txt")  # merges.txt: only to tell a BPE GPT-2 repo (refused) from an export
KEY = "model.init_from"


class Pretrained(NamedTuple):
    state: dict[str, np.ndarray]
    model_config: dict[str, Any]
    vocab_path: Path | None  # the character vocabulary the weights were trained with, when known
    where: str  # the file the weights came from, for messages


def is_hub_id(spec: str) -> bool:
    """`user/name` that is not a local path (and does not look like a file)."""
    return names_hub_repo(spec) and not spec.endswith((".safetensors", ".json", ".gguf"))


def download(repo_id: str) -> Path:
    """Fetch an exported model from the Hub into the HF cache; return the cached snapshot folder."""
    return download_repo(repo_id, f"{KEY} {repo_id}", f"a file it needs ({', '.join(HUB_REQUIRED)})", HUB_OPTIONAL,
                         shards=False)


def gpt2_state(path: Path) -> dict[str, np.ndarray]:
    """Weights of a GPT-2 safetensors file under MiniGPT's names.

    Files saved by transformers from a bare `GPT2Model` lack the `transformer.` prefix; old ones also carry
    the causal-mask buffers `attn.bias`/`attn.masked_bias` (constants, not weights). `lm_head.weight`, when
    present, is the tied copy of `wte`.
    """
    try:
        state = safetensors.numpy.load(read_bytes(path, "weights file"))
    except (safetensors.SafetensorError, ValueError, TypeError) as e:
        raise UserError(f"{path}: not a readable safetensors file ({e})", 2) from None
    state.pop("lm_head.weight", None)
    if not any(name.startswith("transformer.") for name in state):
        state = {f"transformer.{name}": a for name, a in state.items()}
    state = {name: a for name, a in state.items() if not name.endswith((".attn.bias", ".attn.masked_bias"))}
    check_tensors(state, str(path))  # float and finite, as minitrain's own files
    return state


def _export_folder(folder: Path, weights: Path) -> Pretrained:
    config_path = folder / "config.json"
    found = own_tokenizer(folder)
    if found is not None:  # a pretrained base: hub/pretrained.py reads it with its tokenizer, for a text run
        raise UserError(f"{folder}: a GPT-2 model trained with its own tokenizer ({found}), not on minitrain's "
                        "character ids: it is a pretrained base, fine-tuned on text records with that tokenizer "
                        "(model: {type: minigpt, init_from: ...}; docs/fine-tuning.md), and read by `minitrain "
                        "sample`, `eval` and `export` as one; here it is refused rather than fed character ids", 2)
    config = from_gpt2_config(read_json_object(config_path, "model config"), str(config_path))
    vocab = folder / "vocab.json"
    return Pretrained(gpt2_state(weights), config, vocab if vocab.is_file() else None, str(weights))


def _is_minitrain_file(path: Path) -> bool:
    try:
        with safetensors.safe_open(path, "numpy") as f:
            return (f.metadata() or {}).get("format") == MINITRAIN_FORMAT
    except (OSError, safetensors.SafetensorError) as e:
        raise UserError(f"{path}: not a readable safetensors file ({e})", 2) from None


def load_pretrained(spec: str, base: str | None = None) -> Pretrained:
    """Weights, model config and vocabulary of any source listed in the module docstring; the weights are
    checked against the config before anything is built from them. A LoRA run or adapter file gives its base
    with the adapters merged in (`base` replaces the base it records)."""
    pretrained = _read_source(spec, base)
    check_state_dict(pretrained.state, pretrained.model_config, pretrained.where)
    return pretrained


def _read_source(spec: str, base: str | None) -> Pretrained:
    path = download(spec) if is_hub_id(spec) else Path(spec)
    if path.is_dir():
        if (path / WEIGHTS_FILE).is_file() and (path / "config.json").is_file():
            return _export_folder(path, path / WEIGHTS_FILE)
        info = read_run(path)
        vocab = info.find(info.section("data").get("vocab_path"))
        if info.adapter is not None:
            return _merged(info.state, info.model_config, str(info.model_path), base, info.run_dir, vocab)
        return Pretrained(info.state, info.model_config, vocab, str(info.model_path))
    if path.is_file() and path.suffix == ".safetensors":
        if _is_minitrain_file(path):
            state, model_config, _ = load_model_file(path)
            vocab = run_vocab(path)  # a file in a run's checkpoints/ or models/: the run's vocabulary
            if settings_of(model_config) is not None:
                return _merged(state, model_config, str(path), base, run_of(path), vocab)
            return Pretrained(state, dict(model_config), vocab, str(path))
        if (path.parent / "config.json").is_file():
            return _export_folder(path.parent, path)
        raise UserError(f"{KEY} {spec}: a GPT-2 safetensors file needs its config.json beside it")
    problem = regular_file_problem(path)
    if problem is None:  # a file, but not one that holds a model (results.json, say)
        raise UserError(f"{KEY} {spec}: not a model: give a run folder, a model or checkpoint .safetensors file, "
                        "an export folder or a Hub id", 2)
    if problem != "not found":
        raise UserError(f"{KEY} {spec}: {problem}", 2)
    why = missing_local_path(spec) or f"no such file or folder, and {hub_id_problem(spec) or 'not a Hub model id'}"
    raise UserError(f"{KEY} {spec}: {why}", BAD_INPUT)


def _adapted_base(model_config: dict[str, Any], where: str, base: str | None, run_dir: Path | None) -> Pretrained:
    """The base an adapter adapts (`base`, else the one it records, found as a run's paths are), checked to be the
    weights it was trained on."""
    settings = settings_of(model_config)
    spec = base or settings.base
    if spec is None:
        raise UserError(f"{where}: a LoRA adapter that does not record its base model; give it (--base-model)", 2)
    found = locate(spec, run_dir)
    pretrained = load_pretrained(str(found) if found is not None else spec)
    check_base(settings, pretrained.state, where, f"{spec} ({pretrained.where})")
    return pretrained


def adapted_model(state: dict[str, np.ndarray], model_config: dict[str, Any], where: str, base: str | None = None,
                  run_dir: Path | None = None) -> Module:
    """The LoRA model an adapter stands for: its base (`_adapted_base`) built and loaded, the adapter's tensors put
    in."""
    pretrained = _adapted_base(model_config, where, base, run_dir)
    return built(_model_keys(pretrained), pretrained.state, pretrained.where, settings_of(model_config), state, where)


def built(keys: dict[str, Any], state: dict[str, np.ndarray], source: str, settings: LoraSettings | None = None,
          adapter: dict[str, np.ndarray] | None = None, where: str = "") -> Module:
    """The model of `keys` with `state` loaded (`source` names it in errors); with LoRA `settings`, its adapters
    put in and loaded from `adapter` (`where` names the adapter's file)."""
    model = build_model(keys)
    model.load_state_dict(state, source=source)
    if settings is not None:
        add_adapters(model, settings, rng=np.random.default_rng(0))  # A's random init is overwritten just below
        load_adapter_state(model, adapter, where)
    return model


def _merged(state: dict[str, np.ndarray], model_config: dict[str, Any], where: str, base: str | None,
            run_dir: Path | None, vocab: Path | None) -> Pretrained:
    """An adapter folded into its base with NumPy (`merged_state`): what merging the adapted model gives, unbuilt."""
    pretrained = _adapted_base(model_config, where, base, run_dir)
    config = pretrained.model_config
    merged = merged_state(pretrained.state, state, settings_of(model_config), linear_module_paths(config))
    return Pretrained(merged, config, vocab, where)


def init_model_from(model, spec: str, vocab_path: str | Path | None = None) -> str:
    """Load the weights of `spec` into `model` after checking them against `model.config`.

    With `vocab_path` (the run's vocabulary) the source's vocabulary, when it has one, must be the same:
    the same ids must mean the same characters, or the embedding rows would be shuffled.
    Returns where the weights came from.
    """
    pretrained = load_pretrained(spec)
    _check_fits(pretrained, spec, model.config, vocab_path)
    model.load_state_dict(pretrained.state, source=f"{KEY} {spec} ({pretrained.where})")
    return pretrained.where


def init_from_problems(cfg: Config) -> list[Problem]:
    """What `init_model_from` would refuse in `cfg`'s model.init_from, as config problems (so `validate` finds
    a missing source or one of another architecture, exit code 2, before `train` starts)."""
    spec = cfg.model.init_from
    if spec is None:
        return []
    try:
        model_config = {k: v for k, v in cfg.model.architecture().items() if k != "type" or v != DEFAULT_TYPE}
        _check_fits(load_pretrained(spec), spec, model_config, cfg.data.vocab_path)
    except (UserError, ArgumentError) as exc:
        return [Problem(("model", "init_from"), str(exc).removeprefix(f"{KEY} "), exit_code_of(exc))]
    return []


def _check_fits(pretrained: Pretrained, spec: str, model_config: dict[str, Any], vocab_path) -> None:
    if vocab_path is not None and pretrained.vocab_path is not None and Path(vocab_path).is_file():
        ours, theirs = CharTokenizer.load(vocab_path).chars, CharTokenizer.load(pretrained.vocab_path).chars
        if ours != theirs:
            raise UserError(f"{KEY} {spec}: its vocabulary ({pretrained.vocab_path}, {len(theirs)} characters) "
                            f"differs from data.vocab_path ({vocab_path}, {len(ours)} characters)")
    # n_head changes no tensor shape, so only the configs can tell that the heads would be cut differently;
    # the other keys would show as tensor errors too, but one per tensor. Dropout may change when training on.
    theirs, ours = _model_keys(pretrained), {"type": model_type(model_config), **model_config}
    theirs.setdefault("type", DEFAULT_TYPE)
    keys = [*ours, *(k for k in theirs if k not in ours)]  # the architecture's own order
    differ = [f"{k} {theirs.get(k)} (this config: {ours.get(k)})" for k in keys
              if k != "dropout" and theirs.get(k) != ours.get(k)]
    if differ:
        raise UserError(f"{KEY} {spec}: a model of another architecture: {', '.join(differ)}; make the model "
                        f"section match it (`minitrain init --base {spec}` writes one that does)")


def _model_keys(pretrained: Pretrained) -> dict[str, Any]:
    """The source's architecture as its family's constructor keys (and `type`, for a family other than MiniGPT)."""
    config = pretrained.model_config
    kind = model_type(config)
    keys = {key: config[key] for key in model_keys(kind) if key in config}
    return keys if kind == DEFAULT_TYPE else {"type": kind, **keys}


def load_model(spec: str, base: str | None = None) -> tuple[Module, Path | None]:
    """The model built from the source's config with its weights loaded (a LoRA adapter merged into its base, or
    `base`), and its vocabulary (if known)."""
    pretrained = load_pretrained(spec, base)
    return built(_model_keys(pretrained), pretrained.state, pretrained.where), pretrained.vocab_path


def model_section_from_base(spec: str) -> tuple[dict[str, Any], Path | None]:
    """The `model:` section of a config that starts from `spec` (for `minitrain init --base`), `init_from`
    included, and the base's character vocabulary when the source has one (the new run must use the same)."""
    pretrained = load_pretrained(spec)
    return {**_model_keys(pretrained), "init_from": spec}, pretrained.vocab_path
