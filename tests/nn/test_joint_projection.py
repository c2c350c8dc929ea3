"""Frozen projections of one input as one product (functional.frozen_linears, nn/llama_shared.project): the
values and input gradient against float64 NumPy, a LoRA model's loss and gradients against the unjoined path, a
float64 gradcheck through it, and that trainable or small-batch layers are never joined."""

import numpy as np
import pytest

from minitrain import gradcheck
from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor
from minitrain.lora import LoraSettings, add_adapters
from minitrain.models.llama import Llama
from minitrain.nn import llama_shared

TINY = dict(n_layer=2, n_head=4, n_kv_head=2, d_model=16, d_ff=24, vocab_size=19, max_seq_len=24)


def test_one_product_gives_each_block_and_dx_of_the_separate_products():
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((2, 5, 6)), requires_grad=True, dtype=np.float32)
    weights = [Tensor(rng.standard_normal((6, n)), dtype=np.float32) for n in (6, 2, 3)]
    biases = [Tensor(rng.standard_normal(6), dtype=np.float32), None, Tensor(rng.standard_normal(3), dtype=np.float32)]
    grads = [rng.standard_normal((2, 5, n)).astype(np.float32) for n in (6, 2, 3)]
    blocks = F.frozen_linears(x, weights, biases)
    sum((b * Tensor(g)).sum() for b, g in zip(blocks, grads, strict=True)).backward()
    x64 = x.data.astype(np.float64)
    for block, w, b in zip(blocks, weights, biases, strict=True):  # NumPy in float64: x·W_i + b_i
        assert block.shape == (2, 5, w.shape[1])
        np.testing.assert_allclose(block.data, x64 @ w.data + (0 if b is None else b.data), rtol=1e-5, atol=1e-5)
    dx = sum(g.astype(np.float64) @ w.data.T for g, w in zip(grads, weights, strict=True))
    np.testing.assert_allclose(x.grad, dx, rtol=1e-5, atol=1e-5)
    assert all(w.grad is None for w in weights)


def lora_model(dtype=np.float32, targets=("q_proj", "v_proj", "o_proj", "up_proj"), **keys):
    """k_proj and gate_proj stay plain frozen layers, q/v/up are LoRA on a frozen base: both kinds are joined."""
    model = Llama(**{**TINY, **keys}, rng=0, dtype=dtype)
    paths = [f"model.layers.{i}.{part}.{name}" for i in range(model.config["n_layer"]) for name in targets
             for part in ("self_attn", "mlp") if (part == "mlp") == name.endswith("up_proj")]  # fmt: skip
    add_adapters(model, LoraSettings(rank=2, alpha=4.0, targets=tuple(paths)), rng=np.random.default_rng(0))
    for _, p in model.trainable_parameters():  # B away from 0, so every adapter changes the output
        p.data += np.random.default_rng(1).normal(0, 0.3, p.shape).astype(dtype)
    return model


def loss_and_grads(model, rows, monkeypatch):
    monkeypatch.setattr(llama_shared, "JOINT_ROWS", rows)
    calls = []
    monkeypatch.setattr(F, "frozen_linears", lambda *a: calls.append(1) or FROZEN_LINEARS(*a))
    idx = np.random.default_rng(2).integers(0, TINY["vocab_size"], (3, 8))
    model.zero_grad()
    _, loss = model(idx, np.roll(idx, -1, axis=1))
    loss.backward()
    return loss.item(), [p.grad.copy() for _, p in model.trainable_parameters()], len(calls)


FROZEN_LINEARS = F.frozen_linears


def test_a_lora_model_joined_equals_unjoined_to_float32_rounding(monkeypatch):
    model = lora_model(attention_bias=True)  # Qwen2's q/k/v biases, frozen too
    loss, grads, calls = loss_and_grads(model, 10**9, monkeypatch)
    assert calls == 0
    joined_loss, joined_grads, calls = loss_and_grads(model, 1, monkeypatch)
    assert calls == 2 * TINY["n_layer"]  # q/k/v and gate/up of every layer
    assert joined_loss == loss  # the forward's dot products are the same
    for g, h in zip(grads, joined_grads, strict=True):
        np.testing.assert_allclose(h, g, rtol=1e-5, atol=1e-6)


def test_the_joined_path_passes_gradcheck_in_float64(monkeypatch):
    monkeypatch.setattr(llama_shared, "JOINT_ROWS", 1)
    model = lora_model(np.float64, n_layer=1, d_model=4, n_head=2, n_kv_head=1, d_ff=3, vocab_size=5)
    idx = np.array([[1, 2, 3, 4, 0], [0, 4, 4, 2, 1]])
    params = [p for _, p in model.trainable_parameters()]
    assert gradcheck(lambda *_: model(idx, np.roll(idx, -1, axis=1))[1], params)


@pytest.mark.parametrize("rows", [1, 10**9])
def test_trainable_bases_and_few_rows_are_never_joined(monkeypatch, rows):
    """Full fine-tuning (every weight trains) keeps one product per layer, so do batches under JOINT_ROWS rows."""
    model = Llama(**TINY, rng=0) if rows == 1 else lora_model()
    assert loss_and_grads(model, rows, monkeypatch)[2] == 0
