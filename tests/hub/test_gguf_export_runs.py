"""GGUF export of trained runs and of a GPT-2 base: a LoRA run on a character MiniGPT and one on a Llama base are
written merged (a GGUF is a whole model) and load back with the run's own logits; a GPT-2 with its own BPE is
written in the gpt2 layout with that BPE."""

from __future__ import annotations

import numpy as np
import pytest
from fakehub import RECORDS, make_run
from test_gpt2_base import gpt2_folder
from test_lora_run import lora_config
from test_lora_run import train as train_char
from test_pretrained_runs import CHATS, chat_lines, config_text
from test_pretrained_runs import train as train_text

from minitrain.data.corpus import make_record, records_to_jsonl
from minitrain.formats.gguf_read import open_gguf
from minitrain.formats.hf_config import hf_shapes
from minitrain.hub.export_gguf import export_gguf
from minitrain.hub.pretrained import load_pretrained_base
from minitrain.hub.pretrained_runs import run_model, run_state
from minitrain.hub.sources import load_model
from minitrain.hub.text_models import load_text_model
from minitrain.lora import merge_adapters
from minitrain.models.registry import FAMILIES
from minitrain.nn import inference

pytestmark = pytest.mark.slow


def export_unbuilt(monkeypatch, source, out, *args):
    """`export_gguf` with every family's constructor refused: the GGUF is written from the state it loads."""
    def refuse(*_, **__):
        raise AssertionError("export built a model")

    with monkeypatch.context() as patched:
        for family in FAMILIES.values():
            patched.setattr(family.model, "__init__", refuse)
        return export_gguf(source, out, *args)


def logits(model, ids: list[int]) -> np.ndarray:
    """The model's logits for one sequence, in eval mode (no dropout) and without a tape."""
    with inference(model):
        return model(np.array([ids]))[0].data[0]


def test_a_lora_run_on_a_character_model_is_written_merged(tmp_path, capsys, monkeypatch):
    base = make_run(tmp_path / "base")
    records = [make_record(verb, code[0], int(code[1]), form) for verb, code, form in (t.split("|") for t in RECORDS)]
    for split, chosen in (("train", records[:3]), ("val", records[3:])):
        (tmp_path / "base" / "data" / f"{split}.jsonl").write_text(records_to_jsonl(chosen), encoding="utf-8")
    train_char(lora_config(tmp_path, base), tmp_path / "lora", capsys)
    path, _ = export_unbuilt(monkeypatch, tmp_path / "lora", tmp_path / "lora.gguf")
    names = [t.name for t in open_gguf(path).tensors]
    assert not any("lora" in n for n in names) and len(names) == 2 + 12 * 2 + 2 + 1  # MiniGPT's, and output
    adapted, _ = load_model(str(tmp_path / "lora"))  # the base with the adapters merged in
    plain, _ = load_model(str(base))
    ids = [1, 3, 4, 5, 6]
    loaded = load_text_model(str(path)).model
    assert float(np.abs(logits(loaded, ids) - logits(adapted, ids)).max()) <= 1e-5
    assert float(np.abs(logits(loaded, ids) - logits(plain, ids)).max()) > 1e-4  # the adapters changed something


def test_a_lora_run_on_a_llama_base_is_written_merged_with_the_base_s_tokenizer(tmp_path, monkeypatch):
    from test_hub_pretrained import hf_folder

    hf_folder(tmp_path / "base", bf16=False)
    (tmp_path / "train.jsonl").write_text(chat_lines(CHATS * 2), encoding="utf-8")
    (tmp_path / "val.jsonl").write_text(chat_lines(CHATS[:2]), encoding="utf-8")
    train_text(tmp_path, config_text(tmp_path, tmp_path / "base"), "run")
    path, _ = export_unbuilt(monkeypatch, tmp_path / "run", tmp_path / "run.gguf")
    model, tokenizer = run_model(tmp_path / "run")
    model = merge_adapters(model)
    folded_config, folded, _ = run_state(tmp_path / "run")  # what export wrote from: the merged model, unbuilt
    assert folded_config == model.config and list(folded) and set(folded) == set(model.state_dict())
    assert all(np.array_equal(folded[name], array) for name, array in model.state_dict().items())
    config, state, again, _ = load_pretrained_base(path)
    assert "lora" not in config and config["max_seq_len"] == 64  # the base's context, as the HF export keeps it
    assert len(state) == len(hf_shapes(config))
    ids = tokenizer.encode("hola como hola")
    assert again.encode("hola como hola") == ids and again.chat_template == tokenizer.chat_template
    assert float(np.abs(logits(load_text_model(str(path)).model, ids) - logits(model, ids)).max()) <= 1e-5


def test_a_gpt2_base_with_its_own_bpe_is_written_in_the_gpt2_layout_with_that_bpe(tmp_path):
    gpt2_folder(tmp_path / "gpt2")
    path, _ = export_gguf(tmp_path / "gpt2", tmp_path / "gpt2.gguf", "f16")
    reader = open_gguf(path)
    assert reader.fields["general.architecture"].contents() == "gpt2"
    source, loaded = load_text_model(str(tmp_path / "gpt2")), load_text_model(str(path))
    assert loaded.kind == "pretrained"
    ids = source.tokenizer.encode("hola como")
    assert loaded.tokenizer.encode("hola como") == ids
    want = logits(source.model, ids)
    assert float(np.abs(logits(loaded.model, ids) - want).max()) <= 2e-3 * float(np.abs(want).max())


def test_a_gpt2_base_gives_the_same_bytes_every_time(tmp_path):
    # The tensors were written in the order the safetensors reader gave them, which varies from call to call.
    gpt2_folder(tmp_path / "gpt2")
    first, _ = export_gguf(tmp_path / "gpt2", tmp_path / "a.gguf", "f16")
    again, _ = export_gguf(tmp_path / "gpt2", tmp_path / "b.gguf", "f16")
    assert first.read_bytes() == again.read_bytes()
    assert [t.name for t in open_gguf(first).tensors][:2] == ["token_embd.weight", "position_embd.weight"]
