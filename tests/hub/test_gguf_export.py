"""GGUF export (`minitrain export SOURCE OUT.gguf --format gguf`): every file read back with `gguf.GGUFReader` tensor
for tensor and key for key, against a direct reading of llama.cpp's layouts (its converter's names, the q/k row
permutation, GPT-2's transposed projections, the metadata keys); minitrain loads its own export with the run's
logits (f32: exactly; f16 and q8_0 within a stated tolerance); what a GGUF cannot hold is refused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gguf
import numpy as np
import pytest
from test_cli import run as cli
from test_hub_pretrained import HF_CONFIG, MINITRAIN, hf_folder, random_hf_state, write_gguf

from minitrain.common.errors import UserError
from minitrain.data.tokenizer import CharTokenizer
from minitrain.formats.gguf_read import permute_rope_rows, unpermute_rope_rows
from minitrain.formats.gguf_vocab import char_fields, char_vocab, spell
from minitrain.formats.gguf_write import write_gguf_model
from minitrain.hub.export_gguf import export_gguf
from minitrain.hub.pretrained import load_pretrained_base
from minitrain.hub.sources import load_model
from minitrain.hub.text_models import load_text_model
from minitrain.models.registry import build_model
from minitrain.nn import inference

ROOT = Path(__file__).resolve().parents[2]
LAB01 = ROOT / "models" / "minigpt-phase18-64ab16764a406b88.safetensors"  # lab 01's committed model (d_model 64)
VOCAB = ROOT / "data" / "processed" / "vocab.json"
TABLE = ROOT / "experiments" / "digits-mlp" / "models" / "sequential-0b60aea68a1fadd0.safetensors"
MLP_LM = ROOT / "models" / "mlp-lm-f01987eef0d24fef.safetensors"


def field(reader: gguf.GGUFReader, key: str):
    return reader.fields[key].contents()


def tensors(reader: gguf.GGUFReader) -> dict[str, np.ndarray]:
    """Every tensor of the file as NumPy (out, in), dequantized: what llama.cpp reads."""
    from gguf.quants import dequantize

    return {t.name: np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(tuple(reversed(t.shape)))
            for t in reader.tensors}


def logits(model, ids: list[int]) -> np.ndarray:
    """The model's logits for one sequence, in eval mode (no dropout) and without a tape."""
    with inference(model):
        return model(np.array([ids]))[0].data[0]


# --- MiniGPT: llama.cpp's gpt2 layout ---------------------------------------------------------------------------

def test_a_minigpt_run_is_written_in_the_gpt2_layout_tensor_for_tensor(run, tmp_path):
    path, kinds = export_gguf(run, tmp_path / "m.gguf")
    model, _ = load_model(str(run))
    state, config = model.state_dict(), model.config
    reader = gguf.GGUFReader(path)
    assert field(reader, "general.architecture") == "gpt2" and field(reader, "general.file_type") == 0
    expected_keys = {"gpt2.context_length": 16, "gpt2.embedding_length": 8, "gpt2.block_count": 2,
                     "gpt2.feed_forward_length": 16, "gpt2.attention.head_count": 2, "gpt2.vocab_size": 24}
    assert {k: field(reader, k) for k in expected_keys} == expected_keys
    assert abs(field(reader, "gpt2.attention.layer_norm_epsilon") - 1e-5) < 1e-12
    got = tensors(reader)
    # A direct reading of convert_hf_to_gguf.py's GPT2Model: wte/wpe as they are, Conv1D weights transposed.
    want = {"token_embd.weight": state["transformer.wte.weight"],
            "position_embd.weight": state["transformer.wpe.weight"],
            "output_norm.weight": state["transformer.ln_f.weight"], "output_norm.bias": state["transformer.ln_f.bias"],
            "output.weight": state["transformer.wte.weight"]}
    for i in range(config["n_layer"]):
        h = f"transformer.h.{i}"
        want.update({f"blk.{i}.attn_norm.weight": state[f"{h}.ln_1.weight"],
                     f"blk.{i}.attn_norm.bias": state[f"{h}.ln_1.bias"],
                     f"blk.{i}.attn_qkv.weight": state[f"{h}.attn.c_attn.weight"].T,
                     f"blk.{i}.attn_qkv.bias": state[f"{h}.attn.c_attn.bias"],
                     f"blk.{i}.attn_output.weight": state[f"{h}.attn.c_proj.weight"].T,
                     f"blk.{i}.attn_output.bias": state[f"{h}.attn.c_proj.bias"],
                     f"blk.{i}.ffn_norm.weight": state[f"{h}.ln_2.weight"],
                     f"blk.{i}.ffn_norm.bias": state[f"{h}.ln_2.bias"],
                     f"blk.{i}.ffn_up.weight": state[f"{h}.mlp.c_fc.weight"].T,
                     f"blk.{i}.ffn_up.bias": state[f"{h}.mlp.c_fc.bias"],
                     f"blk.{i}.ffn_down.weight": state[f"{h}.mlp.c_proj.weight"].T,
                     f"blk.{i}.ffn_down.bias": state[f"{h}.mlp.c_proj.bias"]})
    assert sorted(got) == sorted(want) and kinds == {"F32": len(want)}
    for name, w in want.items():
        assert got[name].shape == w.shape and np.array_equal(got[name], w), name


