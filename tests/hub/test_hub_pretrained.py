"""Llama-family bases in: HF config <-> minitrain config, state layouts, safetensors (BF16/F16, shards), GGUF
(F32 + Q8_0, q/k un-permuted), a Hub id through the stand-in Hub, and the HF folder export read back."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
from huggingface_hub import HfApi, constants
from test_pretrained_tokenizer import tiny_fields

from minitrain.common.errors import UserError
from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
from minitrain.formats.gguf_read import read_gguf, unpermute_rope_rows
from minitrain.formats.hf_config import from_hf_config, from_hf_state, hf_shapes, to_hf_config, to_hf_state
from minitrain.formats.safetensors_folder import bf16_to_float32, read_folder_weights, read_safetensors
from minitrain.hub.pretrained import export_hf_folder, load_pretrained_base

VOCAB = len(tiny_fields()["tokens"])  # 266
HF_CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 32,
             "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "vocab_size": VOCAB, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
             "hidden_act": "silu", "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2}
MINITRAIN = {"type": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "d_model": 32, "d_ff": 64,
             "vocab_size": VOCAB, "max_seq_len": 64, "rope_theta": 10000.0, "rope_scaling": None,
             "rms_norm_eps": 1e-5, "tie_embeddings": True, "attention_bias": False, "head_dim": 8}


def random_hf_state(model: dict, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.normal(0, 0.5, s).astype(np.float32) for n, s in hf_shapes(model).items()}



def float32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> uint16 BF16 bit patterns, rounded to nearest even (what the fixtures' BF16 files hold)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(np.uint16)


def permute_rope_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's q/k row permutation (HF layout -> interleaved), what a GGUF writer does: the inverse of
    `gguf_read.unpermute_rope_rows`."""
    half = w.shape[0] // n_heads // 2
    return w.reshape(n_heads, 2, half, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# --- config.json --------------------------------------------------------------------------------------------------

def test_llama_config_maps_to_minitrain_and_back():
    model, facts = from_hf_config(HF_CONFIG, "config.json")
    assert model == MINITRAIN and facts["hf_model_type"] == "llama"
    back = to_hf_config(model, 1, 2, None)
    assert back["architectures"] == ["LlamaForCausalLM"] and back["head_dim"] == 8
    assert from_hf_config(back, "x")[0] == model


def test_qwen2_has_qkv_biases_and_exports_as_qwen2():
    model, _ = from_hf_config({**HF_CONFIG, "model_type": "qwen2", "use_sliding_window": False,
                               "sliding_window": 16}, "config.json")
    assert model["attention_bias"] is True and model["max_seq_len"] == 64  # window inactive: nothing capped
    assert "model.layers.0.self_attn.q_proj.bias" in hf_shapes(model)
    assert "model.layers.0.self_attn.o_proj.bias" not in hf_shapes(model)
    assert to_hf_config(model, 1, 2, 2)["architectures"] == ["Qwen2ForCausalLM"]


def test_an_active_sliding_window_is_the_models_own_and_goes_back_out():
    model, _ = from_hf_config({**HF_CONFIG, "model_type": "mistral", "sliding_window": 16}, "config.json")
    assert model["max_seq_len"] == 64 and model["sliding_window"] == 16 and model.get("layer_types") is None
    assert to_hf_config(model, 1, 2, None)["sliding_window"] == 16 == from_hf_config(
        to_hf_config(model, 1, 2, None), "x")[0]["sliding_window"]
    qwen2 = {**HF_CONFIG, "model_type": "qwen2", "use_sliding_window": True, "sliding_window": 16,
             "max_window_layers": 1}  # Qwen2Config: layers from max_window_layers on slide
    model, _ = from_hf_config(qwen2, "config.json")
    assert model["layer_types"] == ["full_attention", "sliding_attention"] and model["sliding_window"] == 16
    back = to_hf_config(model, 1, 2, None)
    assert back["max_window_layers"] == 1 and from_hf_config(back, "x")[0] == model


def test_rope_parameters_and_llama3_scaling_are_read_in_both_spellings():
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192}
    old, _ = from_hf_config({**HF_CONFIG, "rope_theta": 500000.0, "rope_scaling": llama3}, "c")
    new, _ = from_hf_config({k: v for k, v in {**HF_CONFIG, "rope_parameters": {**llama3, "rope_theta": 500000.0}}
                             .items() if k != "rope_theta"}, "c")
    assert old["rope_scaling"] == new["rope_scaling"] == llama3 and old["rope_theta"] == new["rope_theta"] == 5e5
    default, _ = from_hf_config({**HF_CONFIG, "rope_parameters": {"rope_type": "default", "rope_theta": 1e5}}, "c")
    assert default["rope_scaling"] is None


