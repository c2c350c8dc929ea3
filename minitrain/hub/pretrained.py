"""A pretrained Llama-family base from wherever a user has one, and the Hugging Face folder it exports to.

    load_pretrained_base(spec)   spec is one of
        ./SmolLM2/                          a Hugging Face model folder: config.json, model.safetensors (or
                                            shards + model.safetensors.index.json), tokenizer.json (+ config)
        HuggingFaceTB/SmolLM2-135M          a Hub id: those files fetched with hf_hub_download into the standard
                                            Hugging Face cache (HF_HOME), so a second load is offline
        SmolLM2-135M-Instruct.Q4_1.gguf     a GGUF file: architecture, dequantized weights and the tokenizer
                                            from its metadata (minitrain/hub/gguf_file.py)

returns `(model_config, state, tokenizer, facts)`: the minitrain Llama config (minitrain/hub/hf_config.py), the
float32 weights under minitrain's names and layout ([in, out] projections), the base's own tokenizer
(minitrain/data/pretrained_tokenizer.py) and what was found (source kind, files, dtypes, load time). Everything is
checked before a weight is used: the architecture is one minitrain reproduces, every tensor is there with its
shape, and the tokenizer's ids fit the embedding.

    export_hf_folder(model_config, state, tokenizer, folder)   config.json (LlamaForCausalLM, or
        Qwen2ForCausalLM for q/k/v biases), model.safetensors (HF layout, float32), the tokenizer's files (byte
        for byte those of the base when it had them), generation_config.json.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import safetensors.numpy
from huggingface_hub import constants, hf_hub_download
from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError, RepositoryNotFoundError

from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_bytes, atomic_write_json, path_exists, read_json_object
from minitrain.config.fields import REPO_ID
from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
from minitrain.hub.gguf_file import read_gguf
from minitrain.hub.hf_config import from_hf_config, from_hf_state, to_hf_config, to_hf_state
from minitrain.hub.safetensors_folder import INDEX_FILE, WEIGHTS_FILE, read_folder_weights

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")
OPTIONAL_FILES = (*TOKENIZER_FILES[1:], "generation_config.json")


def is_gguf(spec: str | Path) -> bool:
    return str(spec).lower().endswith(".gguf")


def load_pretrained_base(spec: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray], PretrainedTokenizer,
                                                    dict[str, Any]]:
    """(model_config, state in minitrain layout, tokenizer, facts) of a HF folder, a Hub id or a .gguf file."""
    start = time.perf_counter()
    spec = str(spec)
    if is_gguf(spec) and Path(spec).is_file():
        model, state, tokenizer, facts = _from_gguf(Path(spec))
    elif Path(spec).is_dir():
        model, state, tokenizer, facts = _from_folder(Path(spec), spec)
    elif not path_exists(spec) and REPO_ID.fullmatch(spec) and not is_gguf(spec):
        model, state, tokenizer, facts = _from_folder(download_base(spec), spec)
        facts["hub_id"] = spec
    else:
        raise UserError(f"{spec}: no such folder or .gguf file, and not a Hub model id (user/name)", 2)
    if tokenizer.vocab_size > model["vocab_size"]:
        raise UserError(f"{spec}: its tokenizer makes ids up to {tokenizer.vocab_size - 1} but the model has "
                        f"{model['vocab_size']} embedding rows: those ids would index past the embedding", 2)
    facts["load_seconds"] = round(time.perf_counter() - start, 3)
    return model, state, tokenizer, facts


def _from_gguf(path: Path):
    contents = read_gguf(path)
    where = f"{path} (GGUF metadata)"
    model, facts = from_hf_config(contents.config, where)
    tokenizer = PretrainedTokenizer.from_gguf_fields(**contents.tokenizer)
    raw, contents.state = contents.state, {}  # from_hf_state empties `raw` as it goes: one copy in memory
    state = from_hf_state(raw, model, str(path))
    return model, state, tokenizer, {"source": "gguf", "path": str(path), **facts, **contents.facts}


def _from_folder(folder: Path, spec: str):
    config_path = folder / "config.json"
    config = read_json_object(config_path, "model config")
    if config.get("model_type") == "gpt2":
        raise UserError(f"{config_path}: a GPT-2 model: it loads into MiniGPT through model.init_from {spec}", 2)
    model, facts = from_hf_config(config, str(config_path))
    if not (folder / "tokenizer.json").is_file():
        raise UserError(f"{folder}: no tokenizer.json. A fine-tune must use the base's own tokenizer, and minitrain "
                        "reads it only from tokenizer.json (save it with transformers' "
                        "`AutoTokenizer.from_pretrained(...).save_pretrained(folder)`)", 2)
    tokenizer = PretrainedTokenizer.from_folder(folder)
    raw, files = read_folder_weights(folder)
    state = from_hf_state(raw, model, str(files[0] if len(files) == 1 else folder / INDEX_FILE))
    generation = folder / "generation_config.json"
    if generation.is_file():
        facts["generation_config"] = read_json_object(generation, "generation config")
    return model, state, tokenizer, {"source": "folder", "path": str(folder), "weights": [str(f) for f in files],
                                     **facts}


def download_base(repo_id: str) -> Path:
    """The files of a Hub model repo a base needs, fetched into the Hugging Face cache; the snapshot folder."""
    where = f"base {repo_id}"
    try:
        snapshot = Path(hf_hub_download(repo_id, "config.json")).parent
        try:
            hf_hub_download(repo_id, WEIGHTS_FILE)
        except EntryNotFoundError:
            index = read_json_object(hf_hub_download(repo_id, INDEX_FILE), "weights index")
            for shard in dict.fromkeys(index.get("weight_map", {}).values()):
                hf_hub_download(repo_id, str(shard))
        hf_hub_download(repo_id, "tokenizer.json")
        for name in OPTIONAL_FILES:
            with contextlib.suppress(EntryNotFoundError):
                hf_hub_download(repo_id, name)
    except LocalEntryNotFoundError:
        raise UserError(f"{where}: not in the local Hugging Face cache ({constants.HF_HUB_CACHE}) and the Hub at "
                        f"{constants.ENDPOINT} cannot be reached (offline mode or no network)") from None
    except RepositoryNotFoundError:
        raise UserError(f"{where}: no such model repo on {constants.ENDPOINT} (or it is private and no token "
                        "with access is set)") from None
    except EntryNotFoundError as e:
        raise UserError(f"{where}: the repo lacks a file a base needs (config.json, {WEIGHTS_FILE} or "
                        f"{INDEX_FILE} and its shards, tokenizer.json): {e}") from None
    except httpx2.HTTPError as e:
        raise UserError(f"{where}: download from {constants.ENDPOINT} failed ({type(e).__name__}: {e})") from None
    return snapshot


def export_hf_folder(model_config: dict[str, Any], state: dict[str, np.ndarray], tokenizer: PretrainedTokenizer,
                     folder: str | Path, model_type: str | None = None) -> Path:
    """Write a folder `transformers.AutoModelForCausalLM.from_pretrained(folder)` loads (see the module doc)."""
    folder = Path(folder)
    bos, eos, pad = tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id
    config = to_hf_config(model_config, bos, eos, pad, model_type)
    hf_state = to_hf_state(state, model_config)
    atomic_write_json(folder / "config.json", config)
    atomic_write_bytes(folder / WEIGHTS_FILE, safetensors.numpy.save(hf_state, metadata={"format": "pt"}))
    tokenizer.save(folder)
    generation = {k: v for k, v in (("bos_token_id", bos), ("eos_token_id", eos), ("pad_token_id", pad))
                  if v is not None}
    atomic_write_json(folder / "generation_config.json", generation)
    return folder
