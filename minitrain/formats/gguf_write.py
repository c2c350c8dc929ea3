"""Write a model as one GGUF file (llama.cpp's format) with the `gguf` package, the llama.cpp project's own writer.

Two layouts, the ones llama.cpp's `convert_hf_to_gguf.py` writes for these networks:

    The decoders (general.architecture llama, qwen2 with q/k/v biases, gemma2, gemma3): HF names shortened as
        their GGUF_LAYOUTS record lists (token_embd, blk.N.attn_q, ...; formats/gguf_layouts.py), every Linear as
        NumPy (out, in) = GGUF [in, out], q/k rows permuted per head for llama (`permute_rope_rows`: llama.cpp
        rotates interleaved pairs), Gemma's norms stored as 1 + w, the lm_head as output.weight only when untied;
        the record's `written` keys (Gemma's window and soft-caps) beside the shared ones. What llama.cpp
        hard-codes instead of reading (Gemma's local/global pattern, local RoPE base, score scale) cannot be
        written: the file is read back before it replaces OUT, and a model the reader would build differently
        is refused, naming the key.
    GPT-2 (MiniGPT; general.architecture gpt2):
        transformer.wte / wpe               token_embd / position_embd     (V, D) / (P, D)
        h.N.ln_1, ln_2 (weight, bias)       blk.N.attn_norm, blk.N.ffn_norm
        h.N.attn.c_attn, attn.c_proj        blk.N.attn_qkv, blk.N.attn_output   (q, k, v stacked as GPT-2 does)
        h.N.mlp.c_fc, mlp.c_proj            blk.N.ffn_up, blk.N.ffn_down
        ln_f                                output_norm
        wte again                           output.weight (GPT-2 ties it; the converter writes the copy)
      MiniGPT keeps GPT-2's Conv1D layout [in, out] (x·W), so each of its four projections is transposed to (out, in).

dtypes (`general.file_type`): f32, f16, q8_0, q4_0, q5_k, q4_k_m, the records of formats/gguf_dtypes.py, which
also choose each tensor's GGML type (llama.cpp's mixture for the last three); formats/gguf_quants.py encodes them.

The file is written through `common.io.atomic_write`: a temporary sibling renamed over OUT at the end.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write
from minitrain.formats.gguf_dtypes import GGUF_DTYPES, GGUFDtype, tensor_type
from minitrain.formats.gguf_layouts import GGUF_LAYOUTS, GGUFLayout
from minitrain.formats.gguf_quants import fitting
from minitrain.formats.gguf_read import gguf_name, permute_rope_rows
from minitrain.formats.gpt2 import LAYER_NORM_EPS
from minitrain.formats.hf_config import to_hf_state
from minitrain.models.decoder import layer_kinds
from minitrain.models.registry import layout_of

GPT2_LAYER = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
              "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
GPT2_GLOBAL = {"transformer.wte.weight": "token_embd.weight", "transformer.wpe.weight": "position_embd.weight",
               "transformer.ln_f.weight": "output_norm.weight", "transformer.ln_f.bias": "output_norm.bias"}
CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")  # GPT-2's [in, out] projections


def check_writable(model_config: Mapping[str, Any]) -> None:
    """UserError for what this writer cannot express in a GGUF minitrain also reads back (its sizes are uint32)."""
    for key in ("vocab_size", "max_seq_len", "d_model", "n_layer", "d_ff", "n_head", "n_kv_head", "head_dim"):
        if not 0 <= int(model_config.get(key) or 0) < 2**32:
            raise UserError(f"export --format gguf: {key} = {model_config[key]}: a GGUF stores it as a uint32 "
                            f"(below {2**32:,})", 2)
    scaling = model_config.get("rope_scaling")
    arch = layout_of(model_config)
    if scaling and (arch not in GGUF_LAYOUTS or scaling.get("rope_type") not in GGUF_LAYOUTS[arch].rope_scalings):
        why = ("Llama 3 RoPE scaling: llama.cpp keeps it as a rope_freqs tensor, which minitrain neither writes nor "
               "reads" if scaling.get("rope_type") == "llama3" else f"{scaling.get('rope_type')} RoPE scaling: "
               f"llama.cpp's {arch} layout does not hold it")
        raise UserError(f"export --format gguf: a model with {why}; export a Hugging Face folder (--format hf)", 2)


def decoder_tensors(layout: GGUFLayout, model_config: Mapping[str, Any], state: Mapping[str, np.ndarray]
                    ) -> Iterator[tuple[str, np.ndarray]]:
    """(GGUF name, NumPy (out, in) array) of a minitrain decoder state dict in `layout` (module docstring)."""
    n_head, n_kv = model_config["n_head"], model_config.get("n_kv_head") or model_config["n_head"]
    for hf, w in to_hf_state(state, model_config).items():
        if layout.rope_permuted and hf.endswith(("q_proj.weight", "k_proj.weight")):
            w = permute_rope_rows(w, n_head if hf.endswith("q_proj.weight") else n_kv)
        if layout.norm_offset and hf.endswith("norm.weight"):
            w = w + np.float32(layout.norm_offset)
        yield gguf_name(hf, layout), w


def gpt2_tensors(state: Mapping[str, np.ndarray]) -> Iterator[tuple[str, np.ndarray]]:
    """(GGUF name, NumPy array) of a MiniGPT state dict in llama.cpp's gpt2 layout (module docstring)."""
    for name, w in state.items():
        if name in GPT2_GLOBAL:
            yield GPT2_GLOBAL[name], w
            continue
        layer, rest = name.removeprefix("transformer.h.").split(".", 1)
        part, kind = rest.rsplit(".", 1)
        if part in CONV1D and kind == "weight":
            w = w.T
        yield f"blk.{layer}.{GPT2_LAYER[part]}.{kind}", w
    yield "output.weight", state["transformer.wte.weight"]


