"""Which GPT-2 folders are pretrained bases: those that bring their own tokenizer.

A `model.init_from` of `type: minigpt` names either minitrain's own MiniGPT (a run, a model file, an export with
minitrain's character vocabulary: fine-tuned on characters, as in the course), or a GPT-2 someone pretrained with
its own tokenizer (a byte-level BPE: merges.txt, a BPE tokenizer.json, or a vocab.json that is a token -> id
table). The second is a pretrained base like a Llama one: its embedding rows mean its tokens, so it trains on text
records encoded with that tokenizer, never on character ids (minitrain/hub/pretrained.py reads it).

    own_tokenizer(folder)   the file that shows a folder's tokenizer is not minitrain's characters, or None
    is_gpt2_base(spec)      a Hugging Face folder or Hub repo with a GPT-2 config.json and its own tokenizer
    hub_file_cache_first(repo_id, name)   a repo's file, from the cache when it holds it
"""

from __future__ import annotations

import functools
from pathlib import Path

from minitrain.common.hub_id import names_hub_repo
from minitrain.common.io import read_json_object
from minitrain.data.tokenizer import VOCAB_FORMAT

TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt")  # what tells the two kinds of folder apart


def own_tokenizer(folder: Path) -> str | None:
    """The file that says a GPT-2 folder's weights were trained on another tokenizer than minitrain's characters
    (None for minitrain's own exports, and for a folder with no tokenizer at all)."""
    if (folder / "merges.txt").is_file():
        return "merges.txt, the merges of a byte-level BPE"
    tokenizer = folder / "tokenizer.json"
    if tokenizer.is_file():
        model = read_json_object(tokenizer, "tokenizer").get("model")
        kind = model.get("type") if isinstance(model, dict) else None
        if kind != "WordLevel":  # minitrain writes its characters as a WordLevel tokenizer (formats/hf_tokenizer.py)
            return f"tokenizer.json, a {kind or 'BPE'} tokenizer"
    vocab = folder / "vocab.json"
    if vocab.is_file() and read_json_object(vocab, "vocabulary", limit=None).get("format") != VOCAB_FORMAT:
        return "vocab.json, a token -> id table (not minitrain's character vocabulary)"
    return None


def is_gpt2_base(spec: str) -> bool:
    """A folder, or a Hub repo (its config.json and tokenizer files fetched into the Hugging Face cache), holding a
    GPT-2 config.json and its own tokenizer. A repo that cannot be fetched is not one: reading it as a source then
    says why."""
    path = Path(spec)
    if path.is_dir():
        return _is_base_folder(path)
    if not names_hub_repo(spec) or spec.endswith((".safetensors", ".json", ".gguf")):
        return False
    return _is_base_repo(spec)


def _is_base_folder(folder: Path) -> bool:
    config = folder / "config.json"
    return (config.is_file() and read_json_object(config, "model config").get("model_type") == "gpt2"
            and own_tokenizer(folder) is not None)


@functools.lru_cache(maxsize=8)  # a config is validated several times
def _is_base_repo(repo_id: str) -> bool:
    import httpx2  # here, not at the top: every config load imports this module; the Hub client takes ~0.4 s
    from huggingface_hub.errors import HFValidationError, RepositoryNotFoundError

    try:
        config = hub_file_cache_first(repo_id, "config.json")
        if config is None or read_json_object(config, "model config").get("model_type") != "gpt2":
            return False  # a Llama base, say: its tokenizer files need not be fetched to know
        for name in TOKENIZER_FILES:
            hub_file_cache_first(repo_id, name)
    except (RepositoryNotFoundError, HFValidationError, httpx2.HTTPError, OSError):
        # not reachable, no such repo: not a base; reading it as a source reports why
        return False
    return _is_base_folder(config.parent)


def hub_file_cache_first(repo_id: str, name: str) -> Path | None:
    """A repo's file from the Hugging Face cache when it is there, else downloaded into it; None when the repo has
    no such file. For questions a cached copy answers as well as a fresh one (which family a repo holds, asked
    when a config is validated): offline, a download first waits out the client's connection timeouts (about
    23 s) before it falls back to the cache. Loading a model downloads first, so a newer upload is seen."""
    from huggingface_hub import _CACHED_NO_EXIST, hf_hub_download, try_to_load_from_cache
    from huggingface_hub.errors import EntryNotFoundError

    cached = try_to_load_from_cache(repo_id, name)
    if isinstance(cached, str):
        return Path(cached)
    if cached is _CACHED_NO_EXIST:
        return None
    try:
        return Path(hf_hub_download(repo_id, name))
    except EntryNotFoundError:
        return None
