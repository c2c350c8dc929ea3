"""A pretrained base (Llama family, or a GPT-2 with its own tokenizer) from wherever a user has one, and the Hugging
Face folder it exports to.

    load_pretrained_base(spec)   spec is one of
        ./SmolLM2/                          a Hugging Face model folder: config.json, model.safetensors (or
                                            shards + model.safetensors.index.json), tokenizer.json (+ config)
        ./gpt2/                             the same of a GPT-2 (`model_type: gpt2`, MiniGPT's config read by
                                            formats/gpt2.py), tokenizer.json or vocab.json + merges.txt
        HuggingFaceTB/SmolLM2-135M          a Hub id: those files fetched with hf_hub_download into the standard
                                            Hugging Face cache (HF_HOME), so a second load is offline
        SmolLM2-135M-Instruct.Q4_1.gguf     a GGUF file: architecture, dequantized weights and the tokenizer
                                            from its metadata (minitrain/formats/gguf_read.py)

returns `(model_config, state, tokenizer, facts)`: the minitrain Llama (minitrain/formats/hf_config.py) or MiniGPT
config, the float32 weights under minitrain's names and layout ([in, out] projections), the base's own tokenizer
(minitrain/data/pretrained_tokenizer.py) and what was found (source kind, files, dtypes, load time). Everything is
checked before a weight is used: the architecture is one minitrain reproduces, every tensor is there with its
shape, and the tokenizer's ids fit the embedding.

    describe_base(spec)   the same without a weight read: (model_config, tokenizer, facts) from config.json or
        the GGUF metadata (a Hub id fetches config.json and the tokenizer files only), with the parameter count
        in facts["parameters"]; what `minitrain init --base` needs.

    export_hf_folder(model_config, state, tokenizer, folder)   config.json (LlamaForCausalLM, or
        Qwen2ForCausalLM for q/k/v biases; GPT2LMHeadModel for MiniGPT), model.safetensors (HF layout, float32),
        the tokenizer's files (byte for byte those of the base when it had them), generation_config.json.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

import numpy as np

from minitrain.common.errors import UserError
from minitrain.common.hub_id import hub_id_problem, missing_local_path, names_hub_repo
from minitrain.common.io import atomic_write_json, read_json_object
from minitrain.data.pretrained_tokenizer import FOLDER_FILES, PretrainedTokenizer
from minitrain.formats.gguf_read import read_gguf
from minitrain.formats.gguf_vocab import gguf_tokenizer
from minitrain.formats.gpt2 import check_state_dict, from_gpt2_config, to_gpt2_config
from minitrain.formats.hf_config import from_hf_config, from_hf_state, to_hf_config, to_hf_state
from minitrain.formats.safetensors_folder import INDEX_FILE, WEIGHTS_FILE, read_folder_weights, write_weights
from minitrain.hub.hub_errors import download_repo
from minitrain.hub.sources import gpt2_state
from minitrain.models.registry import family_of, parameter_count
from minitrain.runs.model_files import check_tensors

TOKENIZER_FILES = FOLDER_FILES  # tokenizer.json (or GPT-2's vocab.json + merges.txt), its config, the template
OPTIONAL_FILES = (*TOKENIZER_FILES, "generation_config.json")
GPT2_SPECIALS = dict.fromkeys(("bos_token", "eos_token", "unk_token"), "<|endoftext|>")  # GPT2Tokenizer's defaults


def is_gguf(spec: str | Path) -> bool:
    return str(spec).lower().endswith(".gguf")


def base_kind(spec: str, prefix: str = "") -> Literal["gguf", "folder", "hub"]:
    """What a base `spec` names: a .gguf file, a Hugging Face folder, or a Hub id (`user/name` that is no local
    path); anything else is a UserError, its message led by `prefix` (the config key, when there is one)."""
    if is_gguf(spec) and Path(spec).is_file():
        return "gguf"
    if Path(spec).is_dir():
        return "folder"
    if is_base_id(spec):
        return "hub"
    problem = f"no such folder or .gguf file, and {hub_id_problem(spec) or 'not a Hub model id'}"
    raise UserError(f"{prefix}{spec}: {missing_local_path(spec) or problem}", 2)


def is_base_id(spec: Any) -> bool:
    """`user/name` naming a base on the Hub: a valid repo id that is no local path and no .gguf file's name."""
    return isinstance(spec, str) and names_hub_repo(spec) and not is_gguf(spec)


def load_pretrained_base(spec: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray], PretrainedTokenizer,
                                                    dict[str, Any]]:
    """(model_config, state in minitrain layout, tokenizer, facts) of a HF folder, a Hub id or a .gguf file."""
    start = time.perf_counter()
    spec = str(spec)
    kind = base_kind(spec)
    if kind == "gguf":
        model, state, tokenizer, facts = _from_gguf(str(Path(spec)))
    elif kind == "folder":
        model, state, tokenizer, facts = _from_folder(Path(spec))
    else:
        model, state, tokenizer, facts = _from_folder(download_base(spec))
        facts["hub_id"] = spec
    _check_ids_fit(spec, tokenizer, model)
    check_tensors(state, spec)  # float32 by now (BF16/F16 widened, GGUF blocks dequantized): NaN/inf refused
    facts["load_seconds"] = round(time.perf_counter() - start, 3)
    return model, state, tokenizer, facts