def test_the_character_vocabulary_is_its_tokenizer(run, tmp_path):
    path, _ = export_gguf(run, tmp_path / "m.gguf")
    tokenizer = CharTokenizer.load(run.parent / "data" / "vocab.json")
    reader = gguf.GGUFReader(path)
    tokens = field(reader, "tokenizer.ggml.tokens")
    assert field(reader, "tokenizer.ggml.model") == "gpt2" and len(tokens) == 24  # one per embedding row
    assert tokens[:3] == ["<pad>", "<bos>", "<eos>"]
    # each character spelled in GPT-2's byte alphabet: 'í' is the bytes C3 AD, 0xAD (not printable) moved to 'Ń'
    assert tokens[3:tokenizer.vocab_size] == [spell(c) for c in tokenizer.chars] and spell("í") == "ÃŃ"
    assert "Ã Ń" in field(reader, "tokenizer.ggml.merges")
    types = field(reader, "tokenizer.ggml.token_type")
    n = tokenizer.vocab_size
    assert types[:3] == [3, 3, 3] and set(types[3:n]) == {1} and set(types[n:]) == {5}
    ids = {k: field(reader, f"tokenizer.ggml.{k}_token_id") for k in ("padding", "bos", "eos")}
    assert ids == {"padding": 0, "bos": 1, "eos": 2}
    assert load_text_model(str(path)).tokenizer.chars == tokenizer.chars


@pytest.mark.parametrize("chars", [["a", "b", "|"], ["a", "é", "ñ", "€"]])
def test_char_fields_and_char_vocab_are_inverse(chars):
    tokenizer = CharTokenizer(sorted(chars))
    fields = char_fields(tokenizer, tokenizer.vocab_size + 2)
    assert char_vocab(fields).chars == tokenizer.chars
    assert fields["merges"]  # llama.cpp needs the key: an ASCII vocabulary gets one inert merge of two specials
    spelled_euro = spell("€")  # three bytes: two merges, left to right
    assert "€" not in chars or [f"{spelled_euro[:1]} {spelled_euro[1]}",
                                f"{spelled_euro[:2]} {spelled_euro[2]}"] == fields["merges"][-2:]


