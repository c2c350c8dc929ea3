"""formats/gguf_write.py's Llama metadata read back with the `gguf` package's own reader: llama.cpp takes a head's
size as embedding_length / head_count unless `attention.key_length` / `value_length` say otherwise, so they must be
written exactly when head_dim ≠ d_model / n_head."""

import gguf
import numpy as np
import pytest

from minitrain.data.tokenizer import CharTokenizer
from minitrain.formats.gguf_vocab import char_fields
from minitrain.formats.gguf_write import write_gguf_model
from minitrain.models.llama import Llama

TINY = dict(n_layer=1, n_head=4, n_kv_head=2, d_model=16, d_ff=24, vocab_size=12, max_seq_len=16)


@pytest.mark.parametrize(("head_dim", "written"), [(6, True), (4, False), (None, False)])
def test_key_and_value_length_are_written_when_head_dim_is_not_d_model_over_n_head(tmp_path, head_dim, written):
    model = Llama(**TINY, head_dim=head_dim, rng=0)
    tokenizer = CharTokenizer(list("abc"))
    write_gguf_model(tmp_path / "m.gguf", model.config, model.state_dict(), char_fields(tokenizer, 12))
    fields = gguf.GGUFReader(tmp_path / "m.gguf").fields
    keys = ("llama.attention.key_length", "llama.attention.value_length")
    assert all((key in fields) is written for key in keys)
    size = head_dim or 16 // 4
    if written:
        assert [fields[key].contents() for key in keys] == [size, size]
    else:  # llama.cpp's default is then right
        assert fields["llama.embedding_length"].contents() // fields["llama.attention.head_count"].contents() == size
    assert fields["llama.rope.dimension_count"].contents() == size


@pytest.mark.parametrize("key, value, kind", [("gpt2.context_length", "abc", "string"),
                                              ("gpt2.attention.layer_norm_epsilon", "abc", "string"),
                                              ("gpt2.vocab_size", -1, "int32")])
def test_a_gpt2_gguf_with_metadata_of_the_wrong_type_is_one_error(tmp_path, capsys, key, value, kind):
    from minitrain.cli import main

    path = tmp_path / "bad.gguf"
    writer = gguf.GGUFWriter(str(path), "gpt2")
    for name in ("context_length", "embedding_length", "block_count", "attention.head_count", "feed_forward_length"):
        if f"gpt2.{name}" != key:
            writer.add_uint32(f"gpt2.{name}", 8)
    getattr(writer, f"add_{kind}")(key, value)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert main(["eval", str(path), "--data", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and f"GGUF metadata {key} = " in err, err