def encoded(w: np.ndarray, kind: str) -> tuple[np.ndarray, Any]:
    """The array the writer stores for `w` in the GGML type `kind` (or its fallback for w's rows: formats/
    gguf_quants.py), and its raw GGML type (None: F32 and F16, which the writer reads off the array)."""
    import gguf

    w = np.ascontiguousarray(w, dtype=np.float32)
    stored = fitting(kind, w.shape[-1])
    data, _ = stored.encode(w)
    return data, None if stored.name in ("F32", "F16") else gguf.GGMLQuantizationType[stored.name]


def _model_metadata(writer, model_config: Mapping[str, Any], layout: GGUFLayout | None) -> None:
    """The architecture's keys, in the order llama.cpp's converter writes them (a Llama or a GPT-2 layout)."""
    writer.add_context_length(int(model_config["max_seq_len"]))
    writer.add_embedding_length(int(model_config["d_model"]))
    writer.add_block_count(int(model_config["n_layer"]))
    writer.add_feed_forward_length(int(model_config["d_ff"]))
    writer.add_head_count(int(model_config["n_head"]))
    if layout is None:
        writer.add_layer_norm_eps(LAYER_NORM_EPS)
        return
    head_dim = model_config.get("head_dim") or model_config["d_model"] // model_config["n_head"]
    writer.add_head_count_kv(int(model_config.get("n_kv_head") or model_config["n_head"]))
    writer.add_rope_freq_base(float(model_config.get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(float(model_config.get("rms_norm_eps", 1e-5)))
    writer.add_rope_dimension_count(int(head_dim))
    if head_dim * model_config["n_head"] != model_config["d_model"]:  # llama.cpp's default is D / H
        writer.add_key_length(int(head_dim))
        writer.add_value_length(int(head_dim))
    if scaling := model_config.get("rope_scaling"):  # a type the layout's record maps (check_writable)
        from gguf import RopeScalingType

        writer.add_rope_scaling_type(RopeScalingType(scaling["rope_type"]))
        writer.add_rope_scaling_factor(float(scaling["factor"]))
    for key, short in layout.written.items():
        if (value := model_config.get(key)) is not None:
            add = writer.add_float32 if isinstance(value, float) else writer.add_uint32
            add(f"{layout.name}.{short}", value)


def _tokenizer_metadata(writer, fields: Mapping[str, Any]) -> None:
    writer.add_tokenizer_model(fields["model"])
    if fields.get("pre"):
        writer.add_tokenizer_pre(fields["pre"])
    writer.add_token_list(list(fields["tokens"]))
    writer.add_token_merges(list(fields["merges"]))
    writer.add_token_types(list(fields["token_types"]))
    for key, add in (("bos_id", writer.add_bos_token_id), ("eos_id", writer.add_eos_token_id),
                     ("pad_id", writer.add_pad_token_id), ("unk_id", writer.add_unk_token_id)):
        if fields.get(key) is not None:
            add(int(fields[key]))
    if fields.get("add_bos") is not None:  # a GGUF read without the key is written without it
        writer.add_add_bos_token(bool(fields["add_bos"]))
    if fields.get("add_eos"):
        writer.add_add_eos_token(True)
    if fields.get("add_space_prefix") is not None:  # SentencePiece (tokenizer.ggml.model llama)
        writer.add_add_space_prefix(bool(fields["add_space_prefix"]))
    if fields.get("scores"):  # SentencePiece: llama.cpp ranks its merges by them
        writer.add_token_scores([float(v) for v in fields["scores"]])
    if fields.get("chat_template"):
        writer.add_chat_template(fields["chat_template"])


def write_gguf_model(path: str | Path, model_config: Mapping[str, Any], state: Mapping[str, np.ndarray],
                     fields: Mapping[str, Any], dtype: str = "f32", name: str = "minitrain model") -> dict[str, int]:
    """Write `state` (minitrain names and layout, a Llama or MiniGPT config) with the tokenizer `fields`
    (formats/gguf_vocab.py) as a GGUF at `path`; return how many tensors of each GGML type it holds."""
    import gguf

    out: GGUFDtype = GGUF_DTYPES.pick(dtype, "export --dtype")
    check_writable(model_config)
    arch = layout_of(model_config)  # a GGUF_LAYOUTS record's name or gpt2 (hub/export_gguf.py refuses the others)
    layout = None if arch == "gpt2" else GGUF_LAYOUTS[arch]
    writer = gguf.GGUFWriter(None, arch)
    writer.add_name(name)
    writer.add_file_type(out.file_type)
    if out.matrix not in ("F32", "F16"):
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_vocab_size(int(model_config["vocab_size"]))
    _model_metadata(writer, model_config, layout)
    _tokenizer_metadata(writer, fields)
    kinds: dict[str, int] = {}
    named = list(gpt2_tensors(state) if layout is None else decoder_tensors(layout, model_config, state))
    # MiniGPT's output.weight is the copy of its tied embedding: both in the output's type, so they stay one matrix
    # (llama.cpp's rule would store them apart; minitrain's reader takes a gpt2 file only with the two equal).
    tied = layout is None or "output.weight" not in dict(named)
    for short, w in named:
        data, raw = encoded(w, tensor_type(out, short, w.shape, int(model_config["n_layer"]), tied))
        writer.add_tensor(short, data, raw_dtype=raw)
        kind = raw.name if raw is not None else ("F16" if data.dtype == np.float16 else "F32")
        kinds[kind] = kinds.get(kind, 0) + 1

    def write(f: IO[bytes]) -> None:
        # The writer opens its own file by name; handing it the temporary file keeps the write atomic.
        writer.fout, writer.state = [f], gguf.gguf_writer.WriterState.EMPTY
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()

    atomic_write(path, write, None if layout is None else lambda tmp: read_back(tmp, model_config, arch))
    return dict(sorted(kinds.items()))


def read_back(path: Path, model_config: Mapping[str, Any], arch: str) -> None:
    """UserError unless the GGUF at `path` reads back (formats/gguf_read.py) as the model `model_config` is: every
    key the reader sets equal, a float to float32 rounding (what a GGUF stores), a key left None (its default)
    equal to what the reader derives for it."""
    from minitrain.formats.gguf_read import read_gguf
    from minitrain.formats.hf_config import from_hf_config

    read, _ = from_hf_config(read_gguf(path, with_tensors=False).config, "export")
    for key, value in read.items():
        ours = model_config.get(key, value)
        if ours is None and value is not None:
            ours = _default_of(key, model_config, read)
        same = np.float32(ours) == np.float32(value) if isinstance(value, float) else ours == value
        if not same:
            raise UserError(f"export --format gguf: model.{key} = {ours!r}: llama.cpp's {arch} layout cannot hold "
                            f"it (a reader of the file builds {value!r}); export a Hugging Face folder "
                            "(--format hf)", 2)


def _default_of(key: str, model_config: Mapping[str, Any], read: Mapping[str, Any]) -> Any:
    """What a decoder builds for `key` left None (models/decoder.py, models/gemma.py)."""
    return {"head_dim": model_config["d_model"] // model_config["n_head"], "n_kv_head": model_config["n_head"],
            "query_pre_attn_scalar": read.get("head_dim"), "rope_local_theta": model_config.get("rope_theta"),
            "layer_types": layer_kinds(model_config)}.get(key)
