"""A GGUF file (llama.cpp's format) as a Hugging Face config, an HF-layout float32 state dict and tokenizer fields.

A GGUF holds everything in one file: key/value metadata (the architecture under `llama.*`, the tokenizer under
`tokenizer.*`) and the tensors, often quantized in blocks (Q8_0, Q4_1, ...). The `gguf` package (the llama.cpp
project's own reader) parses it and `gguf.quants.dequantize` turns any block format back into float32.

What this module undoes, exactly as transformers' GGUF loader does (`modeling_gguf_pytorch_utils.py`):

- names: llama.cpp's short names back to Hugging Face's
      token_embd.weight            model.embed_tokens.weight
      blk.N.attn_norm.weight       model.layers.N.input_layernorm.weight
      blk.N.attn_{q,k,v}.weight    model.layers.N.self_attn.{q,k,v}_proj.weight (+ .bias: Qwen2)
      blk.N.attn_output.weight     model.layers.N.self_attn.o_proj.weight
      blk.N.ffn_norm.weight        model.layers.N.post_attention_layernorm.weight
      blk.N.ffn_{gate,up,down}     model.layers.N.mlp.{gate,up,down}_proj.weight
      output_norm.weight           model.norm.weight
      output.weight                lm_head.weight (absent: the head is tied to the embedding)
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
from minitrain.formats.hf_config import check_hf_state, from_hf_config

ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2"}  # general.architecture -> HF model_type
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.weight": "self_attn.k_proj.weight", "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                 "output.weight": "lm_head.weight"}
_BLOCK = re.compile(r"blk\.(\d+)\.(.+)")


def hf_name(name: str) -> str | None:
    """The Hugging Face name of a GGUF tensor name (None: not a tensor of the Llama family)."""
    if name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[name]
    match = _BLOCK.fullmatch(name)
    if match and match[2] in _LAYER_NAMES:
        return f"model.layers.{match[1]}.{_LAYER_NAMES[match[2]]}"
    return None


def gguf_name(hf: str) -> str:
    """The llama.cpp name of a Hugging Face Llama-family tensor name (the inverse of `hf_name`)."""
    for short, long in _GLOBAL_NAMES.items():
        if hf == long:
            return short
    match = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", hf)
    short = {long: short for short, long in _LAYER_NAMES.items()}.get(match[2]) if match else None
    if short is None:
        raise UserError(f"export: tensor {hf} has no llama.cpp name", 2)
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
    """The Hugging Face model_type of a base, no weight read: a .gguf file's general.architecture (llama, qwen2,
    gpt2), a folder's config.json model_type; None for another source (a model file, a run folder); UserError
    when the file cannot be read."""
    path = Path(spec)
    if path.suffix.lower() == ".gguf":
        return gguf_architecture(path)
    return read_json_object(path / "config.json", "model config").get("model_type") if (
        path / "config.json").is_file() else None


def dequantized(path: Path, tensor) -> np.ndarray:
    """A reader tensor as float32 in NumPy's row-major (out, in) shape: GGUF lists dimensions fastest-first."""
    from gguf.quants import dequantize

    try:
        w = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
    except NotImplementedError:  # the gguf package reads every llama.cpp weight format but a few
        raise UserError(f"{path}: tensor {tensor.name} is stored as {tensor.tensor_type.name}, a type the gguf "
                        "package cannot dequantize; convert the file to F16, Q8_0 or Q4_K first", 2) from None
    expected = tuple(int(n) for n in reversed(tensor.shape))
    if w.size != int(np.prod(expected)):
        raise UserError(f"{path}: tensor {tensor.name} holds {w.size} values, its shape {list(tensor.shape)} needs "
                        f"{int(np.prod(expected))}", 2)
    return w.reshape(expected)


def _check_shapes(reader, path: Path, arch: str, config: dict[str, Any]) -> None:
    """UserError unless the metadata makes a model minitrain builds and the tensors listed fit it: checked before
    any tensor is read, so no crafted head count or block count reaches the arrays."""
    model, _ = from_hf_config(config, f"{path} (GGUF metadata)")
    listed = {}
    for t in reader.tensors:
        name = hf_name(t.name)
        if name is None:
            raise UserError(f"{path}: tensor {t.name} is not part of a {arch} model minitrain can build", 2)
        listed[name] = np.broadcast_to(np.float32(0), tuple(int(n) for n in reversed(t.shape)))  # no bytes
    check_hf_state(listed, model, str(path))


def read_gguf(path: str | Path, with_tensors: bool = True) -> GGUFContents:
    """Read and dequantize a Llama or Qwen2 GGUF (see the module docstring); UserError for anything else."""
    path = Path(path)
    reader = open_gguf(path)

    def field(key: str, default: Any = None) -> Any:
        return field_value(reader, key, default)

    arch = field("general.architecture")
    if not isinstance(arch, str) or arch not in ARCHITECTURES:
        raise UserError(f"{path}: general.architecture = {arch!r}: minitrain reads llama and qwen2 GGUF files as "
                        "a pretrained base (a gpt2 GGUF that minitrain exported is read by sample, eval and "
                        "export)", 2)

    def count(key: str, default: Any = None, minimum: int = 1) -> Any:
        return count_of(reader, path, f"{arch}.{key}", default, minimum)

    def real(key: str, default: float | None = None) -> float:
        return real_of(reader, path, f"{arch}.{key}", default)

    scaling = field(f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", None) or any(t.name == "rope_freqs.weight" for t in reader.tensors):
        raise UserError(f"{path}: a GGUF with RoPE scaling ({arch}.rope.scaling.type = {scaling!r} or a "
                        "rope_freqs tensor) is not read: use the model's Hugging Face folder, whose config.json "
                        "states the scaling", 2)
    n_head = count("attention.head_count")
    n_kv = count("attention.head_count_kv", 0, 0) or n_head
    tokenizer = tokenizer_fields(reader, path)
    names = {t.name for t in reader.tensors}
    config: dict[str, Any] = {
        "model_type": ARCHITECTURES[arch],
        "num_hidden_layers": count("block_count"),
        "hidden_size": count("embedding_length"),
        "intermediate_size": count("feed_forward_length"),
        "num_attention_heads": n_head,
        "num_key_value_heads": n_kv,
        "max_position_embeddings": count("context_length"),
        "rms_norm_eps": real("attention.layer_norm_rms_epsilon"),
        "rope_theta": real("rope.freq_base", 10000.0),
        "vocab_size": count("vocab_size", 0, 0) or len(tokenizer["tokens"]),
        "hidden_act": "silu",
        "tie_word_embeddings": "output.weight" not in names,
        **{f"{key}_token_id": tokenizer[f"{key}_id"] for key in ("bos", "eos", "pad")},
    }
    head_dim = count("rope.dimension_count", 0) if arch == "llama" else 0
    if head_dim:
        config["head_dim"] = head_dim
    _check_shapes(reader, path, arch, config)
    kinds = sorted({t.tensor_type.name for t in reader.tensors})
    facts = {"gguf_architecture": arch, "gguf_name": field("general.name"), "tensor_types": kinds,
             "file_type": field("general.file_type")}
    state: dict[str, np.ndarray] = {}
    if with_tensors:
        for t in reader.tensors:
            name = hf_name(t.name)
            w = dequantized(path, t)
            if arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
                w = unpermute_rope_rows(w, n_head if "q_proj" in name else n_kv)
            state[name] = np.ascontiguousarray(w)
    return GGUFContents(config, state, tokenizer, facts)