def test_lab01_loads_back_with_the_model_file_s_logits(tmp_path):
    tokenizer = CharTokenizer.load(VOCAB)
    reference, _ = load_model(str(LAB01))
    ids = [tokenizer.bos_id, *tokenizer.encode("caminar|P1|camino")]
    want = logits(reference, ids)
    scale = float(np.abs(want).max())
    for dtype, tolerance in (("f32", 1e-5), ("f16", 2e-3 * scale), ("q8_0", 3e-2 * scale), ("q4_k_m", 0.2 * scale)):
        path, kinds = export_gguf(LAB01, tmp_path / f"lab01-{dtype}.gguf", dtype, str(VOCAB))
        loaded = load_text_model(str(path))
        assert loaded.kind == "minitrain" and loaded.tokenizer.chars == tokenizer.chars
        assert float(np.abs(logits(loaded.model, ids) - want).max()) <= tolerance, dtype
        # q4_k_m, rows of 64 and 256 (ffn_down): Q4_K falls back to Q5_0, Q6_K (layer 1's attn_qkv) to Q8_0; the
        # tied embedding and its output.weight copy both Q8_0; position_embd F16.
        assert kinds == {"f32": {"F32": 29}, "f16": {"F16": 11, "F32": 18}, "q8_0": {"F32": 18, "Q8_0": 11},
                         "q4_k_m": {"F16": 1, "F32": 18, "Q4_K": 1, "Q5_0": 5, "Q6_K": 1, "Q8_0": 3}}[dtype]
    f32 = (tmp_path / "lab01-f32.gguf").stat().st_size
    assert (tmp_path / "lab01-q8_0.gguf").stat().st_size < (tmp_path / "lab01-f16.gguf").stat().st_size < f32


def test_the_same_model_gives_the_same_bytes_and_a_gguf_source_exports_to_itself(run, tmp_path):
    first, _ = export_gguf(run, tmp_path / "a" / "run.gguf", "q8_0")
    second, _ = export_gguf(run, tmp_path / "b" / "run.gguf", "q8_0")
    assert first.read_bytes() == second.read_bytes()
    again, _ = export_gguf(first, tmp_path / "c" / "run.gguf", "q8_0")  # re-quantizing Q8_0 values is exact
    assert again.read_bytes() == first.read_bytes()


# --- the Llama family -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tied", [True, False])
def test_a_llama_base_is_written_with_llama_cpp_names_permuted_q_k_and_its_metadata(tmp_path, tied):
    hf = hf_folder(tmp_path / "base", tied=tied)
    path, _ = export_gguf(tmp_path / "base", tmp_path / "base.gguf")
    reader = gguf.GGUFReader(path)
    keys = {"general.architecture": "llama", "llama.context_length": 64, "llama.embedding_length": 32,
            "llama.block_count": 2, "llama.feed_forward_length": 64, "llama.attention.head_count": 4,
            "llama.attention.head_count_kv": 2, "llama.rope.dimension_count": 8, "llama.vocab_size": 266}
    assert {k: field(reader, k) for k in keys} == keys
    assert field(reader, "llama.rope.freq_base") == 10000.0
    assert abs(field(reader, "llama.attention.layer_norm_rms_epsilon") - 1e-5) < 1e-12
    got = tensors(reader)
    assert ("output.weight" in got) is not tied
    for layer in range(2):
        q, k = hf[f"model.layers.{layer}.self_attn.q_proj.weight"], hf[f"model.layers.{layer}.self_attn.k_proj.weight"]
        # llama.cpp's converter: w.reshape(H, 2, d/2, in).swapaxes(1, 2).reshape(out, in), H the projection's heads
        assert np.array_equal(got[f"blk.{layer}.attn_q.weight"], q.reshape(4, 2, 4, 32).swapaxes(1, 2).reshape(32, 32))
        assert np.array_equal(got[f"blk.{layer}.attn_k.weight"], k.reshape(2, 2, 4, 32).swapaxes(1, 2).reshape(16, 32))
        assert np.array_equal(got[f"blk.{layer}.ffn_gate.weight"], hf[f"model.layers.{layer}.mlp.gate_proj.weight"])
        assert np.array_equal(got[f"blk.{layer}.attn_norm.weight"], hf[f"model.layers.{layer}.input_layernorm.weight"])
    assert np.array_equal(got["token_embd.weight"], hf["model.embed_tokens.weight"])
    assert len(got) == len(hf)


