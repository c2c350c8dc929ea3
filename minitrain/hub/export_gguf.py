"""`minitrain export SOURCE OUT.gguf --format gguf [--dtype f32|f16|q8_0|q4_0|q5_k|q4_k_m]`: any model minitrain
reads, as one GGUF file that llama.cpp (and so Ollama, LM Studio) loads.

    source                                         model                       tokenizer written
    a run folder, model file or export of a        MiniGPT -> gpt2 layout      the character vocabulary, spelled
        character model (a LoRA run: merged)                                   as byte-level BPE (formats/gguf_vocab.py)
    a run on a pretrained base (RUN/tokenizer/)    its family (LoRA: merged)   the base's BPE
    a character Llama's Hugging Face export        llama                       its character vocabulary, as above
    a Llama-family or GPT-2 base: .gguf, Hugging   llama / qwen2 / gpt2        the base's BPE (a .gguf's own
        Face folder or Hub id                                                  tokenizer fields, as they were)
    a gpt2 GGUF minitrain wrote                    gpt2                        its own fields, as they were

A GGUF is a whole model: llama.cpp loads no minitrain adapter, so a LoRA run is written with its adapters merged
into its base (W + (α/r)·A·B, as `minitrain merge-adapters` folds them). The tensors are written from the state dict the
source gives, in the family's parameter order (`parameter_shapes`); no model is built (the adapters are folded
with NumPy, `lora.merged_state`). What the format, or llama.cpp, cannot hold is
refused with the reason, exit code 2: another model family than MiniGPT and the Llama family (a table model, the
MLP language model), a MiniGPT with attention scale 1 (llama.cpp's gpt2 always divides by √(head size)), Llama 3
RoPE scaling, a tokenizer that is not a byte-level BPE.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.data.tokenizer import CharTokenizer
from minitrain.formats.gguf_vocab import bpe_fields, char_fields
from minitrain.formats.gguf_write import write_gguf_model
from minitrain.formats.hf_tokenizer import char_tokenizer_of
from minitrain.models.registry import model_type, parameter_shapes, refusal


class GGUFSource(NamedTuple):
    model_config: dict[str, Any]
    state: dict[str, np.ndarray]
    fields: dict[str, Any]  # the tokenizer.* fields (formats/gguf_vocab.py)
    name: str  # general.name


def check_gguf_family(model_config: dict[str, Any], source: str) -> None:
    """UserError unless llama.cpp has a layout for the model (module docstring)."""
    if why := refusal(model_type(model_config), "gguf"):
        raise UserError(f"export --format gguf {source}: {why}", BAD_INPUT)
    if model_config.get("attn_scale") is not None:
        raise UserError(f"export --format gguf {source}: attn_scale {model_config['attn_scale']:g}: llama.cpp's "
                        "gpt2 scales attention by 1/sqrt(head size) only", BAD_INPUT)


def _gguf_file(path: Path) -> GGUFSource:
    from minitrain.formats.gguf_gpt2 import read_gpt2_gguf
    from minitrain.formats.gguf_read import gguf_architecture, read_gguf
    from minitrain.hub.pretrained import load_pretrained_base

    if gguf_architecture(path) == "gpt2":
        model_config, state, fields = read_gpt2_gguf(path)
    else:
        model_config, state, _, _ = load_pretrained_base(path)
        fields = read_gguf(path, with_tensors=False).tokenizer
    fields.pop("where", None)
    return GGUFSource(model_config, state, fields, path.stem)


def gguf_source(source: str, vocab_path: str | None = None, base_model: str | None = None) -> GGUFSource:
    """The model, state and tokenizer fields of any source (module docstring), checked to fit a GGUF."""
    from minitrain.hub.export_text import text_state
    from minitrain.hub.pretrained import is_gguf
    from minitrain.hub.sources import load_pretrained
    from minitrain.hub.text_models import is_text_source

    name = Path(source).name or source
    if is_gguf(source) and Path(source).is_file():
        found = _gguf_file(Path(source))
    elif is_text_source(source):  # a pretrained base, or a run on one: the base's own tokenizer
        model_config, state, tokenizer = text_state(source)
        chars = char_tokenizer_of(tokenizer)  # a character Llama's Hugging Face export: its vocabulary again
        fields = (char_fields if chars else bpe_fields)(chars or tokenizer, int(model_config["vocab_size"]))
        found = GGUFSource(model_config, state, fields, name)
    else:  # a character model: a run folder, model file or export (a LoRA run merged by load_pretrained)
        pretrained = load_pretrained(source, base_model)
        model_config = pretrained.model_config
        check_gguf_family(model_config, source)  # before asking for a vocabulary a table model has not
        vocab = vocab_path or pretrained.vocab_path
        if vocab is None:
            raise UserError(f"export --format gguf {source}: the source does not record its vocabulary; pass it "
                            "with --vocab", BAD_INPUT)
        fields = char_fields(CharTokenizer.load(vocab), int(model_config["vocab_size"]))
        found = GGUFSource(model_config, pretrained.state, fields, name)
    check_gguf_family(found.model_config, source)
    return found._replace(state=in_model_order(found.state, found.model_config))


def in_model_order(state: dict[str, np.ndarray], model_config: dict[str, Any]) -> dict[str, np.ndarray]:
    """`state` in the order the family lists its parameters, the order a built model's state dict has (a file's
    order is the safetensors reader's, which varies): the tensors of a GGUF are written in this order."""
    return {name: state[name] for name, _ in parameter_shapes(model_config)}


def export_gguf(source: str | Path, out: str | Path, dtype: str = "f32", vocab_path: str | None = None,
                base_model: str | None = None) -> tuple[Path, dict[str, int]]:
    """Write `source` as the GGUF `out`; return its path and how many tensors of each GGML type it holds."""
    out = Path(out)
    if out.is_dir():
        raise UserError(f"export --format gguf: {out} is a folder; a GGUF export is one file (OUT.gguf)", BAD_INPUT)
    found = gguf_source(str(source), vocab_path, base_model)
    kinds = write_gguf_model(out, found.model_config, found.state, found.fields, dtype, found.name)
    return out, kinds


def gguf_after_training(run_dir: str | Path, results: dict[str, Any], dtype: str) -> Path | None:
    """`output.model_format: gguf`: a finished run's final model also as a GGUF, the model file's path with the
    suffix .gguf; None (nothing written) when the run has no final model (it did not finish, or cross-validated)."""
    from minitrain.runs.run_files import FINISHED

    model_path = results.get("model_path")
    if results.get("status") not in FINISHED or not isinstance(model_path, str):
        return None
    path, _ = export_gguf(run_dir, Path(model_path).with_suffix(".gguf"), dtype)
    return path
