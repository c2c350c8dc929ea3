"""A GGUF file (llama.cpp's format) as a Hugging Face config, an HF-layout float32 state dict and tokenizer fields.

A GGUF holds everything in one file: key/value metadata (the architecture under `llama.*`, the tokenizer under
`tokenizer.*`) and the tensors, often quantized in blocks (Q8_0, Q4_1, ...). The `gguf` package (the llama.cpp
project's own reader) parses it and `gguf.quants.dequantize` turns its block formats (Q4_0 ... Q8_0, the K-quants
Q2_K ... Q6_K, the IQ types, F16, BF16: `readable_types()` asks the installed package) back into float32; a file
holding a tensor of another type is refused from its header, before any tensor is read.

Each architecture is a `GGUFLayout` record (formats/gguf_layouts.py: llama, qwen2, gemma2, gemma3): its metadata
as a transformers config dict (`gguf_hf_config`), its tensors under HF names (`gguf_hf_state`). What this module
undoes, exactly as transformers' GGUF loader does (`modeling_gguf_pytorch_utils.py`):

- names: llama.cpp's short names back to Hugging Face's
      token_embd.weight            model.embed_tokens.weight
      blk.N.attn_norm.weight       model.layers.N.input_layernorm.weight
      blk.N.attn_{q,k,v}.weight    model.layers.N.self_attn.{q,k,v}_proj.weight (+ .bias: Qwen2)
      blk.N.attn_output.weight     model.layers.N.self_attn.o_proj.weight
      blk.N.ffn_norm.weight        model.layers.N.post_attention_layernorm.weight
      blk.N.ffn_{gate,up,down}     model.layers.N.mlp.{gate,up,down}_proj.weight
      output_norm.weight           model.norm.weight
      output.weight                lm_head.weight (absent: the head is tied to the embedding)
  and Gemma's own (gguf_layouts.py): ffn_norm is pre_feedforward_layernorm there, post_attention_norm and
  post_ffw_norm the norms after attention and MLP, attn_{q,k}_norm Gemma 3's self_attn.{q,k}_norm.
- Gemma's norms: stored as 1 + w (its RMSNorm computes x·(1 + w)); 1 is subtracted.
- shapes: GGUF lists a tensor's dimensions fastest-first (ne0 = columns), so [in, out] there is NumPy's
  (out, in), the HF layout; the reader's arrays are already row-major (out, in) and are checked against it.
- RoPE: llama.cpp rotates interleaved pairs (x0, x1), (x2, x3)...; HF rotates halves (x_i, x_{i+d/2}). Its
  converter therefore permutes the rows of q_proj and k_proj of a `llama` model, per head:
      permute:   w.reshape(H, 2, d/2, in).swapaxes(1, 2).reshape(out, in)
  and the loader applies the inverse, w.reshape(H, d/2, 2, in).swapaxes(1, 2) (H = the heads of that
  projection: n_head for q, n_kv_head for k). Qwen2's converter does not permute, so nothing is undone there.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.common.io import read_json_object
from minitrain.formats.gguf_layouts import GGUF_LAYOUTS, GLOBAL_NAMES, GGUFLayout
from minitrain.formats.hf_config import check_hf_state, from_hf_config

_BLOCK = re.compile(r"blk\.(\d+)\.(.+)")


def hf_name(name: str, layout: GGUFLayout = GGUF_LAYOUTS["llama"]) -> str | None:
    """The Hugging Face name of a GGUF tensor name in `layout` (None: not a tensor of that layout)."""
    if name in GLOBAL_NAMES:
        return GLOBAL_NAMES[name]
    match = _BLOCK.fullmatch(name)
    if match and match[2] in layout.layer_names:
        return f"model.layers.{match[1]}.{layout.layer_names[match[2]]}"
    return None


def gguf_name(hf: str, layout: GGUFLayout = GGUF_LAYOUTS["llama"]) -> str:
    """The llama.cpp name of a Hugging Face tensor name in `layout` (the inverse of `hf_name`)."""
    for short, long in GLOBAL_NAMES.items():
        if hf == long:
            return short
    match = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", hf)
    short = {long: short for short, long in layout.layer_names.items()}.get(match[2]) if match else None
    if short is None:
        raise UserError(f"export: tensor {hf} has no llama.cpp name in its {layout.name} layout", 2)
    return f"blk.{match[1]}.{short}"


def permute_rope_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's q/k row permutation (HF's rotate-half layout -> interleaved RoPE pairs); w is (out, ...).
    `unpermute_rope_rows(permute_rope_rows(w, H), H)` is `w` exactly: a reshape and a swap, no arithmetic."""
    half = w.shape[0] // n_heads // 2
    return w.reshape(n_heads, 2, half, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_rope_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's q/k row permutation (interleaved RoPE pairs -> HF's rotate-half layout); w is (out, ...)."""
    half = w.shape[0] // n_heads // 2
    return w.reshape(n_heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def float32_value(value: float) -> float:
    """A GGUF float32 as the decimal its writer meant: 1e-05, not 9.999999747378752e-06."""
    return float(str(np.float32(value)))


class GGUFContents:
    """What a GGUF holds, in Hugging Face terms: `config` (a config.json dict), `state` (HF names and layout,
    float32), `tokenizer` (the `PretrainedTokenizer.from_gguf_fields` keyword arguments), `facts` (for reports)."""

    def __init__(self, config: dict[str, Any], state: dict[str, np.ndarray], tokenizer: dict[str, Any],
                 facts: dict[str, Any]) -> None:
        self.config, self.state, self.tokenizer, self.facts = config, state, tokenizer, facts


def open_gguf(path: Path):
    """A `gguf.GGUFReader` of `path`, parsed once per file state (a run checks its base, then loads it); UserError
    when it is no GGUF."""
    stat = path.stat() if path.is_file() else None
    return _open_gguf(path, stat and (stat.st_ino, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=4)
def _open_gguf(path: Path, _stamp: tuple[int, int, int] | None):
    import gguf  # imported here: only a GGUF source needs it

    try:
        return gguf.GGUFReader(path)
    except (OSError, ValueError, KeyError, IndexError) as e:
        raise UserError(f"{path}: not a readable GGUF file ({type(e).__name__}: {e})", 2) from None


def field_value(reader, key: str, default: Any = None) -> Any:
    """The value of metadata `key` (a string, number or list), `default` when the file lacks it; UserError when
    it cannot be decoded (a string that is not UTF-8)."""
    f = reader.fields.get(key)
    try:
        return default if f is None else f.contents()
    except (UnicodeDecodeError, ValueError, IndexError) as e:
        raise UserError(f"{reader.data.filename}: GGUF metadata {key} cannot be read ({type(e).__name__})", 2) from None


def _refused(path: Path, key: str, value: Any, why: str) -> UserError:
    return UserError(f"{path}: GGUF metadata {key} = {value!r:.80}: {why}", 2)


def needed(reader, path: Path, key: str) -> Any:
    """The value of metadata `key`; UserError naming the file when it lacks it."""
    value = field_value(reader, key)
    if value is None:
        raise UserError(f"{path}: the GGUF lacks {key}", 2)
    return value


def count_of(reader, path: Path, key: str, default: Any = None, minimum: int = 1) -> Any:
    """A positive integer (`minimum` and up) under metadata `key`; the GGUF lacking it is refused unless `default`."""
    value = needed(reader, path, key) if default is None else field_value(reader, key, default)
    if value is not default and not (type(value) is int and value >= minimum):
        raise _refused(path, key, value, f"must be an integer >= {minimum}")
    return value


def real_of(reader, path: Path, key: str, default: float | None = None) -> float:
    """A positive finite number under metadata `key`, as the decimal its writer meant (float32: a float64 field
    past float32's range would become inf)."""
    value = needed(reader, path, key) if default is None else field_value(reader, key, default)
    if type(value) not in (int, float) or not 0 < value <= float(np.finfo(np.float32).max):
        raise _refused(path, key, value, "must be a positive finite number")
    return float32_value(value)


def tokenizer_fields(reader, path: Path) -> dict[str, Any]:
    """The `tokenizer.*` metadata as `PretrainedTokenizer.from_gguf_fields`' keyword arguments."""
    def field(key: str, kind: type, default: Any = None) -> Any:
        """The value of `key`, refused unless it is `default` or a `kind` (a list: a list of `kind`s)."""
        value = field_value(reader, f"tokenizer.{key}", default)
        fits = (isinstance(value, list) and all(type(v) is kind for v in value)) if isinstance(default, list) else (
            type(value) is kind and (kind is not int or value >= 0))
        if value is not default and not fits:
            what = f"a list of {kind.__name__}" if isinstance(default, list) else f"a {kind.__name__}"
            raise _refused(path, f"tokenizer.{key}", value, f"must be {what}" + (" >= 0" if kind is int else ""))
        return value

    ids = {name: field(f"ggml.{key}_token_id", int) for name, key in
           (("bos_id", "bos"), ("eos_id", "eos"), ("pad_id", "padding"), ("unk_id", "unknown"))}
    return {
        "tokens": field("ggml.tokens", str, []), "merges": field("ggml.merges", str, []),
        "scores": field("ggml.scores", float, []),
        "token_types": field("ggml.token_type", int, []), **ids,
        "chat_template": field("chat_template", str),
        "model": field("ggml.model", str), "pre": field("ggml.pre", str),
        "add_bos": field("ggml.add_bos_token", bool), "add_eos": field("ggml.add_eos_token", bool, False),
        "add_space_prefix": field("ggml.add_space_prefix", bool), "where": f"{path} (tokenizer)",
    }


def gguf_architecture(path: str | Path) -> Any:
    """general.architecture of a GGUF file (None when it lacks the key)."""
    return field_value(open_gguf(Path(path)), "general.architecture")


def base_model_type(spec: str | Path) -> Any:
    """The Hugging Face model_type of a base, no weight read: a .gguf file's general.architecture as its layout
    names it (llama, qwen2, gemma3 -> gemma3_text; gpt2 as is), a folder's config.json model_type; None for another
    source (a model file, a run folder); UserError when the file cannot be read."""
    path = Path(spec)
    if path.suffix.lower() == ".gguf":
        arch = gguf_architecture(path)
        return GGUF_LAYOUTS[arch].model_type if arch in GGUF_LAYOUTS else arch
    return read_json_object(path / "config.json", "model config").get("model_type") if (
        path / "config.json").is_file() else None


@functools.cache
def readable_types() -> frozenset[str]:
    """The tensor types the installed gguf package dequantizes, found by asking it: each type's one block of zero
    bytes through `gguf.quants.dequantize` (NotImplementedError: not readable; Q8_1, Q8_K, I8..I64, F64 in 0.19)."""
    import gguf
    from gguf.quants import dequantize

    readable = set()
    for kind in gguf.GGMLQuantizationType:
        try:
            dequantize(np.zeros((1, gguf.GGML_QUANT_SIZES[kind][1]), np.uint8), kind)
            readable.add(kind.name)
        except (NotImplementedError, KeyError):
            pass
    return frozenset(readable)


def check_types(reader, path: Path) -> None:
    """UserError naming the first tensor whose type the gguf package cannot dequantize: the header lists every
    tensor's type, so a file is refused before any tensor is read."""
    for t in reader.tensors:
        if t.tensor_type.name not in readable_types():
            raise UserError(f"{path}: tensor {t.name} is stored as {t.tensor_type.name}, a type the gguf package "
                            f"cannot dequantize (it reads {', '.join(sorted(readable_types()))}); convert the file "
                            "to one of those first", 2)


def dequantized(path: Path, tensor) -> np.ndarray:
    """A reader tensor as float32 in NumPy's row-major (out, in) shape: GGUF lists dimensions fastest-first. Its
    type was checked by `check_types`."""
    from gguf.quants import dequantize

    w = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
    expected = tuple(int(n) for n in reversed(tensor.shape))
    if w.size != int(np.prod(expected)):
        raise UserError(f"{path}: tensor {tensor.name} holds {w.size} values, its shape {list(tensor.shape)} needs "
                        f"{int(np.prod(expected))}", 2)
    return w.reshape(expected)


class Metadata:
    """The `<arch>.*` metadata of one GGUF, checked as it is read: `count` a positive integer, `real` a positive
    finite number (`count_of`, `real_of`), `field` anything, `has` whether the file holds the key."""

    def __init__(self, reader, path: Path, arch: str) -> None:
        self.reader, self.path, self.arch = reader, path, arch

    def count(self, key: str, default: Any = None, minimum: int = 1) -> Any:
        return count_of(self.reader, self.path, f"{self.arch}.{key}", default, minimum)

    def real(self, key: str, default: float | None = None) -> float:
        return real_of(self.reader, self.path, f"{self.arch}.{key}", default)

    def field(self, key: str, default: Any = None) -> Any:
        return field_value(self.reader, f"{self.arch}.{key}", default)

    def has(self, key: str) -> bool:
        return f"{self.arch}.{key}" in self.reader.fields


def gguf_hf_config(reader, path: Path) -> tuple[GGUFLayout, dict[str, Any], dict[str, Any]]:
    """(layout, transformers config dict, tokenizer fields) from the metadata alone, in transformers' key names for
    the layout's model_type; UserError for an architecture without a record, RoPE scaling the layout does not map,
    a tensor type the gguf package cannot read. No tensor is read."""
    arch = field_value(reader, "general.architecture")
    if not isinstance(arch, str) or arch not in GGUF_LAYOUTS:
        raise UserError(f"{path}: general.architecture = {arch!r}: minitrain reads {', '.join(GGUF_LAYOUTS)} GGUF "
                        "files as a pretrained base (a gpt2 GGUF that minitrain exported is read by sample, eval and "
                        "export)", 2)
    layout, meta = GGUF_LAYOUTS[arch], Metadata(reader, path, arch)
    scaling = meta.field("rope.scaling.type", "none")
    freqs = any(t.name == "rope_freqs.weight" for t in reader.tensors)
    if scaling not in ("none", None, *layout.rope_scalings) or freqs:
        raise UserError(f"{path}: a GGUF with RoPE scaling ({arch}.rope.scaling.type = {scaling!r} or a "
                        "rope_freqs tensor) is not read: use the model's Hugging Face folder, whose config.json "
                        "states the scaling", 2)
    check_types(reader, path)
    n_head = meta.count("attention.head_count")
    tokenizer = tokenizer_fields(reader, path)
    config: dict[str, Any] = {
        "model_type": layout.model_type,
        "num_hidden_layers": meta.count("block_count"),
        "hidden_size": meta.count("embedding_length"),
        "intermediate_size": meta.count("feed_forward_length"),
        "num_attention_heads": n_head,
        "num_key_value_heads": meta.count("attention.head_count_kv", 0, 0) or n_head,
        "max_position_embeddings": meta.count("context_length"),
        "rms_norm_eps": meta.real("attention.layer_norm_rms_epsilon"),
        "rope_theta": meta.real("rope.freq_base", 10000.0),
        "vocab_size": meta.count("vocab_size", 0, 0) or len(tokenizer["tokens"]),
        "tie_word_embeddings": all(t.name != "output.weight" for t in reader.tensors),
        **{f"{key}_token_id": tokenizer[f"{key}_id"] for key in ("bos", "eos", "pad")},
    }
    config.update(layout.hf_keys(meta, config))
    if scaling not in ("none", None):
        config["rope_scaling"] = {"rope_type": scaling, "factor": meta.real("rope.scaling.factor")}
    return layout, config, tokenizer


def gguf_hf_state(reader, path: Path, layout: GGUFLayout, config: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every tensor dequantized to float32 under its Hugging Face name, with what the converter did undone: q/k
    rows un-permuted (`rope_permuted`), `norm_offset` taken off each norm weight (module docstrings)."""
    state: dict[str, np.ndarray] = {}
    for t, name in hf_names(reader, path, layout):
        w = dequantized(path, t)
        if layout.rope_permuted and name.endswith(("q_proj.weight", "k_proj.weight")):
            w = unpermute_rope_rows(w, config["num_attention_heads" if "q_proj" in name else "num_key_value_heads"])
        if layout.norm_offset and name.endswith("norm.weight"):
            w = w - np.float32(layout.norm_offset)
        state[name] = np.ascontiguousarray(w)
    return state


def hf_names(reader, path: Path, layout: GGUFLayout) -> list[tuple[Any, str]]:
    """(reader tensor, its Hugging Face name) for every tensor of the file; UserError for one the layout lacks."""
    named = [(t, hf_name(t.name, layout)) for t in reader.tensors]
    for t, name in named:
        if name is None:
            raise UserError(f"{path}: tensor {t.name} is not part of a {layout.name} model minitrain can build", 2)
    return named


def _check_shapes(reader, path: Path, layout: GGUFLayout, config: dict[str, Any]) -> None:
    """UserError unless the metadata makes a model minitrain builds and the tensors listed fit it: checked before
    any tensor is read, so no crafted head count or block count reaches the arrays."""
    model, _ = from_hf_config(config, f"{path} (GGUF metadata)")
    listed = {name: np.broadcast_to(np.float32(0), tuple(int(n) for n in reversed(t.shape)))  # no bytes
              for t, name in hf_names(reader, path, layout)}
    check_hf_state(listed, model, str(path))


def read_gguf(path: str | Path, with_tensors: bool = True) -> GGUFContents:
    """Read and dequantize a GGUF of a layout in GGUF_LAYOUTS (the module docstring): its metadata converted and
    checked against the model minitrain builds from it before any tensor is read; UserError for anything else."""
    path = Path(path)
    reader = open_gguf(path)
    layout, config, tokenizer = gguf_hf_config(reader, path)
    _check_shapes(reader, path, layout, config)
    facts = {"gguf_architecture": layout.name, "gguf_name": field_value(reader, "general.name"),
             "tensor_types": sorted({t.tensor_type.name for t in reader.tensors}),
             "file_type": field_value(reader, "general.file_type")}
    state = gguf_hf_state(reader, path, layout, config) if with_tensors else {}
    return GGUFContents(config, state, tokenizer, facts)