@pytest.mark.parametrize(("change", "message"), [
    ({"model_type": "gpt_neox"}, "model_type = 'gpt_neox'"),
    ({"hidden_act": "gelu"}, "hidden_act = 'gelu'"),
    ({"attention_bias": True}, "bias on o_proj"),
    ({"mlp_bias": True}, "mlp_bias"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_type = 'yarn'"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "llama3 scaling needs"),
    ({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}}, "partial_rotary_factor"),
    ({"num_key_value_heads": 3}, "num_key_value_heads = 3: n_head 4 is not a multiple of n_kv_head 3"),
    ({"pretraining_tp": 2}, "pretraining_tp"),
    ({"hidden_size": "32"}, "hidden_size = '32'"),
])
def test_configs_minitrain_cannot_reproduce_are_refused_by_key(change, message):
    with pytest.raises(UserError, match=message):
        from_hf_config({**HF_CONFIG, **change}, "config.json")


# --- state dicts --------------------------------------------------------------------------------------------------

def test_state_conversion_transposes_projections_and_drops_a_tied_head():
    hf = random_hf_state(MINITRAIN)
    given = {**hf, "lm_head.weight": hf["model.embed_tokens.weight"]}
    ours = from_hf_state(given, MINITRAIN, "w")
    assert "lm_head.weight" not in ours and given == {}  # emptied as converted: never two copies
    q = "model.layers.1.self_attn.q_proj.weight"
    assert ours[q].shape == (32, 32) and np.array_equal(ours[q], hf[q].T) and ours[q].flags.c_contiguous
    assert np.array_equal(ours["model.layers.0.mlp.down_proj.weight"], hf["model.layers.0.mlp.down_proj.weight"].T)
    assert np.array_equal(ours["model.norm.weight"], hf["model.norm.weight"])
    back = to_hf_state(ours, MINITRAIN)
    assert back.keys() == hf.keys() and all(np.array_equal(back[n], hf[n]) for n in hf)
    untied = {**MINITRAIN, "tie_embeddings": False}
    hf2 = random_hf_state(untied)
    assert np.array_equal(to_hf_state(from_hf_state(dict(hf2), untied, "w"), untied)["lm_head.weight"],
                          hf2["lm_head.weight"])


def test_weights_that_do_not_fit_are_listed():
    hf = random_hf_state(MINITRAIN)
    del hf["model.norm.weight"]
    hf["model.layers.0.mlp.up_proj.weight"] = np.zeros((64, 31), np.float32)
    with pytest.raises(UserError, match=r"missing model\.norm\.weight.*up_proj\.weight has shape \(64, 31\)"):
        from_hf_state(hf, MINITRAIN, "w")


# --- safetensors --------------------------------------------------------------------------------------------------

