"""formats/gguf_read.py and gguf_layouts.py on GGUFs written here by the `gguf` package's own GGUFWriter: every
tensor type the package dequantizes is read (Q4_K and Q8_0 against a NumPy decode of llama.cpp's block layout,
written here from ggml-common.h's structs and ggml-quants.c's dequantize_row_*, the rest against the package's
reference); a type it cannot read is refused from the header, before any tensor is dequantized; Gemma 2 and 3 files
in llama.cpp's converter layout become transformers' config and HF-named state (norms stored as 1 + w)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf.quants import dequantize, quantize

from minitrain.common.errors import UserError
from minitrain.formats import gguf_read
from minitrain.formats.gguf_layouts import FULL, GGUF_LAYOUTS, SLIDING
from minitrain.formats.gguf_read import gguf_hf_config, gguf_hf_state, open_gguf, read_gguf, readable_types
from minitrain.formats.hf_config import MODEL_TYPES

Q = gguf.GGMLQuantizationType
LLAMA = {"block_count": 1, "context_length": 32, "embedding_length": 32, "feed_forward_length": 256,
         "attention.head_count": 4, "attention.head_count_kv": 2, "vocab_size": 10}


def write(path: Path, arch: str, meta: dict, tensors: dict[str, tuple[Q, np.ndarray]]) -> Path:
    """A GGUF of `arch` with `meta` under `<arch>.*` and each tensor stored as its type: F32/F16 as floats, a type
    the package quantizes quantized from the floats, any other as the given raw uint8 block bytes."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_layer_norm_rms_eps(1e-6)
    for key, value in meta.items():
        (writer.add_float32 if isinstance(value, float) else writer.add_uint32)(f"{arch}.{key}", value)
    for name, (kind, values) in tensors.items():
        if kind in (Q.F32, Q.F16):
            writer.add_tensor(name, values.astype(np.float32 if kind == Q.F32 else np.float16))
        else:
            writer.add_tensor(name, values if values.dtype == np.uint8 else quantize(values, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def llama_tensors(rng: np.random.Generator) -> dict[str, tuple[Q, np.ndarray]]:
    shapes = {"token_embd.weight": (10, 32), "output_norm.weight": (32,), "blk.0.attn_norm.weight": (32,),
              "blk.0.attn_q.weight": (32, 32), "blk.0.attn_k.weight": (16, 32), "blk.0.attn_v.weight": (16, 32),
              "blk.0.attn_output.weight": (32, 32), "blk.0.ffn_norm.weight": (32,),
              "blk.0.ffn_gate.weight": (256, 32), "blk.0.ffn_up.weight": (256, 32), "blk.0.ffn_down.weight": (32, 256)}
    return {name: (Q.F32, rng.normal(0, 0.5, shape).astype(np.float32)) for name, shape in shapes.items()}


def random_blocks(kind: Q, rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """Random bytes of `kind`'s blocks, none with the bits 0x7C of a float16 inf/NaN exponent all set (so no f16
    scale, wherever it sits, is inf or NaN); Q4_K's two leading f16 scales d, dmin made small positive numbers."""
    block, size = gguf.GGML_QUANT_SIZES[kind]
    raw = rng.integers(0, 0xF8, (rows, cols // block, size), dtype=np.uint8)
    raw = np.where(raw & 0x7C == 0x7C, raw & 0x7B, raw).astype(np.uint8)
    if kind == Q.Q4_K:
        raw[..., :4] = rng.uniform(0.001, 0.1, (rows, cols // block, 2)).astype(np.float16).view(np.uint8)
    return raw.reshape(rows, -1)


def decode_q8_0(raw: np.ndarray) -> np.ndarray:
    """block_q8_0 = {half d; int8 qs[32]} (34 bytes); y = d·q."""
    blocks = raw.reshape(-1, 34)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    return (d * blocks[:, 2:].copy().view(np.int8).astype(np.float32)).reshape(raw.shape[0], -1)


def decode_q4_k(raw: np.ndarray) -> np.ndarray:
    """block_q4_K = {half d; half dmin; uint8 scales[12]; uint8 qs[128]} (144 bytes, 256 values): 8 sub-blocks of
    32, each with a 6-bit scale sc and min m packed in `scales` (get_scale_min_k4); sub-block pair j (64 values)
    reads qs[32j : 32j+32], low nibbles first: y = d·sc·q − dmin·m. One block at a time, as dequantize_row_q4_K."""
    def scale_min(scales: np.ndarray, j: int) -> tuple[int, int]:
        if j < 4:
            return scales[j] & 63, scales[j + 4] & 63
        return (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4), (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4)

    out = []
    for b in raw.reshape(-1, 144):
        d, dmin = (np.float32(b[i:i + 2].copy().view(np.float16)[0]) for i in (0, 2))
        scales, qs = b[4:16].astype(np.int32), b[16:].astype(np.int32)
        for pair in range(4):
            q = qs[32 * pair:32 * pair + 32]
            for nibble, j in ((q & 0xF, 2 * pair), (q >> 4, 2 * pair + 1)):
                sc, m = scale_min(scales, j)
                scale, low = np.float32(d * np.float32(sc)), np.float32(dmin * np.float32(m))
                out.append(scale * nibble.astype(np.float32) - low)
    return np.concatenate(out).reshape(raw.shape[0], -1)


def test_the_readable_types_are_what_the_package_dequantizes():
    kinds = readable_types()
    assert {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
            "Q6_K"} <= kinds
    for name in {k.name for k in Q} - kinds:  # each one left out really is refused by the package
        with pytest.raises(NotImplementedError):
            dequantize(np.zeros((1, gguf.GGML_QUANT_SIZES[Q[name]][1]), np.uint8), Q[name])


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # IQ1_M's scale, packed in nibbles, may be NaN
@pytest.mark.parametrize("kind", sorted(readable_types()))
def test_every_type_the_package_dequantizes_is_read(tmp_path, kind):
    rng = np.random.default_rng(0)
    tensors = llama_tensors(rng)
    floats = tensors["blk.0.ffn_down.weight"][1]
    try:
        stored = quantize(floats, Q[kind])
    except NotImplementedError:  # the K-quants and IQ types: crafted block bytes
        stored = random_blocks(Q[kind], 32, 256, rng)
    tensors["blk.0.ffn_down.weight"] = (Q[kind], stored)
    path = write(tmp_path / f"{kind}.gguf", "llama", LLAMA, tensors)
    read = read_gguf(path).state["model.layers.0.mlp.down_proj.weight"]
    assert read.shape == (32, 256) and read.dtype == np.float32
    raw = next(t for t in open_gguf(path).tensors if t.name == "blk.0.ffn_down.weight").data
    reference = {"Q8_0": decode_q8_0, "Q4_K": decode_q4_k}.get(kind)
    if reference is not None:  # independent of the package
        np.testing.assert_allclose(read, reference(np.asarray(raw)), rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(read, np.asarray(dequantize(raw, Q[kind]), np.float32).reshape(32, 256))
    if kind in ("F32", "F16", "BF16", "Q8_0"):
        np.testing.assert_allclose(read, floats, atol=0.02 * np.abs(floats).max())


@pytest.mark.parametrize("kind", sorted({k.name for k in Q} - readable_types()))
def test_a_type_the_package_cannot_dequantize_is_refused_from_the_header(tmp_path, monkeypatch, capsys, kind):
    """Q8_1, Q8_K, the integer types, F64: written as raw blocks, last in the file; not one tensor is dequantized
    before the refusal (before: every tensor up to it was, 11 here)."""
    from minitrain.cli import main

    tensors = llama_tensors(np.random.default_rng(0))
    del tensors["blk.0.ffn_down.weight"]
    block, size = gguf.GGML_QUANT_SIZES[Q[kind]]
    tensors["blk.0.ffn_down.weight"] = (Q[kind], np.zeros((32, 256 // block * size), np.uint8))
    path = write(tmp_path / "odd.gguf", "llama", LLAMA, tensors)
    calls = []
    monkeypatch.setattr("gguf.quants.dequantize", lambda *a: calls.append(a) or pytest.fail("dequantized"))
    with pytest.raises(UserError, match=rf"odd\.gguf: tensor blk\.0\.ffn_down\.weight is stored as {kind}, a type "
                                        "the gguf package cannot dequantize") as refused:
        read_gguf(path, with_tensors=False)
    assert refused.value.exit_code == 2 and calls == []
    assert main(["sample", str(path), "--prompt", "a", "--max-new-tokens", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and f"blk.0.ffn_down.weight is stored as {kind}" in err[0]


def test_an_unknown_type_id_is_refused_as_an_unreadable_file(tmp_path):
    tensors = llama_tensors(np.random.default_rng(0))
    path = write(tmp_path / "odd.gguf", "llama", LLAMA, tensors)
    data = bytearray(path.read_bytes())
    name = b"blk.0.ffn_down.weight"
    at = data.index(name) + len(name) + 4 + 2 * 8  # after the name: n_dims (u32), two dims (u64), then the type
    data[at:at + 4] = (99).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match="not a readable GGUF file") as refused:
        read_gguf(path)
    assert refused.value.exit_code == 2


# --- Gemma ------------------------------------------------------------------------------------------------------

GEMMA = {"context_length": 64, "embedding_length": 32, "block_count": 6, "feed_forward_length": 64,
         "attention.head_count": 4, "attention.head_count_kv": 2, "attention.key_length": 16,
         "attention.value_length": 16, "rope.freq_base": 1000000.0, "attention.sliding_window": 8, "vocab_size": 10}


def gemma_file(path: Path, arch: str, meta: dict, rng: np.random.Generator) -> tuple[Path, dict]:
    """A tiny Gemma GGUF as llama.cpp's converter writes one (its names; each norm stored as 1 + w, F32; linear
    weights Q8_0 and F16, the embedding Q8_0); returns the file and {GGUF name: the float32 stored}."""
    layer = {"attn_norm": (32,), "attn_q": (64, 32), "attn_k": (32, 32), "attn_v": (32, 32), "attn_output": (32, 64),
             "post_attention_norm": (32,), "ffn_norm": (32,), "ffn_gate": (64, 32), "ffn_up": (64, 32),
             "ffn_down": (32, 64), "post_ffw_norm": (32,)}
    if arch == "gemma3":
        layer.update(attn_q_norm=(16,), attn_k_norm=(16,))
    shapes = {"token_embd.weight": (10, 32), "output_norm.weight": (32,), **{
        f"blk.{i}.{short}.weight": shape for i in range(meta["block_count"]) for short, shape in layer.items()}}
    tensors = {}
    for n, (name, shape) in enumerate(shapes.items()):
        values = rng.normal(0, 0.3, shape).astype(np.float32)
        kind = Q.F32 if name.endswith("norm.weight") else (Q.Q8_0, Q.F16)[n % 2]
        tensors[name] = (kind, 1 + values if kind == Q.F32 else values)
    write(path, arch, meta, tensors)
    stored = {t.name: np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(
        tuple(int(d) for d in reversed(t.shape))) for t in open_gguf(path).tensors}
    return path, stored


def expected_state(stored: dict, names: dict[str, str]) -> dict:
    """The HF state a reader must give, derived from what was stored: the converter's names undone, 1 off each
    norm (llama.cpp stores Gemma's 1 + w), nothing else changed (no RoPE permutation in Gemma's converter)."""
    out = {}
    for name, values in stored.items():
        if name in ("token_embd.weight", "output_norm.weight"):
            hf = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}[name]
        else:
            _, i, short, _ = name.split(".")
            hf = f"model.layers.{i}.{names[short]}.weight"
        out[hf] = values - 1 if name.endswith("norm.weight") else values
    return out


GEMMA3_NAMES = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
                "attn_k_norm": "self_attn.k_norm", "post_attention_norm": "post_attention_layernorm",
                "ffn_norm": "pre_feedforward_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                "ffn_down": "mlp.down_proj", "post_ffw_norm": "post_feedforward_layernorm"}


def test_a_gemma3_gguf_becomes_transformers_config_and_hf_state(tmp_path):
    path, stored = gemma_file(tmp_path / "g3.gguf", "gemma3", GEMMA, np.random.default_rng(1))
    reader = open_gguf(path)
    layout, config, _ = gguf_hf_config(reader, path)
    assert layout is GGUF_LAYOUTS["gemma3"]
    assert config == {  # Gemma3TextConfig's names; what llama.cpp hard-codes for gemma3 written out
        "model_type": "gemma3_text", "num_hidden_layers": 6, "hidden_size": 32, "intermediate_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
        "rope_theta": 1e6, "vocab_size": 10, "tie_word_embeddings": True,
        "bos_token_id": None, "eos_token_id": None, "pad_token_id": None, "head_dim": 16,
        "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 16, "sliding_window": 8,
        "layer_types": [SLIDING] * 5 + [FULL], "rope_local_base_freq": 10000.0,
        "attn_logit_softcapping": None, "final_logit_softcapping": None}
    state = gguf_hf_state(reader, path, layout, config)
    expected = expected_state(stored, GEMMA3_NAMES)
    assert state.keys() == expected.keys()
    for name, values in expected.items():
        np.testing.assert_array_equal(state[name], values, err_msg=name)


def test_a_gemma2_gguf_has_its_soft_caps_and_alternating_layers(tmp_path):
    meta = {**GEMMA, "block_count": 4, "attn_logit_softcapping": 40.0}
    path, stored = gemma_file(tmp_path / "g2.gguf", "gemma2", meta, np.random.default_rng(2))
    reader = open_gguf(path)
    layout, config, _ = gguf_hf_config(reader, path)
    assert config["model_type"] == "gemma2" and config["layer_types"] == [SLIDING, FULL, SLIDING, FULL]
    assert (config["attn_logit_softcapping"], config["final_logit_softcapping"]) == (40.0, 30.0)  # 30: llama.cpp's
    assert "rope_local_base_freq" not in config and config["query_pre_attn_scalar"] == 16
    names = {k: v for k, v in GEMMA3_NAMES.items() if k not in ("attn_q_norm", "attn_k_norm")}
    state = gguf_hf_state(reader, path, layout, config)
    for name, values in expected_state(stored, names).items():
        np.testing.assert_array_equal(state[name], values, err_msg=name)


def test_read_gguf_checks_the_converted_config_and_shapes_before_any_tensor_is_read(tmp_path, monkeypatch):
    path, _ = gemma_file(tmp_path / "g3.gguf", "gemma3", GEMMA, np.random.default_rng(1))
    seen = []

    def refuse(config, where):
        seen.append(config)
        raise UserError(f"{where}: stop", 2)

    monkeypatch.setattr(gguf_read, "from_hf_config", refuse)
    monkeypatch.setattr("gguf.quants.dequantize", lambda *a: pytest.fail("a tensor was read"))
    with pytest.raises(UserError, match="stop"):
        read_gguf(path)
    assert seen == [gguf_hf_config(open_gguf(path), path)[1]]


def test_a_gemma3_27b_scales_scores_by_width_over_heads_linear_rope_scaling_is_kept_and_no_window_none(tmp_path):
    """llama.cpp: the 62-layer Gemma 3 divides by hidden_size / num_attention_heads; a linear rope.scaling is
    transformers' rope_scaling of the global layers."""
    meta = {**GEMMA, "block_count": 62, "rope.scaling.factor": 8.0}
    writer = gguf.GGUFWriter(str(tmp_path / "big.gguf"), "gemma3")
    writer.add_layer_norm_rms_eps(1e-6)
    for key, value in meta.items():
        (writer.add_float32 if isinstance(value, float) else writer.add_uint32)(f"gemma3.{key}", value)
    writer.add_string("gemma3.rope.scaling.type", "linear")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    _, config, _ = gguf_hf_config(open_gguf(tmp_path / "big.gguf"), tmp_path / "big.gguf")
    assert config["query_pre_attn_scalar"] == 32 // 4
    assert config["rope_scaling"] == {"rope_type": "linear", "factor": 8.0}
    assert config["layer_types"].count(FULL) == 10
    del meta["attention.sliding_window"]  # llama.cpp: then no layer slides
    write(tmp_path / "full.gguf", "gemma3", meta, {})
    _, config, _ = gguf_hf_config(open_gguf(tmp_path / "full.gguf"), tmp_path / "full.gguf")
    assert config["layer_types"] == [FULL] * 62 and config["sliding_window"] is None


@pytest.mark.parametrize("arch", list(GGUF_LAYOUTS))
def test_every_layout_names_each_tensor_once_and_undoes_its_converter(tmp_path, arch):
    """The contract of a GGUF_LAYOUTS record, on a one-layer file holding every tensor name it lists: each becomes
    a distinct Hugging Face name; a norm loses the record's norm_offset; q/k rows are un-permuted (HF's halves from
    llama.cpp's interleaved pairs, per head) exactly when the record says its converter permuted them; the config
    names the record's model_type."""
    layout, rng = GGUF_LAYOUTS[arch], np.random.default_rng(3)
    meta = {**GEMMA, "block_count": 1, "attention.key_length": 8, "attention.value_length": 8}
    shapes = {"attn_q.weight": (32, 32), "attn_k.weight": (16, 32), "attn_q.bias": (32,), "attn_k.bias": (16,),
              "attn_v.bias": (16,)}
    names = {**{short: f"model.layers.0.{long}" for short, long in layout.layer_names.items()},
             "token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
    tensors = {(f"blk.0.{short}" if long.startswith("model.layers") else short): (
        Q.F32, rng.normal(0, 1, (8,) if "norm" in short else shapes.get(short, (32, 32))).astype(np.float32))
        for short, long in names.items()}
    path = write(tmp_path / f"{arch}.gguf", arch, meta, tensors)
    reader = open_gguf(path)
    found, config, _ = gguf_hf_config(reader, path)
    assert found is layout and config["model_type"] == layout.model_type
    state = gguf_hf_state(reader, path, layout, config)
    assert len(state) == len(tensors) == len(set(names.values()))
    for short, long in names.items():
        stored = tensors[f"blk.0.{short}" if long.startswith("model.layers") else short][1]
        if long.endswith("norm.weight"):
            stored = stored - np.float32(layout.norm_offset)
        elif layout.rope_permuted and long.endswith(("q_proj.weight", "k_proj.weight")):
            heads = 4 if "q_proj" in long else 2
            stored = stored.reshape(heads, 8 // 2, 2, 32).swapaxes(1, 2).reshape(stored.shape)
        np.testing.assert_array_equal(state[long], stored, err_msg=long)


@pytest.mark.skipif("gemma3_text" not in MODEL_TYPES, reason="from_hf_config reads gemma3_text once the Gemma model "
                    "is merged")
def test_read_gguf_of_a_gemma3_file_fits_minitrains_gemma(tmp_path):
    from minitrain.formats.hf_config import from_hf_config, from_hf_state
    from minitrain.models.registry import build_model

    path, stored = gemma_file(tmp_path / "g3.gguf", "gemma3", GEMMA, np.random.default_rng(1))
    contents = read_gguf(path)
    for name, values in expected_state(stored, GEMMA3_NAMES).items():
        np.testing.assert_array_equal(contents.state[name], values, err_msg=name)
    model_config, _ = from_hf_config(contents.config, str(path))
    assert model_config["layer_types"] == [SLIDING] * 5 + [FULL] and model_config["sliding_window"] == 8
    build_model(model_config).load_state_dict(from_hf_state(dict(contents.state), model_config, str(path)))
