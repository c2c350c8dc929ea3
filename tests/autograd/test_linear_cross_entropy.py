"""The head's loss in chunks (functional.linear_cross_entropy, head_nll; the decoder's forward and token_nll): the
same loss as cross_entropy over the whole logits x·Wᵀ to float32 rounding, the same gradients, and float64
central differences of the loss itself; blocks forced small, so the vocabulary splits unevenly."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minitrain.autograd import functional as F
from minitrain.autograd import kernels
from minitrain.autograd.tensor import Tensor
from minitrain.lora import LoraSettings, add_adapters
from minitrain.models.gemma import Gemma
from minitrain.models.llama import Llama
from minitrain.nn import inference

ROOT = Path(__file__).resolve().parents[2]
N, C, V = 14, 6, 19
SMALL_CHUNK = 5 * V  # 14 rows: blocks of 6, 6, 6 and 1 vocabulary columns


@pytest.fixture(params=kernels.BACKENDS)
def backend(request, monkeypatch):
    monkeypatch.setattr(F, "CHUNK_LOGITS", SMALL_CHUNK)
    with kernels.use_backend(request.param):
        yield request.param


def case(dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (2, N // 2, C)).astype(dtype)
    w = rng.normal(0, 1, (V, C)).astype(dtype)
    return x, w, rng.integers(0, V, (2, N // 2)), rng.random((2, N // 2)) < 0.6


def whole(x, w, targets, mask, softcap):
    """Today's path: all the logits, soft-capped with the composed ops, then cross_entropy."""
    z = F.linear(x, w.T)
    return F.cross_entropy((z / softcap).tanh() * softcap if softcap else z, targets, mask)


def grads(loss_of, *tensors):
    for t in tensors:
        t.grad = None
    loss = loss_of()
    loss.backward()
    return loss.item(), [None if t.grad is None else t.grad.copy() for t in tensors]


