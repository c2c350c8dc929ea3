"""formats/gguf_write.py's Gemma layouts (llama.cpp's gemma2 / gemma3), checked from the file itself: the `gguf`
package's own reader sees every norm stored as 1 + w (llama.cpp's RMSNorm multiplies by the stored weight), no
q/k row permutation, the window and soft-caps as metadata; minitrain reads the file back into the same network
(logits equal); and a model whose layer pattern, local RoPE base or score scale llama.cpp hard-codes otherwise is
refused, naming the key, with nothing written and an existing file left as it was."""

import gguf
import numpy as np
import pytest

from minitrain.common.errors import UserError
from minitrain.data.tokenizer import CharTokenizer
from minitrain.formats.gguf_read import read_gguf
from minitrain.formats.gguf_vocab import char_fields
from minitrain.formats.gguf_write import write_gguf_model
from minitrain.formats.hf_config import from_hf_config, from_hf_state
from minitrain.models.gemma import Gemma

S, F = "sliding_attention", "full_attention"
TOKENIZER = CharTokenizer(list("abcdefgh"))
GEMMA3 = dict(n_layer=6, n_head=4, n_kv_head=2, d_model=32, d_ff=48, vocab_size=TOKENIZER.vocab_size, max_seq_len=32,
              head_dim=16, rope_theta=1e6, rope_local_theta=10000.0, sliding_window=4, layer_types=[S] * 5 + [F])
GEMMA2 = dict(GEMMA3, qk_norm=False, rope_theta=10000.0, rope_local_theta=None, layer_types=[S, F] * 3,
              attn_logit_softcapping=5.0, final_logit_softcapping=3.0)


def random_gemma(keys: dict) -> Gemma:
    """A Gemma whose every weight (norms too, so 1 + w is not 1) is drawn at random."""
    model, rng = Gemma(**keys, rng=0), np.random.default_rng(1)
    for _, p in model.named_parameters():
        p.data[...] = rng.normal(0.0, 0.1, p.data.shape)
    return model


@pytest.mark.parametrize(("keys", "arch"), [(GEMMA3, "gemma3"), (GEMMA2, "gemma2")])
def test_a_gemma_gguf_holds_its_norms_as_one_plus_w_and_reads_back_into_the_same_network(tmp_path, keys, arch):
    model = random_gemma(keys)
    path = tmp_path / "m.gguf"
    write_gguf_model(path, model.config, model.state_dict(), char_fields(TOKENIZER, TOKENIZER.vocab_size))
    reader = gguf.GGUFReader(path)
    assert reader.fields["general.architecture"].contents() == arch
    assert reader.fields[f"{arch}.attention.sliding_window"].contents() == 4
    stored = {t.name: np.asarray(t.data, dtype=np.float32) for t in reader.tensors}
    layer = model.model.layers[0]
    np.testing.assert_array_equal(stored["blk.0.post_ffw_norm.weight"],
                                  layer.post_feedforward_layernorm.weight.data + np.float32(1))
    np.testing.assert_array_equal(stored["blk.0.attn_q.weight"], layer.self_attn.q_proj.weight.data.T)  # no permute
    if arch == "gemma2":
        assert reader.fields["gemma2.attn_logit_softcapping"].contents() == 5.0
        assert reader.fields["gemma2.final_logit_softcapping"].contents() == 3.0
    contents = read_gguf(path)
    config, _ = from_hf_config(contents.config, "test")
    back = Gemma(**{k: v for k, v in config.items() if k != "type"}, rng=0)
    back.load_state_dict(from_hf_state(dict(contents.state), config, "test"))
    idx = np.random.default_rng(2).integers(0, TOKENIZER.vocab_size, (2, 12))  # longer than the window
    np.testing.assert_allclose(back.logits(idx).data, model.logits(idx).data, rtol=0, atol=1e-5)


@pytest.mark.parametrize(("change", "key"), [({"layer_types": [S, F] * 3}, "layer_types"),
                                             ({"rope_local_theta": 500.0}, "rope_local_theta"),
                                             ({"query_pre_attn_scalar": 64.0}, "query_pre_attn_scalar")])
def test_what_llama_cpp_hard_codes_otherwise_is_refused_and_nothing_is_replaced(tmp_path, change, key):
    model = random_gemma({**GEMMA3, **change})
    path = tmp_path / "m.gguf"
    path.write_bytes(b"an earlier export")
    with pytest.raises(UserError, match=rf"model\.{key} = .*llama\.cpp's gemma3 layout cannot hold it"):
        write_gguf_model(path, model.config, model.state_dict(), char_fields(TOKENIZER, TOKENIZER.vocab_size))
    assert path.read_bytes() == b"an earlier export"
    assert [p.name for p in tmp_path.iterdir()] == ["m.gguf"]  # no temporary file left


def test_a_gemma_3_with_linear_rope_scaling_is_written_with_it_and_reads_back_the_same(tmp_path):
    """Gemma 3 4B+ scales its global layers' RoPE linearly: llama.cpp stores rope.scaling.type / factor."""
    model = random_gemma({**GEMMA3, "rope_scaling": {"rope_type": "linear", "factor": 8.0}})
    path = tmp_path / "m.gguf"
    write_gguf_model(path, model.config, model.state_dict(), char_fields(TOKENIZER, TOKENIZER.vocab_size))
    reader = gguf.GGUFReader(path)
    assert reader.fields["gemma3.rope.scaling.type"].contents() == "linear"
    assert reader.fields["gemma3.rope.scaling.factor"].contents() == 8.0
    contents = read_gguf(path)
    config, _ = from_hf_config(contents.config, "test")
    assert config["rope_scaling"] == {"rope_type": "linear", "factor": 8.0}


def test_local_layers_rotate_unscaled_when_only_the_global_base_is_given():
    """transformers scales only Gemma's global layers: rope_scaling without rope_local_theta leaves the sliding
    layers at rope_theta, the same network as naming that base for them."""
    scaled = {**GEMMA3, "rope_theta": 1e4, "rope_local_theta": None, "rope_scaling": {"rope_type": "linear",
                                                                                        "factor": 8.0}}
    implicit, explicit = random_gemma(scaled), random_gemma({**scaled, "rope_local_theta": 1e4})
    idx = np.random.default_rng(3).integers(0, TOKENIZER.vocab_size, (1, 12))
    np.testing.assert_array_equal(implicit.logits(idx).data, explicit.logits(idx).data)
    assert implicit.config["rope_local_theta"] == 1e4
