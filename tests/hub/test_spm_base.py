"""A pretrained GGUF base whose tokenizer is SentencePiece (`tokenizer.ggml.model = llama`) loads with it end to end;
one whose tokenizer model minitrain cannot build is refused before any weight is read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_hub_pretrained import HF_CONFIG, MINITRAIN, random_hf_state, write_gguf

from minitrain.common.errors import UserError
from minitrain.formats import gguf_read
from minitrain.hub.pretrained import describe_base, load_pretrained_base

SPM = Path(__file__).parents[1] / "data" / "spm"
ORACLE = json.loads((SPM / "ids.json").read_text(encoding="utf-8"))
VOCAB = 640  # the fixture vocabularies' size


def with_vocab_of(model_gguf: Path, vocab_gguf: Path, out: Path, model: str | None = None) -> Path:
    """`model_gguf` with every tokenizer.* field (and the vocabulary size) taken from `vocab_gguf`;
    `model` replaces tokenizer.ggml.model."""
    import gguf

    source, vocab = gguf.GGUFReader(str(model_gguf)), gguf.GGUFReader(str(vocab_gguf))
    arch = source.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(out), arch)
    fields = [(n, f) for n, f in source.fields.items() if not n.startswith(("tokenizer.", f"{arch}.vocab_size"))]
    fields += [(n, f) for n, f in vocab.fields.items() if n.startswith("tokenizer.")]
    for name, field in fields:
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = model if name == "tokenizer.ggml.model" and model is not None else field.contents()
        sub = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, value, field.types[0], sub)
    for t in source.tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in source.tensors:
        writer.write_tensor_data(np.asarray(t.data))
    writer.close()
    return out


def spm_base(tmp_path: Path, model: str | None = None) -> Path:
    write_gguf(tmp_path / "gpt2-vocab.gguf", random_hf_state({**MINITRAIN, "vocab_size": VOCAB}),
               {**HF_CONFIG, "vocab_size": VOCAB})
    return with_vocab_of(tmp_path / "gpt2-vocab.gguf", SPM / "llama.gguf", tmp_path / "spm.gguf", model)


def test_a_sentencepiece_gguf_base_loads_with_its_own_tokenizer(tmp_path):
    path = spm_base(tmp_path)
    model, state, tok, facts = load_pretrained_base(path)
    assert model == {**MINITRAIN, "vocab_size": VOCAB} and facts["source"] == "gguf" and state
    texts = [t.format(**ORACLE["llama"]["specials"]) for t in ORACLE["texts"]]
    for text, want in zip(texts, ORACLE["llama"]["gguf"]["rows"], strict=True):
        assert tok.encode(text, add_special_tokens=True) == want["ids"], text
    assert describe_base(path)[1].encode("hola", add_special_tokens=True) == tok.encode("hola", True)


@pytest.mark.parametrize("kind", ["bert", "rwkv"])
def test_a_tokenizer_model_minitrain_cannot_build_is_refused_before_any_weight(tmp_path, monkeypatch, kind):
    path = spm_base(tmp_path, model=kind)

    def no_tensor(*_):
        raise AssertionError("a tensor was read")

    monkeypatch.setattr(gguf_read, "dequantized", no_tensor)
    with pytest.raises(UserError, match=rf"spm\.gguf \(tokenizer\): tokenizer\.ggml\.model = '{kind}': "
                                        r"minitrain builds the tokenizers of 'gpt2' and 'llama' GGUF files only") as e:
        load_pretrained_base(path)
    assert e.value.exit_code == 2


def test_the_command_line_refuses_it_with_one_error_line_and_exit_2(tmp_path):
    path = spm_base(tmp_path, model="bert")
    (tmp_path / "text.txt").write_text("hola\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "minitrain", "eval", str(path), "--data", "text.txt"],
                          capture_output=True, text=True, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "'bert'" in lines[0]
    assert str(path) in lines[0] and "Traceback" not in done.stderr


def test_a_sentencepiece_gguf_written_again_keeps_its_tokenizer(tmp_path):
    """export --format gguf of a SentencePiece GGUF: scores, token types, add_bos / add_space_prefix carried,
    so minitrain (and llama.cpp, which ranks merges by the scores) reads the same tokenizer back."""
    from minitrain.formats.gguf_write import write_gguf_model
    from minitrain.hub.export_gguf import gguf_source

    source = gguf_source(str(spm_base(tmp_path)))
    write_gguf_model(tmp_path / "again.gguf", source.model_config, source.state, source.fields)
    path = tmp_path / "again.gguf"
    again = gguf_read.tokenizer_fields(gguf_read.open_gguf(path), path)
    original = gguf_read.tokenizer_fields(gguf_read.open_gguf(SPM / "llama.gguf"), SPM / "llama.gguf")
    for key in ("tokens", "scores", "token_types", "model", "bos_id", "eos_id", "unk_id", "add_bos",
                "add_space_prefix"):
        assert again[key] == original[key], key
    tok = load_pretrained_base(path)[2]
    texts = [t.format(**ORACLE["llama"]["specials"]) for t in ORACLE["texts"]]
    assert [tok.encode(t, True) for t in texts] == [row["ids"] for row in ORACLE["llama"]["gguf"]["rows"]]
