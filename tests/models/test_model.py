"""MiniGPT: GPT-2's names and shapes, whole-model gradcheck, causality, padding, init loss, overfitting."""

import numpy as np
import pytest

from minitrain import gradcheck
from minitrain.common.errors import UserError
from minitrain.models.minigpt import MiniGPT
from minitrain.optim import AdamW

TINY = dict(n_layer=1, n_head=2, d_model=8, d_ff=12, vocab_size=7, max_seq_len=6)
LAB = dict(n_layer=2, n_head=4, d_model=64, d_ff=256, vocab_size=64, max_seq_len=32)


def batch(cfg, b=2, t=5, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, cfg["vocab_size"], size=(b, t))
    return idx, rng.integers(0, cfg["vocab_size"], size=(b, t))


def test_parameter_names_and_shapes_are_hugging_face_gpt2():
    sd = MiniGPT(**LAB).state_dict()
    d, f, v, p = 64, 256, 64, 32
    expected = {"transformer.wte.weight": (v, d), "transformer.wpe.weight": (p, d),
                "transformer.ln_f.weight": (d,), "transformer.ln_f.bias": (d,)}  # fmt: skip
    for i in range(2):
        h = f"transformer.h.{i}"
        expected |= {
            f"{h}.ln_1.weight": (d,), f"{h}.ln_1.bias": (d,), f"{h}.ln_2.weight": (d,), f"{h}.ln_2.bias": (d,),
            f"{h}.attn.c_attn.weight": (d, 3 * d), f"{h}.attn.c_attn.bias": (3 * d,),
            f"{h}.attn.c_proj.weight": (d, d), f"{h}.attn.c_proj.bias": (d,),
            f"{h}.mlp.c_fc.weight": (d, f), f"{h}.mlp.c_fc.bias": (f,),
            f"{h}.mlp.c_proj.weight": (f, d), f"{h}.mlp.c_proj.bias": (d,),
        }  # fmt: skip
    assert {k: v.shape for k, v in sd.items()} == expected
    assert MiniGPT(**LAB).num_parameters() == sum(int(np.prod(s)) for s in expected.values()) == 106_240


def test_init_statistics():
    sd = MiniGPT(**LAB, rng=1).state_dict()
    assert abs(sd["transformer.wte.weight"].std() - 0.02) < 0.002
    assert abs(sd["transformer.h.0.attn.c_proj.weight"].std() - 0.01) < 0.001  # 0.02/√(2·2)
    assert abs(sd["transformer.h.1.mlp.c_proj.weight"].std() - 0.01) < 0.001
    assert np.all(sd["transformer.h.0.ln_1.weight"] == 1) and not sd["transformer.h.0.ln_1.bias"].any()
    assert not sd["transformer.h.0.attn.c_attn.bias"].any()


def test_loss_at_init_is_log_vocab():
    model = MiniGPT(**LAB, rng=0)
    idx, targets = batch(LAB, b=8, t=32)
    _, loss = model(idx, targets)
    assert loss.item() == pytest.approx(np.log(64), abs=0.05)


def test_whole_model_gradcheck_float64():
    model = MiniGPT(**TINY, rng=3, dtype=np.float64)
    for p in model.parameters():  # a non-trivial point: LayerNorm gains and biases away from 1 and 0
        p.data[...] += np.random.default_rng(4).normal(0, 0.3, p.shape)
    idx, targets = batch(TINY)
    pad = np.array([[True] * 5, [True, True, True, False, False]])
    loss_mask = np.array([[False, True, True, True, True], [True, True, False, False, False]])

    def loss_fn(*_params):
        return model(idx, targets, attn_pad_mask=pad, loss_mask=loss_mask)[1]

    assert gradcheck(loss_fn, model.parameters())


def test_output_head_is_tied_to_token_embedding():
    model = MiniGPT(**TINY, rng=0)
    idx, _ = batch(TINY)
    before = model(idx)[0].data
    # transformer.wte.weight row 3 (not a constant shift: LayerNorm output sums to 0, which would hide it)
    model.transformer.wte.weight.data[3] += np.linspace(-1.0, 1.0, 8)
    after = model(idx)[0].data
    assert not np.allclose(before[..., 3], after[..., 3])
    assert "lm_head.weight" not in model.state_dict()


def test_causal_and_padding():
    model = MiniGPT(**TINY, rng=0).eval()
    idx, _ = batch(TINY, b=1, t=6)
    logits = model(idx)[0].data
    changed = idx.copy()
    changed[0, 4:] = (changed[0, 4:] + 1) % 7  # only the future of positions 0..3
    np.testing.assert_allclose(model(changed)[0].data[0, :4], logits[0, :4], rtol=1e-5, atol=1e-6)
    pad = np.array([[True, True, True, True, False, False]])
    np.testing.assert_allclose(model(changed, attn_pad_mask=pad)[0].data[0, :4],
                               model(idx, attn_pad_mask=pad)[0].data[0, :4], rtol=1e-5, atol=1e-6)