def test_a_llama_export_carries_the_base_s_tokenizer(tmp_path):
    from test_pretrained_tokenizer import tiny_fields

    hf_folder(tmp_path / "base")
    path, _ = export_gguf(tmp_path / "base", tmp_path / "base.gguf")
    reader, fields = gguf.GGUFReader(path), tiny_fields()
    assert field(reader, "tokenizer.ggml.model") == "gpt2"
    assert field(reader, "tokenizer.ggml.tokens") == fields["tokens"]
    assert field(reader, "tokenizer.ggml.merges") == fields["merges"]
    assert field(reader, "tokenizer.ggml.token_type") == fields["token_types"]
    assert field(reader, "tokenizer.chat_template") == fields["chat_template"]
    assert [field(reader, f"tokenizer.ggml.{k}_token_id") for k in ("bos", "eos", "padding", "unknown")] == [1, 2, 2, 0]
    base, again = load_pretrained_base(tmp_path / "base")[2], load_pretrained_base(path)[2]
    text = "hola como <|im_start|> hola"
    assert again.encode(text) == base.encode(text) and again.chat_template == base.chat_template


@pytest.mark.parametrize("source", ["folder", "gguf"])
def test_minitrain_loads_its_llama_export_with_the_source_s_logits(tmp_path, source):
    if source == "folder":
        hf_folder(tmp_path / "base", tied=False)
        spec = tmp_path / "base"
    else:  # a GGUF as llama.cpp's converter writes one (Q8_0 in layer 0): re-exported f32, its values kept
        spec = tmp_path / "tiny.gguf"
        write_gguf(spec, random_hf_state(MINITRAIN), HF_CONFIG)
    path, _ = export_gguf(spec, tmp_path / "out.gguf")
    theirs, ours = load_pretrained_base(spec), load_pretrained_base(path)
    assert ours[0] == theirs[0]
    assert all(np.array_equal(ours[1][n], theirs[1][n]) for n in theirs[1]) and ours[1].keys() == theirs[1].keys()
    ids = theirs[2].encode("hola como hola")
    want = logits(load_text_model(str(spec)).model, ids)
    assert float(np.abs(logits(load_text_model(str(path)).model, ids) - want).max()) <= 1e-5
    scale = float(np.abs(want).max())
    for dtype, tolerance in (("f16", 2e-3 * scale), ("q8_0", 5e-2 * scale)):
        quantized, _ = export_gguf(spec, tmp_path / f"out-{dtype}.gguf", dtype)
        assert float(np.abs(logits(load_text_model(str(quantized)).model, ids) - want).max()) <= tolerance, dtype


def test_a_model_with_q_k_v_biases_is_written_as_qwen2_without_the_permutation(tmp_path):
    from test_pretrained_tokenizer import tiny_fields

    config = {**MINITRAIN, "attention_bias": True}
    model = build_model(config, rng=3)
    fields = {**tiny_fields(), "model": "gpt2"}
    write_gguf_model(tmp_path / "q.gguf", config, model.state_dict(), fields)
    reader = gguf.GGUFReader(tmp_path / "q.gguf")
    assert field(reader, "general.architecture") == "qwen2"
    got = tensors(reader)
    state = model.state_dict()
    assert np.array_equal(got["blk.0.attn_q.weight"], state["model.layers.0.self_attn.q_proj.weight"].T)
    assert np.array_equal(got["blk.1.attn_k.bias"], state["model.layers.1.self_attn.k_proj.bias"])
    again = load_pretrained_base(tmp_path / "q.gguf")
    assert again[0] == config and all(np.array_equal(again[1][n], state[n]) for n in state)