def describe_base(spec: str | Path) -> tuple[dict[str, Any], PretrainedTokenizer, dict[str, Any]]:
    """(model_config, tokenizer, facts) of a base, reading no weight (module docstring)."""
    spec = str(spec)
    kind = base_kind(spec)
    if kind == "gguf":
        model, _, tokenizer, facts = _from_gguf(spec, with_tensors=False)
        facts = {"source": "gguf", "path": spec, "read": [spec], **facts}
    else:
        hub = kind == "hub"
        folder = download_base(spec, weights=False) if hub else Path(spec)
        model, tokenizer, facts = _folder_base(folder)
        read = [str(folder / name) for name in ("config.json", *TOKENIZER_FILES) if (folder / name).is_file()]
        facts = {"source": kind, "path": str(folder), "read": read, **facts, **({"hub_id": spec} if hub else {})}
    _check_ids_fit(spec, tokenizer, model)
    facts["parameters"] = parameter_count(model)  # not listed layer by layer: a config may claim 10**12 layers
    return model, tokenizer, facts


def _check_ids_fit(spec: str, tokenizer: PretrainedTokenizer, model: dict[str, Any]) -> None:
    if tokenizer.vocab_size > model["vocab_size"]:
        raise UserError(f"{spec}: its tokenizer makes ids up to {tokenizer.vocab_size - 1} but the model has "
                        f"{model['vocab_size']} embedding rows: those ids would index past the embedding", 2)


def _from_gguf(path: str, with_tensors: bool = True):
    """(model, state ({} without `with_tensors`), tokenizer, facts) of the GGUF file `path`; the metadata is
    checked whole before a weight is read (a refused base costs no dequantizing)."""
    contents = read_gguf(path, with_tensors=False)
    model, facts = from_hf_config(contents.config, f"{path} (GGUF metadata)")
    tokenizer = gguf_tokenizer(contents.tokenizer, model["max_seq_len"])  # a character vocabulary too
    _check_ids_fit(path, tokenizer, model)
    # from_hf_state empties the state it is given as it goes: one copy in memory
    state = from_hf_state(read_gguf(path).state, model, path) if with_tensors else {}
    return model, state, tokenizer, {"source": "gguf", "path": path, **facts, **contents.facts}


def is_llama(model_config: dict[str, Any]) -> bool:
    """A base of a family read through transformers' Llama-family configs (any base); else a GPT-2 (MiniGPT's)."""
    return family_of(model_config).pretrained == "any"


def _folder_base(folder: Path) -> tuple[dict[str, Any], PretrainedTokenizer, dict[str, Any]]:
    """(minitrain model config, tokenizer, facts) of a folder's config.json and tokenizer files: the Llama family's,
    or MiniGPT's for a GPT-2 (formats/gpt2.py, with GPT2Tokenizer's special tokens)."""
    config_path = folder / "config.json"
    config = read_json_object(config_path, "model config")
    if config.get("model_type") != "gpt2":
        model, facts = from_hf_config(config, str(config_path))
        return model, PretrainedTokenizer.from_folder(folder, None), facts
    facts = {"hf_model_type": "gpt2", "architectures": config.get("architectures"),
             **{k: config.get(k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}}
    return from_gpt2_config(config, str(config_path)), PretrainedTokenizer.from_folder(folder, GPT2_SPECIALS), facts


def _from_folder(folder: Path):
    model, tokenizer, facts = _folder_base(folder)
    if is_llama(model):
        raw, files = read_folder_weights(folder)
        state = from_hf_state(raw, model, str(files[0] if len(files) == 1 else folder / INDEX_FILE))
    else:  # GPT-2 names and its Conv1D layout are MiniGPT's own
        files = [folder / WEIGHTS_FILE]
        state = gpt2_state(files[0])
        check_state_dict(state, model, str(files[0]))
    generation = folder / "generation_config.json"
    if generation.is_file():
        facts["generation_config"] = read_json_object(generation, "generation config")
    return model, state, tokenizer, {"source": "folder", "path": str(folder), "weights": [str(f) for f in files],
                                     **facts}


def download_base(repo_id: str, weights: bool = True) -> Path:
    """The files of a Hub model repo a base needs, fetched into the Hugging Face cache; the snapshot folder.
    `weights=False`: config.json and the tokenizer's files only (what `describe_base` reads)."""
    needs = f"a file a base needs (config.json, {WEIGHTS_FILE} or {INDEX_FILE} and its shards)"
    return download_repo(repo_id, f"base {repo_id}", needs, OPTIONAL_FILES, weights)


def export_hf_folder(model_config: dict[str, Any], state: dict[str, np.ndarray], tokenizer: PretrainedTokenizer,
                     folder: str | Path, model_type: str | None = None) -> Path:
    """Write a folder `transformers.AutoModelForCausalLM.from_pretrained(folder)` loads (see the module doc)."""
    folder = Path(folder)
    bos, eos, pad = tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id
    if is_llama(model_config):
        config = to_hf_config(model_config, bos, eos, pad, model_type)
        hf_state = to_hf_state(state, model_config)
    else:  # a GPT-2: MiniGPT's state dict is GPT-2's (hub/export_hf.py writes minitrain's own the same way)
        config = to_gpt2_config(model_config, pad, bos, eos)
        hf_state = state
    atomic_write_json(folder / "config.json", config)
    write_weights(folder, hf_state)
    tokenizer.save(folder)
    generation = {k: v for k, v in (("bos_token_id", bos), ("eos_token_id", eos), ("pad_token_id", pad))
                  if v is not None}
    atomic_write_json(folder / "generation_config.json", generation)
    return folder
