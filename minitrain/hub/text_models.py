"""A language model and its own tokenizer from any place a user has one: what `minitrain eval` scores.

    load_text_model(spec) -> TextModel(model, tokenizer, kind, where)

    spec                                   kind         tokenizer
    base.gguf                              pretrained   the GGUF metadata's (minitrain/hub/pretrained.py)
    minigpt.gguf (gpt2 layout, exported)   minitrain    its character vocabulary (formats/gguf_gpt2.py; a GPT-2
                                                        base's BPE: pretrained)
    ./SmolLM2/ (config.json of a llama,    pretrained   tokenizer.json (+ tokenizer_config.json)
        qwen2 or mistral model)
    ./gpt2/ (a GPT-2 with its own BPE)     pretrained   tokenizer.json, or vocab.json + merges.txt
    user/name (a Hub repo of such a model) pretrained   the same files, from the Hugging Face cache
    a run folder, model file, export       minitrain    the run's own: RUN/tokenizer/ when it was trained from a
        folder or Hub export of minitrain               pretrained base, else the character vocabulary (also read
                                                        from a character Llama's or Gemma's GGUF or export)

The model is built from the source's config and its weights loaded (a LoRA run's adapters merged into its base),
in float32, and never trained here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from minitrain.common.errors import UserError
from minitrain.common.io import read_json_object
from minitrain.data.gpt2_base import hub_file_cache_first, is_gpt2_base
from minitrain.data.tokenizer import CharTokenizer
from minitrain.formats.gguf_gpt2 import gpt2_tokenizer, read_gpt2_gguf
from minitrain.formats.gguf_read import gguf_architecture
from minitrain.formats.hf_config import MODEL_TYPES
from minitrain.formats.hf_tokenizer import char_tokenizer_of
from minitrain.hub.hub_errors import hub_download_errors
from minitrain.hub.pretrained import is_gguf, load_pretrained_base
from minitrain.hub.pretrained_runs import TOKENIZER_DIR as RUN_TOKENIZER_DIR
from minitrain.hub.pretrained_runs import run_model
from minitrain.hub.sources import built, is_hub_id, load_model
from minitrain.nn import Module


class TextModel(NamedTuple):
    model: Module
    tokenizer: Any  # PretrainedTokenizer or CharTokenizer
    kind: str  # "pretrained" (a base read as it is) or "minitrain" (a run, model file or export)
    where: str


def is_pretrained_base(spec: str) -> bool:
    """A .gguf file, or a Hugging Face folder or Hub repo whose config.json is a Llama-family model, or a GPT-2
    with its own tokenizer (minitrain/data/gpt2_base.py)."""
    if (is_gguf(spec) and Path(spec).is_file()) or is_gpt2_base(spec):
        return True
    config = Path(spec) / "config.json"
    if Path(spec).is_dir():
        return config.is_file() and _model_type(config) in MODEL_TYPES
    if not is_hub_id(spec):
        return False
    with hub_download_errors(spec, "config.json"):  # no such repo, the Hub out of reach: one error, exit 5
        config = hub_file_cache_first(spec, "config.json")  # None: no such file, or offline and not cached
        return config is not None and _model_type(config) in MODEL_TYPES  # if not, load_model says why


def is_text_source(source: str | Path) -> bool:
    """A pretrained base, or a run that fine-tuned one (it keeps the base's tokenizer in RUN/tokenizer/)."""
    return is_pretrained_base(str(source)) or (Path(source) / RUN_TOKENIZER_DIR / "tokenizer.json").is_file()


def _model_type(config: Path) -> Any:
    return read_json_object(config, "model config").get("model_type")


def load_text_model(spec: str, vocab_path: str | None = None) -> TextModel:
    """The model `spec` names with its own tokenizer (module docstring); `vocab_path` is the character vocabulary
    of a minitrain model file that does not record it."""
    if is_gguf(spec) and Path(spec).is_file() and gguf_architecture(spec) == "gpt2":  # MiniGPT, exported
        model_config, state, fields = read_gpt2_gguf(spec)
        tokenizer = gpt2_tokenizer(fields)
        kind = "minitrain" if isinstance(tokenizer, CharTokenizer) else "pretrained"
        return TextModel(built(model_config, state, spec), tokenizer, kind, spec)
    if is_pretrained_base(spec):
        model_config, state, tokenizer, facts = load_pretrained_base(spec)
        chars = char_tokenizer_of(tokenizer)  # a character Llama or Gemma: its GGUF or Hugging Face export
        return TextModel(built(model_config, state, facts.get("path", spec)), chars or tokenizer,
                         "pretrained" if chars is None else "minitrain", spec)
    if (Path(spec) / RUN_TOKENIZER_DIR).is_dir():  # a run on a pretrained base: the base, then its training
        model, tokenizer = run_model(spec)
        return TextModel(model, tokenizer, "minitrain", spec)
    model, vocab = load_model(spec)
    vocab = vocab_path or vocab
    if vocab is None:
        raise UserError(f"{spec}: the source does not say which tokenizer it was trained with (no "
                        f"{RUN_TOKENIZER_DIR}/ folder, no vocabulary recorded); pass its vocab.json", 2)
    return TextModel(model, CharTokenizer.load(vocab), "minitrain", spec)