@pytest.mark.parametrize("shape", [(32, 32), (16, 32), (8, 5)])
@pytest.mark.parametrize("heads", [1, 2, 4])
def test_permute_and_unpermute_are_inverse(shape, heads):
    w = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    assert np.array_equal(unpermute_rope_rows(permute_rope_rows(w, heads), heads), w)
    assert np.array_equal(permute_rope_rows(w, heads)[1], w[shape[0] // heads // 2])  # pair (x0, x_{d/2})


# --- refusals and the commands ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("source", "message"), [
    (TABLE, "model.type sequential cannot be written as a GGUF (llama.cpp has no layout for it; only minigpt, llama, "
            "gemma can)"),
    (MLP_LM, "model.type mlp_lm cannot be written as a GGUF (llama.cpp has no layout for it; only minigpt, llama, "
             "gemma can)"),
])
def test_a_model_llama_cpp_has_no_layout_for_is_refused_with_the_reason(tmp_path, capsys, source, message):
    code, _, err = cli(["export", source, tmp_path / "x.gguf", "--format", "gguf", "--vocab", VOCAB], capsys)
    assert code == 2 and message in err and err.startswith("error: ") and "Traceback" not in err
    assert not (tmp_path / "x.gguf").exists() and list(tmp_path.iterdir()) == []


def test_what_the_writer_cannot_express_is_refused(tmp_path):
    scaled = {**MINITRAIN, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                            "high_freq_factor": 4.0, "original_max_position_embeddings": 32}}
    with pytest.raises(UserError, match=re.escape("Llama 3 RoPE scaling: llama.cpp keeps it as a rope_freqs tensor")):
        write_gguf_model(tmp_path / "s.gguf", scaled, build_model(scaled).state_dict(), {})
    with pytest.raises(UserError, match=re.escape("attn_scale 1: llama.cpp's gpt2 scales attention by 1/sqrt")):
        from minitrain.hub.export_gguf import check_gguf_family

        check_gguf_family({"n_layer": 1, "attn_scale": 1.0}, "m")
    assert not (tmp_path / "s.gguf").exists()


def test_the_export_command_writes_a_gguf_and_refuses_bad_options(run, tmp_path, capsys):
    code, out, err = cli(["export", run, tmp_path / "m.gguf", "--format", "gguf", "--dtype", "f16"], capsys)
    assert code == 0, err
    assert out == f"{tmp_path / 'm.gguf'}  (11 F16, 18 F32 tensors)\n"
    code, _, err = cli(["export", run, tmp_path / "hf", "--dtype", "f16"], capsys)
    assert code == 2 and "only a GGUF export (--format gguf) stores other dtypes" in err
    (tmp_path / "folder.gguf").mkdir()
    code, _, err = cli(["export", run, tmp_path / "folder.gguf", "--format", "gguf"], capsys)
    assert code == 2 and "is a folder; give a file name" in err
    code, _, err = cli(["export", run, tmp_path / "r.gguf", "--format", "gguf", "--repo", "a/b"], capsys)
    assert code == 2 and "a GGUF has none" in err


def test_sample_and_eval_read_a_minigpt_gguf_as_its_run(tmp_path, capsys):
    path, _ = export_gguf(LAB01, tmp_path / "lab01.gguf", vocab_path=str(VOCAB))
    code, from_gguf, err = cli(["sample", path, "--prompt", "caminar|P1|"], capsys)
    assert code == 0, err
    code, from_file, err = cli(["sample", LAB01, "--prompt", "caminar|P1|", "--vocab", VOCAB], capsys)
    assert code == 0 and from_gguf == from_file and from_gguf.startswith("caminar|P1|")
    data = tmp_path / "val.jsonl"
    data.write_text("".join(line for line in (ROOT / "data" / "processed" / "val.jsonl").open()
                            if json.loads(line)["verb"] == "caminar"))
    code, out, err = cli(["eval", path, "--data", data, "--json"], capsys)
    code2, out2, _ = cli(["eval", LAB01, "--data", data, "--json", "--vocab", VOCAB], capsys)
    assert code == code2 == 0, err
    assert abs(json.loads(out)["loss"] - json.loads(out2)["loss"]) < 1e-6


