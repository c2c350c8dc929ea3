"""Every family out: a Llama or Gemma trained from scratch on the character vocabulary exports to the Hugging Face
folder of its own transformers class (config.json, model.safetensors, generation_config.json) with a tokenizer.json
that the `tokenizers` library reads into CharTokenizer's ids, BOS first; the folder read back by minitrain's
Hugging Face loader gives the run's logits. Its GGUF says add_bos_token (it was trained with BOS first), and
minitrain reads the character GGUF of any architecture back: the same vocabulary, the same logits."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest
from fakehub import RECORDS, make_run
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import run as cli
from tokenizers import Tokenizer

from minitrain.common.errors import UserError
from minitrain.data.corpus import make_record, records_to_jsonl
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.export_gguf import export_gguf
from minitrain.hub.export_hf import export_model
from minitrain.hub.pretrained import load_pretrained_base
from minitrain.hub.sources import built, load_model
from minitrain.hub.text_models import load_text_model
from minitrain.models.registry import build_model
from minitrain.nn import inference
from minitrain.runs.model_files import save_model_file

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data" / "processed"  # the course's verb corpus and its vocabulary
SHAPE = {"n_layer": 2, "n_head": 2, "n_kv_head": 1, "d_model": 8, "d_ff": 16, "vocab_size": 24, "max_seq_len": 16}
FAMILIES = {
    "llama": ({"type": "llama", **SHAPE}, "LlamaForCausalLM"),
    "gemma3": ({"type": "gemma", **SHAPE, "head_dim": 4, "sliding_window": 4, "rope_local_theta": 100.0,
                "layer_types": ["sliding_attention", "full_attention"]}, "Gemma3ForCausalLM"),
    # a Gemma 3 as llama.cpp's gemma3 layout holds one: its local layers' base 10000, no global layer below 6
    "gemma3-llama.cpp": ({"type": "gemma", **SHAPE, "head_dim": 4, "sliding_window": 4, "rope_local_theta": 10000.0,
                          "rope_theta": 1e6, "layer_types": ["sliding_attention"] * 2}, "Gemma3ForCausalLM"),
    "gemma2": ({"type": "gemma", **SHAPE, "head_dim": 4, "qk_norm": False, "attn_logit_softcapping": 5.0,
                "final_logit_softcapping": 3.0}, "Gemma2ForCausalLM"),
}


def corpus_texts() -> list[str]:
    return [json.loads(line)["text"] for split in ("train", "val", "dev")
            for line in (CORPUS / f"{split}.jsonl").read_text("utf-8").splitlines() if line.strip()]


def logits(model, ids: list[int]) -> np.ndarray:
    with inference(model):
        return model(np.array([ids]))[0].data[0]


def scratch_run(tmp_path: Path, family: str) -> Path:
    """A run folder of a model trained from scratch (random weights) with the character vocabulary."""
    return make_run(tmp_path / family, seed=3, model=build_model(FAMILIES[family][0], rng=0).config)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_from_scratch_model_exports_to_its_own_class_and_reads_back_with_its_logits(tmp_path, family, capsys):
    run = scratch_run(tmp_path, family)
    out = tmp_path / "out"
    code, _, err = cli(["export", run, out], capsys)  # exited 1 before: "only MiniGPT has a transformers twin"
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "generation_config.json",
                                                    "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                                    "vocab.json"]
    config = json.loads((out / "config.json").read_text("utf-8"))
    assert config["architectures"] == [FAMILIES[family][1]]
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (1, 2, 0)
    source, _ = load_model(str(run))
    model_config, state, tokenizer, _ = load_pretrained_base(out)  # minitrain's own Hugging Face folder reader
    assert model_config["vocab_size"] == 24 and model_config["type"] == FAMILIES[family][0]["type"]
    chars = CharTokenizer.load(run.parent / "data" / "vocab.json")
    ids = [chars.bos_id, *chars.encode("comer|R1|comí")]
    assert tokenizer.encode("comer|R1|comí", add_special_tokens=True) == ids
    # equal up to float32 rounding: the folder spells defaults out (a Gemma's query_pre_attn_scalar = head_dim)
    assert float(np.abs(logits(built(model_config, state, str(out)), ids) - logits(source, ids)).max()) <= 1e-6
    loaded = load_text_model(str(out))  # the export is a minitrain model again: the character vocabulary
    assert loaded.kind == "minitrain" and loaded.tokenizer.chars == chars.chars


def test_the_tokenizer_json_gives_the_character_ids_on_the_verb_corpus(tmp_path):
    vocab = CharTokenizer.load(CORPUS / "vocab.json")
    config = {**FAMILIES["llama"][0], "vocab_size": vocab.vocab_size}
    save_model_file(tmp_path / "m.safetensors", build_model(config, rng=1).state_dict(), build_model(config).config)
    export_model(tmp_path / "m.safetensors", tmp_path / "out", vocab_path=CORPUS / "vocab.json")
    fast = Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    texts = corpus_texts()
    assert len(texts) > 1000 and any("ñ" in t for t in texts) and any("é" in t for t in texts)
    assert all(fast.encode(t).ids == [vocab.bos_id, *vocab.encode(t)] for t in texts)
    assert fast.decode(fast.encode(texts[0]).ids) == texts[0]


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from(["a", "b", "|", "é", "ñ", " ", "\n", "\t", "€", "😀", "\u0301"]),
               max_size=30),
       st.text(max_size=12))
def test_the_tokenizer_json_is_the_character_tokenizer_on_odd_text(known, odd):
    from minitrain.formats.hf_tokenizer import char_pretrained

    chars = CharTokenizer(sorted({"a", "b", "|", "é", "ñ", " ", "\n", "\t", "€", "😀", "\u0301"}))
    fast = char_pretrained(chars, 16).tokenizer
    assert fast.encode(known).ids == [chars.bos_id, *chars.encode(known)]
    text = known + odd
    try:
        want = [chars.bos_id, *chars.encode(text)]
    except UserError:  # a character outside the vocabulary: CharTokenizer refuses it, and so does the pipeline
        with pytest.raises(Exception, match=r"(?i)unk"):
            fast.encode(text)
        return
    assert fast.encode(text).ids == want


@pytest.mark.parametrize("family", ["minigpt", "llama", "gemma3-llama.cpp"])
def test_the_character_gguf_says_add_bos_and_reads_back_with_the_run_s_ids_and_logits(tmp_path, family, capsys):
    run = make_run(tmp_path / "m", seed=2) if family == "minigpt" else scratch_run(tmp_path, family)
    path, _ = export_gguf(run, tmp_path / "run.gguf")  # general.name: the run folder's, "run"
    reader = gguf.GGUFReader(path)
    assert reader.fields["tokenizer.ggml.add_bos_token"].contents() is True  # false before: llama.cpp lost BOS
    chars = CharTokenizer.load(run.parent / "data" / "vocab.json")
    loaded = load_text_model(str(path))  # a Llama's failed before: "tokens and merges do not fit together"
    assert loaded.kind == "minitrain" and loaded.tokenizer.chars == chars.chars
    source, _ = load_model(str(run))
    ids = [chars.bos_id, *chars.encode("vivir|P1|vivo")]
    assert float(np.abs(logits(loaded.model, ids) - logits(source, ids)).max()) <= 1e-6
    again, _ = export_gguf(path, tmp_path / "again" / "run.gguf")  # the GGUF is a source minitrain exports again
    assert again.read_bytes() == path.read_bytes()
    records = [make_record(verb, code[0], int(code[1]), form) for verb, code, form in (t.split("|") for t in RECORDS)]
    (tmp_path / "val.jsonl").write_text(records_to_jsonl(records), encoding="utf-8")
    scores = [cli(["eval", spec, "--data", tmp_path / "val.jsonl", "--json"], capsys) for spec in (run, path)]
    assert [code for code, _, _ in scores] == [0, 0], scores
    ours, theirs = (json.loads(out) for _, out, _ in scores)
    assert ours.keys() == theirs.keys() and abs(ours["loss"] - theirs["loss"]) < 1e-6
    samples = [cli(["sample", spec, "--prompt", "comer|R1|"], capsys) for spec in (run, path)]
    assert samples[0] == samples[1] and samples[0][0] == 0 and samples[0][1].startswith("comer|R1|")
    if family != "minigpt":  # and on to transformers: the folder of its class, with the character tokenizer
        export_model(path, tmp_path / "hf")
        config, state, tokenizer, _ = load_pretrained_base(tmp_path / "hf")
        assert tokenizer.encode("vivir|P1|vivo", add_special_tokens=True) == ids
        assert float(np.abs(logits(built(config, state, "hf"), ids) - logits(source, ids)).max()) <= 1e-6
        back, _ = export_gguf(tmp_path / "hf", tmp_path / "back" / "run.gguf")  # and from there to a GGUF again
        assert gguf.GGUFReader(back).fields["tokenizer.ggml.tokens"].contents() == \
            reader.fields["tokenizer.ggml.tokens"].contents()
        assert float(np.abs(logits(load_text_model(str(back)).model, ids) - logits(source, ids)).max()) <= 1e-6