def write_safetensors(path: Path, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    """A safetensors file written by hand: {name: (dtype name, raw array)}; raw BF16 is a uint16 array."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (kind, raw) in tensors.items():
        data = np.ascontiguousarray(raw).tobytes()
        header[name] = {"dtype": kind, "shape": list(raw.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_bf16_and_f16_weights_are_widened_exactly():
    values = np.array([[1.0, -2.5, 3.140625], [1e-3, 65504.0, -0.0]], np.float32)
    bits = float32_to_bf16(values)
    assert bf16_to_float32(np.array([0x3F80, 0xC020], np.uint16)).tolist() == [1.0, -2.5]
    assert np.abs(bf16_to_float32(bits) - values).max() <= np.abs(values).max() * 2**-8


def test_a_hand_written_bf16_file_reads_as_float32(tmp_path):
    rng = np.random.default_rng(0)
    exact = bf16_to_float32(float32_to_bf16(rng.normal(size=(3, 5)).astype(np.float32)))  # bf16-representable
    half = rng.normal(size=(4,)).astype(np.float16)
    write_safetensors(tmp_path / "w.safetensors", {"a": ("BF16", float32_to_bf16(exact)), "b": ("F16", half),
                                                   "c": ("F32", exact)})
    state = read_safetensors(tmp_path / "w.safetensors")
    assert all(a.dtype == np.float32 for a in state.values())
    assert np.array_equal(state["a"], exact) and np.array_equal(state["c"], exact)
    assert np.array_equal(state["b"], half.astype(np.float32))


@pytest.mark.parametrize(("tensors", "message"), [
    ({"a": ("I8", np.zeros(3, np.int8))}, "minitrain reads F32, F16, BF16"),
])
def test_unreadable_tensors_are_named(tmp_path, tensors, message):
    write_safetensors(tmp_path / "w.safetensors", tensors)
    with pytest.raises(UserError, match=message):
        read_safetensors(tmp_path / "w.safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(UserError, match="not a safetensors file"):
        read_safetensors(tmp_path / "bad.safetensors")


def test_sharded_weights_are_joined_by_the_index(tmp_path):
    hf = random_hf_state(MINITRAIN)
    names = sorted(hf)
    first, second = names[: len(names) // 2], names[len(names) // 2:]
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors",
                      {n: ("BF16", float32_to_bf16(hf[n])) for n in first})
    safetensors.numpy.save_file({n: hf[n] for n in second}, str(tmp_path / "model-00002-of-00002.safetensors"))
    weight_map = {n: "model-00001-of-00002.safetensors" for n in first}
    weight_map |= {n: "model-00002-of-00002.safetensors" for n in second}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    state, files = read_folder_weights(tmp_path)
    assert len(files) == 2 and state.keys() == hf.keys()
    assert np.array_equal(state[second[0]], hf[second[0]])
    assert np.abs(state[first[0]] - hf[first[0]]).max() <= np.abs(hf[first[0]]).max() * 2**-8
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "../escape"}}))
    with pytest.raises(UserError, match="is not a file in"):
        read_folder_weights(tmp_path)


def test_a_hub_base_in_shards_is_fetched_by_its_index_and_an_export_repo_needs_its_one_file(tmp_path, monkeypatch):
    import huggingface_hub
    from huggingface_hub.errors import EntryNotFoundError

    from minitrain.hub.pretrained import download_base
    from minitrain.hub.sources import download

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "config.json").write_text("{}")
    (repo / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "s1", "b": "s2", "c": "s1"}}))
    for shard in ("s1", "s2"):
        (repo / shard).write_bytes(b"")
    asked = []

    def fake(repo_id, name, **_):  # the repo's files, as hf_hub_download finds them in its cache
        asked.append(name)
        if not (repo / name).is_file():
            raise EntryNotFoundError(f"{name} not in {repo_id}")
        return str(repo / name)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    assert download_base("alice/big") == repo
    assert asked[:5] == ["config.json", "model.safetensors", "model.safetensors.index.json", "s1", "s2"]
    with pytest.raises(UserError, match=r"model.init_from alice/big: the repo lacks a file it needs \(config.json, "
                                        r"model.safetensors\)"):
        download("alice/big")


def hf_folder(folder: Path, bf16: bool = True, tied: bool = True) -> dict[str, np.ndarray]:
    """A tiny Llama folder as transformers saves one (BF16 weights), with a tokenizer; returns the fp32 values."""
    folder.mkdir(parents=True, exist_ok=True)
    model = {**MINITRAIN, "tie_embeddings": tied}
    hf = {n: bf16_to_float32(float32_to_bf16(a)) for n, a in random_hf_state(model).items()}
    (folder / "config.json").write_text(json.dumps({**HF_CONFIG, "tie_word_embeddings": tied}))
    write_safetensors(folder / "model.safetensors",
                      {n: ("BF16", float32_to_bf16(a)) if bf16 else ("F32", a) for n, a in hf.items()})
    PretrainedTokenizer.from_gguf_fields(**tiny_fields()).save(folder)
    return hf


def test_a_hf_folder_loads_and_exports_back_byte_for_byte_tokenizer(tmp_path):
    hf = hf_folder(tmp_path / "base")
    model, state, tok, facts = load_pretrained_base(tmp_path / "base")
    assert model == MINITRAIN and facts["source"] == "folder"
    assert np.array_equal(state["model.layers.0.self_attn.k_proj.weight"],
                          hf["model.layers.0.self_attn.k_proj.weight"].T)
    assert tok.encode("hola") == [tok.tokenizer.token_to_id("hola")]
    export_hf_folder(model, state, tok, tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["bos_token_id"] == 1
    assert json.loads((tmp_path / "out" / "generation_config.json").read_text())["eos_token_id"] == 2
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "base" / name).read_bytes()
    saved = safetensors.numpy.load_file(str(tmp_path / "out" / "model.safetensors"))
    assert saved.keys() == hf.keys() and all(np.array_equal(saved[n], hf[n]) for n in hf)
    again = load_pretrained_base(tmp_path / "out")
    assert again[0] == model and all(np.array_equal(again[1][n], state[n]) for n in state)


@pytest.mark.parametrize("tied", [True, False])
def test_the_loaded_state_fits_minitrains_llama_model_and_exports_back(tmp_path, tied):
    from minitrain.formats.gpt2 import check_state_dict
    from minitrain.models.registry import build_model

    hf = hf_folder(tmp_path / "base", tied=tied)
    model_config, state, tok, _ = load_pretrained_base(tmp_path / "base")
    check_state_dict(state, model_config, "base")
    model = build_model(model_config)
    model.load_state_dict(state)
    ids = np.array([tok.encode("hola como")])
    logits, _ = model(ids)
    assert logits.shape == (1, ids.shape[1], VOCAB) and np.isfinite(logits.data).all()
    # logits = h·lm_head: an untied HF head ([V, d]) is read transposed, and written back as it was
    hidden = model.decode(ids, np.arange(ids.shape[1])[None], np.tril(np.ones((1, ids.shape[1], ids.shape[1]), bool)))
    head = hf["model.embed_tokens.weight" if tied else "lm_head.weight"]
    assert np.allclose(logits.data, hidden.data @ head.T, atol=1e-5)
    export_hf_folder(model_config, dict(model.state_dict()), tok, tmp_path / "out")
    saved = safetensors.numpy.load_file(str(tmp_path / "out" / "model.safetensors"))
    assert saved.keys() == hf.keys() and all(np.array_equal(saved[n], hf[n]) for n in hf)


def test_a_folder_without_tokenizer_json_or_with_too_many_ids_is_refused(tmp_path):
    hf_folder(tmp_path / "a")
    (tmp_path / "a" / "tokenizer.json").unlink()
    with pytest.raises(UserError, match=r"no tokenizer\.json"):
        load_pretrained_base(tmp_path / "a")
    hf_folder(tmp_path / "b")
    small = {**HF_CONFIG, "vocab_size": 200}
    (tmp_path / "b" / "config.json").write_text(json.dumps(small))
    with pytest.raises(UserError, match="weights do not fit"):
        load_pretrained_base(tmp_path / "b")


def test_a_hub_id_downloads_into_the_cache_and_then_works_offline(hub, tmp_path, monkeypatch):
    from fakehub import TOKEN

    hf = hf_folder(tmp_path / "base")
    api = HfApi(endpoint=hub.url, token=TOKEN)
    api.create_repo("alice/tiny-llama")
    api.upload_folder(repo_id="alice/tiny-llama", folder_path=str(tmp_path / "base"))
    model, state, _, facts = load_pretrained_base("alice/tiny-llama")
    assert facts["hub_id"] == "alice/tiny-llama" and facts["path"].startswith(str(tmp_path / "hf"))
    assert np.array_equal(state["model.norm.weight"], hf["model.norm.weight"])
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub.requests.clear()
    assert load_pretrained_base("alice/tiny-llama")[0] == model
    assert hub.requests == []
    with pytest.raises(UserError, match="not in the local Hugging Face cache"):
        load_pretrained_base("alice/other")


# --- GGUF ---------------------------------------------------------------------------------------------------------

def test_rope_permutation_round_trips_and_moves_pairs_to_halves():
    w = np.arange(2 * 8 * 3, dtype=np.float32).reshape(16, 3)  # 2 heads of 8 rows
    assert np.array_equal(unpermute_rope_rows(permute_rope_rows(w, 2), 2), w)
    # llama.cpp's row 2i, 2i+1 of a head are HF's rows i and i + d/2
    assert np.array_equal(permute_rope_rows(w, 2)[[0, 1, 2, 3], 0], w[[0, 4, 1, 5], 0])


def write_gguf(path: Path, hf: dict[str, np.ndarray], config: dict, f64: str | None = None) -> None:
    """A tiny llama GGUF as llama.cpp's converter writes one: short names, q/k rows permuted, attn_q of layer 0
    in Q8_0, the tokenizer in the metadata; the tensor named `f64` (a GGUF name) in F64."""
    import gguf
    from gguf.quants import quantize

    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    layer = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
             "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
             "self_attn.o_proj.weight": "attn_output.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
             "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
             "mlp.down_proj.weight": "ffn_down.weight"}
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_rope_dimension_count(8)
    writer.add_vocab_size(VOCAB)
    fields = tiny_fields()
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(fields["tokens"])
    writer.add_token_merges(fields["merges"])
    writer.add_token_types(fields["token_types"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_chat_template(fields["chat_template"])
    for name, w in hf.items():
        short = names.get(name) or f"blk.{name.split('.')[2]}.{layer['.'.join(name.split('.')[3:])]}"
        if "attn_q" in short:
            w = permute_rope_rows(w, config["num_attention_heads"])
        elif "attn_k" in short:
            w = permute_rope_rows(w, config["num_key_value_heads"])
        if short == "blk.0.attn_q.weight":
            writer.add_tensor(short, quantize(w, gguf.GGMLQuantizationType.Q8_0),
                              raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(short, w.astype(np.float64) if short == f64 else w)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_gguf_is_read_dequantized_unpermuted_with_its_tokenizer(tmp_path):
    hf = random_hf_state(MINITRAIN)
    write_gguf(tmp_path / "tiny.gguf", hf, HF_CONFIG)
    contents = read_gguf(tmp_path / "tiny.gguf")
    assert contents.facts["tensor_types"] == ["F32", "Q8_0"]
    assert contents.config["tie_word_embeddings"] is True and contents.config["rms_norm_eps"] == 1e-5
    k = "model.layers.1.self_attn.k_proj.weight"
    assert np.array_equal(contents.state[k], hf[k])  # F32: exactly the HF tensor again
    q = "model.layers.0.self_attn.q_proj.weight"
    scale = np.abs(hf[q]).max(axis=1, keepdims=True) / 127  # Q8_0: one scale per block of 32 = per row here
    assert np.all(np.abs(contents.state[q] - hf[q]) <= scale * 0.51 + 1e-6)
    model, state, tok, facts = load_pretrained_base(tmp_path / "tiny.gguf")
    assert model == MINITRAIN and facts["source"] == "gguf"
    assert np.array_equal(state[k], hf[k].T)
    assert tok.encode("hola hola") == PretrainedTokenizer.from_gguf_fields(**tiny_fields()).encode("hola hola")
    assert tok.apply_chat_template([{"role": "user", "content": "x"}]) == "<|im_start|>user\nx<|im_end|>\n"


@pytest.mark.parametrize("kind", ["folder", "gguf"])
def test_a_base_holding_nan_or_inf_weights_is_refused_naming_the_tensor(tmp_path, kind):
    """Legitimate BF16/F16 dtypes are widened, so only the values can be wrong; a NaN would train to NaN."""
    hf = random_hf_state(MINITRAIN)
    hf["model.layers.1.mlp.up_proj.weight"][3, 5] = np.inf if kind == "gguf" else np.nan
    if kind == "gguf":
        write_gguf(tmp_path / "tiny.gguf", hf, HF_CONFIG)
        spec = tmp_path / "tiny.gguf"
    else:
        spec = tmp_path / "base"
        spec.mkdir()
        (spec / "config.json").write_text(json.dumps(HF_CONFIG))
        write_safetensors(spec / "model.safetensors", {n: ("F32", a) for n, a in hf.items()})
        PretrainedTokenizer.from_gguf_fields(**tiny_fields()).save(spec)
    with pytest.raises(UserError, match=r"tensor 'model\.layers\.1\.mlp\.up_proj\.weight' holds NaN or infinite"):
        load_pretrained_base(spec)


def test_a_gguf_tensor_type_the_reader_cannot_dequantize_is_named(tmp_path):
    write_gguf(tmp_path / "tiny.gguf", random_hf_state(MINITRAIN), HF_CONFIG, f64="blk.1.ffn_up.weight")
    with pytest.raises(UserError, match=r"tensor blk\.1\.ffn_up\.weight is stored as F64, a type the gguf package "
                                        r"cannot dequantize"):
        load_pretrained_base(tmp_path / "tiny.gguf")


def test_a_gguf_of_another_architecture_or_not_a_gguf_is_refused(tmp_path):
    import gguf

    writer = gguf.GGUFWriter(str(tmp_path / "phi.gguf"), "phi3")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    with pytest.raises(UserError, match=r"general\.architecture = 'phi3'"):
        load_pretrained_base(tmp_path / "phi.gguf")
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf at all")
    with pytest.raises(UserError, match="not a readable GGUF"):
        load_pretrained_base(tmp_path / "junk.gguf")


def test_a_gguf_whose_metadata_is_refused_is_refused_before_a_weight_is_read(tmp_path, monkeypatch):
    # issue 43: a refused GGUF was read and dequantized whole (84 s, 849 MB for a real one) before it was refused.
    import minitrain.formats.gguf_read as gguf_read

    write_gguf(tmp_path / "tiny.gguf", random_hf_state(MINITRAIN), {**HF_CONFIG, "max_position_embeddings": 0})
    read, real = [], gguf_read.dequantized
    monkeypatch.setattr(gguf_read, "dequantized", lambda path, tensor: read.append(tensor.name) or real(path, tensor))
    with pytest.raises(UserError, match="context_length = 0") as refused:
        load_pretrained_base(tmp_path / "tiny.gguf")
    assert refused.value.exit_code == 2 and read == []