def test_publish_dry_run_lists_one_gguf_file(run, capsys):
    from minitrain.hub.upload import publish

    lines: list[str] = []
    publish(run, "alice/tiny", dry_run=True, log=lines.append, model_format="gguf", dtype="q8_0")
    assert len(lines) == 2 and lines[1].strip().startswith("tiny-q8_0.gguf  (")
    code, _, err = cli(["publish", "--repo", "alice/tiny", run, "--dry-run", "--dtype", "f16"], capsys)
    assert code == 2 and "only a GGUF (--format gguf) stores other dtypes" in err


# --- YAML: output.model.format gguf ------------------------------------------------------------------------------

def test_output_model_format_gguf_writes_the_final_model_as_a_gguf_too(tmp_path, capsys, monkeypatch):
    from minitrain.course.fixtures import write_tiny_run

    monkeypatch.delenv("MINITRAIN_MODELS_DIR", raising=False)
    config = write_tiny_run(tmp_path, "output: {model: {format: gguf}}\n", plots=True)  # the spec's spelling
    code, out, err = cli(["train", config, "--out-dir", tmp_path / "run", "--quiet",
                          "--set", "output.gguf_dtype=f16"], capsys)
    assert code == 0, err
    model_path = Path(json.loads((tmp_path / "run" / "results.json").read_text())["model_path"])
    written = model_path.with_suffix(".gguf")
    assert f"  gguf: {written}" in out
    export_gguf(tmp_path / "run", tmp_path / "again.gguf", "f16")  # what `minitrain export` writes of the run
    assert written.read_bytes() == (tmp_path / "again.gguf").read_bytes()
    assert field(gguf.GGUFReader(written), "general.file_type") == 1


def test_output_model_format_gguf_of_a_table_model_is_refused_before_training(tmp_path, capsys):
    from test_table_runs import CONFIG, write_config

    config = write_config(tmp_path, {**CONFIG, "output": {"model_format": "gguf"}})
    code, _, err = cli(["validate", config], capsys)
    assert code == 2 and "output.model_format: gguf: model.type sequential cannot be written as a GGUF" in err
    code, _, err = cli(["train", config, "--out-dir", tmp_path / "run", "--quiet"], capsys)
    assert code == 2 and "model.type sequential" in err  # the same rule, before anything is trained
    assert not (tmp_path / "run").exists()


def test_publish_format_gguf_uploads_the_one_file_export_writes(run, tmp_path, monkeypatch, capsys):
    from fakehub import serving

    token = "hf_ggufPublishToken7Zq"
    with serving(monkeypatch, tmp_path / "hf", token, {token: "alice"}) as hub:
        code, out, err = cli(["publish", "--repo", "alice/tiny", run, "--format", "gguf", "--dtype", "f16"], capsys)
    assert code == 0, err
    assert f"Published: {hub.url}/alice/tiny" in out
    export_gguf(run, tmp_path / "local.gguf", "f16")
    assert hub.repos["alice/tiny"].files == {"tiny-f16.gguf": (tmp_path / "local.gguf").read_bytes()}


@pytest.mark.parametrize("arch, key", [("gpt2", "gpt2.context_length"), ("llama", "llama.attention.head_count")])
def test_a_gguf_without_a_key_the_model_needs_names_it(tmp_path, arch, key):
    from minitrain.formats.gguf_gpt2 import read_gpt2_gguf
    from minitrain.formats.gguf_read import read_gguf

    writer = gguf.GGUFWriter(str(tmp_path / "bare.gguf"), arch)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(UserError, match=re.escape(f"bare.gguf: the GGUF lacks {key}")):
        (read_gpt2_gguf if arch == "gpt2" else read_gguf)(tmp_path / "bare.gguf")