@pytest.mark.parametrize("softcap", [None, 2.5])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("layout", ["tied", "untied", "frozen"])
def test_loss_and_gradients_equal_the_whole_logits_path(backend, softcap, masked, layout):
    x_, w_, targets, mask = case()
    mask = mask if masked else None
    x = Tensor(x_, requires_grad=True)
    # tied: W is the (V, C) embedding itself; untied: an lm_head stored (C, V), passed transposed; frozen: no grad
    stored = Tensor(w_ if layout != "untied" else np.ascontiguousarray(w_.T), requires_grad=layout != "frozen")

    def weight():
        return stored.T if layout == "untied" else stored

    got, (dx, dw) = grads(lambda: F.linear_cross_entropy(x, weight(), targets, mask, softcap), x, stored)
    want, (dx_want, dw_want) = grads(lambda: whole(x, weight(), targets, mask, softcap), x, stored)
    assert abs(got - want) <= 1e-6 * abs(want)
    np.testing.assert_allclose(dx, dx_want, rtol=1e-5, atol=1e-7)
    if layout == "frozen":
        assert dw is None and dw_want is None  # no gradient work for a frozen weight
    else:
        np.testing.assert_allclose(dw, dw_want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("softcap", [None, 2.5])
def test_gradients_match_float64_central_differences(backend, softcap):
    x_, w_, targets, mask = case(np.float64, seed=3)
    x, w = Tensor(x_, requires_grad=True), Tensor(w_, requires_grad=True)
    loss, (dx, dw) = grads(lambda: F.linear_cross_entropy(x, w, targets, mask, softcap), x, w)

    def reference(xa, wa):  # the loss from its definition, in NumPy
        z = xa.reshape(-1, C) @ wa.T
        z = softcap * np.tanh(z / softcap) if softcap else z
        lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
        nll = lse - z[np.arange(len(z)), targets.ravel()]
        return nll[mask.ravel()].mean()

    assert loss == pytest.approx(reference(x_, w_), rel=1e-12)
    eps = 1e-6
    for array, grad in ((x_, dx), (w_, dw)):
        numeric = np.zeros_like(array)
        for i in np.ndindex(array.shape):
            saved = array[i]
            array[i] = saved + eps
            up = reference(x_, w_)
            array[i] = saved - eps
            numeric[i] = (up - reference(x_, w_)) / (2 * eps)
            array[i] = saved
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


def test_a_block_of_columns_gets_its_columns_of_the_whole_gradient(backend):
    """The kernel's backward on columns [6, 12) with targets counted from column 6 (outside: subtract nothing)."""
    rng = np.random.default_rng(5)
    z, targets = rng.normal(0, 2, (N, 2 * V)).astype(np.float32), rng.integers(0, 2 * V, N)
    lse = np.log(np.exp(z.astype(np.float64)).sum(1)).astype(np.float32)
    dnll = np.linspace(0.0, 1.0, N, dtype=np.float32)
    full = kernels.active.cross_entropy_backward(z, targets, lse, dnll)
    block = kernels.active.cross_entropy_backward(np.ascontiguousarray(z[:, 6:12]), targets - 6, lse, dnll)
    np.testing.assert_allclose(block, full[:, 6:12], rtol=1e-6, atol=1e-7)


def test_the_disabled_jit_runs_the_numpy_kernels():
    script = ("from tests.autograd import test_linear_cross_entropy as t; from minitrain.autograd import kernels;"
              "assert kernels.active.name == 'numpy'; t.F.CHUNK_LOGITS = t.SMALL_CHUNK;"
              "t.test_loss_and_gradients_equal_the_whole_logits_path(None, 2.5, True, 'tied'); print('ok')")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_DISABLE_JIT": "1"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


# ------------------------------------------------------------------------------------------- the decoder
def decoder(kind: str):
    keys = dict(n_layer=2, n_head=2, n_kv_head=1, d_model=8, d_ff=12, vocab_size=V, max_seq_len=16)
    if kind == "gemma2":  # tied, soft-capped
        model = Gemma(**keys, head_dim=4, final_logit_softcapping=2.0, qk_norm=False, rng=0)
    else:
        model = Llama(**keys, tie_embeddings=kind == "tied", rng=0)
    draws = np.random.default_rng(1)
    for p in model.parameters():
        p.data += draws.normal(0, 0.3, p.shape).astype(p.dtype)
    return model


def batch():
    rng = np.random.default_rng(2)
    idx, targets = rng.integers(0, V, (2, 7)), rng.integers(0, V, (2, 7))
    pad = np.ones((2, 7), dtype=bool)
    pad[1, 5:] = False
    return idx, targets, pad, pad & (rng.random((2, 7)) < 0.8)


@pytest.mark.parametrize("kind", ["tied", "untied", "gemma2"])
def test_the_decoders_chunked_loss_and_gradients_equal_the_whole_logits(monkeypatch, kind):
    monkeypatch.setattr(F, "CHUNK_LOGITS", SMALL_CHUNK)  # 14 tokens: blocks of 6, 6, 6, 1 columns
    model, (idx, targets, pad, loss_mask) = decoder(kind), batch()
    params = list(model.parameters())

    def chunked():
        logits, loss = model(idx, targets, pad, loss_mask)
        assert logits is None  # the logits were never built
        return loss

    got, chunked_grads = grads(chunked, *params)
    want, whole_grads = grads(lambda: F.cross_entropy(model(idx, attn_pad_mask=pad)[0], targets, loss_mask), *params)
    assert abs(got - want) <= 1e-6 * abs(want)
    for g, w in zip(chunked_grads, whole_grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    with inference(model):
        nll = model.token_nll(idx, targets, pad)
        log_p = F.log_softmax(model(idx, attn_pad_mask=pad)[0]).data
    np.testing.assert_allclose(nll, -np.take_along_axis(log_p, targets[..., None], -1)[..., 0], rtol=1e-5)


def test_an_adapted_head_builds_its_logits_and_a_frozen_tied_embedding_gets_no_gradient():
    idx, targets, pad, loss_mask = batch()
    untied = add_adapters(decoder("untied"), LoraSettings(rank=2, alpha=4, targets=("lm_head",)),
                          np.random.default_rng(0))
    logits, loss = untied(idx, targets, pad, loss_mask)
    assert logits is not None and loss.item() == pytest.approx(F.cross_entropy(logits, targets, loss_mask).item())
    with inference(untied):  # token_nll through the whole logits too
        log_p = F.log_softmax(untied(idx, attn_pad_mask=pad)[0]).data
        np.testing.assert_allclose(untied.token_nll(idx, targets, pad),
                                   -np.take_along_axis(log_p, targets[..., None], -1)[..., 0], rtol=1e-6)
    tied = add_adapters(decoder("tied"), LoraSettings(rank=2, alpha=4, targets=("model.layers.0.self_attn.q_proj",)),
                        np.random.default_rng(0))
    logits, loss = tied(idx, targets, pad, loss_mask)
    loss.backward()
    assert logits is None and tied.model.embed_tokens.weight.grad is None
    assert all(p.grad is not None for p in tied.parameters() if p.requires_grad)


def test_a_subclass_with_its_own_head_keeps_the_whole_logits():
    class Doubled(Llama):
        def head(self, x):
            return super().head(x) * 2.0

    idx, targets, pad, loss_mask = batch()
    model = Doubled(n_layer=1, n_head=2, n_kv_head=1, d_model=8, d_ff=12, vocab_size=V, max_seq_len=16, rng=0)
    logits, loss = model(idx, targets, pad, loss_mask)
    assert logits is not None and loss.item() == F.cross_entropy(logits, targets, loss_mask).item()


def test_eval_reads_only_the_targets_the_loss_mask_counts():
    """`minitrain eval` (token_loss, through token_nll): a pad id past the model's vocabulary at an uncounted
    position (a tokenizer's own [PAD]) is never looked up, as the whole-logits scorer never looked it up."""
    from minitrain.data.batch import Batch
    from minitrain.evaluation.text_loss import token_loss

    model, (idx, targets, pad, loss_mask) = decoder("tied"), batch()
    want = token_loss(model, Batch(idx, targets, pad, loss_mask), V)
    assert token_loss(model, Batch(idx, np.where(loss_mask, targets, V), pad, loss_mask), V) == want
    assert want["tokens"] == loss_mask.sum()


def test_a_target_of_minus_100_counts_nowhere_as_in_cross_entropy(backend):
    """PyTorch's labels mark the positions that do not count with -100 (F.cross_entropy's default ignore_index, so
    MiniGPT's forward takes them): the decoder's chunked loss reads them so too, and a mask of the wrong size is
    refused (the kernels would read past it)."""
    x_, w_, targets, mask = case()
    x, w = Tensor(x_, requires_grad=True), Tensor(w_, requires_grad=True)
    assert F.linear_cross_entropy(x, w, np.where(mask, targets, -100)).item() == \
        F.linear_cross_entropy(x, w, targets, mask).item() == F.cross_entropy(F.linear(x, w.T), targets, mask).item()
    with pytest.raises(ValueError, match="positions differ"):
        F.linear_cross_entropy(x, w, targets, mask[:, :-1])
    with pytest.raises(ValueError, match="positions differ"):
        F.cross_entropy(F.linear(x, w.T), targets, mask[:, :-1])