def test_backward_fills_the_flat_gradient():
    model = MiniGPT(**TINY, rng=0)
    model.pack_parameters()
    idx, targets = batch(TINY)
    model(idx, targets)[1].backward()
    assert np.abs(model.buffer.grad).sum() > 0
    for name, p in model.named_parameters():
        assert p.grad is model.buffer.views(name).grad, name
    model.zero_grad()
    assert not model.buffer.grad.any()


def test_one_batch_overfits():
    model = MiniGPT(**TINY, rng=0)
    idx, targets = batch(TINY, b=4, t=6, seed=1)
    opt = AdamW(model.named_parameters(), lr=1e-2, weight_decay=0.0, buffer=model.pack_parameters())
    for _ in range(300):
        model.zero_grad()
        _, loss = model(idx, targets)
        loss.backward()
        opt.step()
    assert loss.item() < 0.05


def test_dropout_uses_training_rng_and_only_in_train_mode():
    cfg = dict(TINY, dropout=0.5)
    idx, _ = batch(cfg)
    a, b = MiniGPT(**cfg, rng=5), MiniGPT(**cfg, rng=5)
    np.testing.assert_array_equal(a(idx)[0].data, b(idx)[0].data)  # same rng state -> same masks
    assert not np.allclose(a(idx)[0].data, a(idx)[0].data)  # masks change from call to call
    a.eval()
    np.testing.assert_array_equal(a(idx)[0].data, a(idx)[0].data)


def test_load_state_dict_round_trip_and_errors():
    source, target = MiniGPT(**TINY, rng=1), MiniGPT(**TINY, rng=2)
    target.pack_parameters()
    target.load_state_dict(source.state_dict())
    idx, _ = batch(TINY)
    np.testing.assert_array_equal(source(idx)[0].data, target(idx)[0].data)
    assert target.transformer.wte.weight.data.base is target.buffer.data  # still a view of the flat buffer

    bad = source.state_dict()
    del bad["transformer.ln_f.bias"]
    bad["lm_head.weight"] = np.zeros((7, 8))
    bad["transformer.wpe.weight"] = np.zeros((9, 8))
    with pytest.raises(UserError) as error:
        target.load_state_dict(bad, source="x.safetensors")
    message = str(error.value)
    assert "x.safetensors" in message and "missing tensor 'transformer.ln_f.bias'" in message
    assert "unexpected tensor 'lm_head.weight'" in message and "[9, 8]" in message


def test_bad_config_is_a_value_error():
    with pytest.raises(ValueError, match="divisible"):
        MiniGPT(**dict(TINY, n_head=3))
    with pytest.raises(ValueError, match="max_seq_len"):
        MiniGPT(**TINY)(np.zeros((1, 7), dtype=np.int64))


# ------------------------------------------------------------------------------------------ attention read-out


def test_attention_probs_are_every_layers_causal_masked_softmax():
    cfg = dict(LAB, n_layer=2, max_seq_len=8)
    model = MiniGPT(**cfg, rng=0)
    idx, _ = batch(cfg, b=2, t=6)
    pad = np.array([[True] * 6, [True, True, True, True, False, False]])
    probs = model.attention_probs(idx, pad)
    assert probs.shape == (2, 2, 4, 6, 6)  # (layers, B, H, T, T)
    assert np.allclose(probs[:, 0].sum(-1), 1) and np.allclose(probs[:, 1, :, :4].sum(-1), 1)
    assert not np.triu(probs, k=1).any() and not probs[:, 1, :, :, 4:].any()  # no future, no padding key
    # Layer 0 recomputed by hand from the weights: softmax(q·kᵀ/√D) over the allowed keys.
    t = model.transformer
    x = (t.wte.weight.data[idx] + t.wpe.weight.data[:6]).astype(np.float64)
    ln = t.h[0].ln_1
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * ln.weight.data + ln.bias.data
    qkv = x @ t.h[0].attn.c_attn.weight.data + t.h[0].attn.c_attn.bias.data
    q, k = (qkv[..., i * 64:(i + 1) * 64].reshape(2, 6, 4, 16).transpose(0, 2, 1, 3) for i in (0, 1))
    scores = np.where(np.tril(np.ones((6, 6), bool)) & pad[:, None, None, :], q @ k.swapaxes(-1, -2) / 4, -np.inf)
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(probs[0], expected / expected.sum(-1, keepdims=True), atol=2e-6)
    assert all(block.attn.probs is None for block in t.h) and model.training  # nothing kept, mode restored


def test_attn_scale_replaces_one_over_sqrt_head_size():
    default = MiniGPT(**TINY, rng=0)
    idx, targets = batch(TINY)
    same = MiniGPT(**TINY, rng=0, attn_scale=1 / np.sqrt(4))  # D = d_model / n_head = 4
    unscaled = MiniGPT(**TINY, rng=0, attn_scale=1.0)
    np.testing.assert_array_equal(same(idx)[0].data, default(idx)[0].data)
    assert not np.allclose(unscaled(idx)[0].data, default(idx)[0].data)
    assert "attn_scale" not in default.config and unscaled.config["attn_scale"] == 1.0
    model = MiniGPT(**TINY, rng=3, dtype=np.float64, attn_scale=1.0)
    assert gradcheck(lambda *_: model(idx, targets)[1], model.parameters())
