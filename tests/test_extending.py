"""The three worked examples of docs/extending.md, as the code the page quotes and the tests that prove it works:
a new op with its backward, a new layer (RMSNorm) trained inside MiniGPT, and a new optimizer (Lion)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from test_course_text import excerpt_matches, parse

from minitrain import gradcheck, nn
from minitrain.autograd.tensor import Tensor
from minitrain.data.batcher import TrainBatcher, encode_split
from minitrain.data.corpus import load_records
from minitrain.data.tokenizer import CharTokenizer
from minitrain.loop import train_step
from minitrain.models.minigpt import MiniGPT
from minitrain.optim import AdamW
from minitrain.optim.base import Optimizer, check_range

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "processed"


# ---------------------------------------------------------------------------------- example 1: an op


def softplus(x: Tensor) -> Tensor:
    """y = log(1 + e^x), a smooth ReLU;  dy/dx = sigmoid(x) = 1 / (1 + e^(−x))."""
    y = np.logaddexp(0.0, x.data).astype(x.dtype)  # log(e^0 + e^x) without overflow for large x
    slope = np.exp(x.data - y)  # e^x / (1 + e^x) = sigmoid(x), computed from y: no second exp overflow

    def backward(g: np.ndarray) -> None:
        x._accumulate(g * slope)

    return Tensor._from_op(y, (x,), backward)


def test_softplus_matches_its_definition_and_its_gradient_checks():
    x = Tensor(np.linspace(-30, 30, 13), requires_grad=True, dtype=np.float64)
    np.testing.assert_allclose(softplus(x).data, np.log1p(np.exp(x.data)), rtol=1e-12)
    assert softplus(Tensor(np.array([1000.0]))).data[0] == 1000.0  # no overflow
    assert gradcheck(softplus, [Tensor(np.random.default_rng(0).normal(size=(3, 4)), requires_grad=True,
                                       dtype=np.float64)])  # fmt: skip


# ---------------------------------------------------------------------------------- example 2: a layer


class RMSNorm(nn.Module):
    """y = x / √(mean(x²) + eps) · w over the last axis (no centring, no shift).  x (..., C) -> y (..., C)."""

    def __init__(self, dim: int, eps: float = 1e-5, *, dtype: type = np.float32) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(np.ones(dim), dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        # Composed from Tensor ops, so autograd derives the backward: no closure to write.
        rms = ((x * x).mean(axis=-1, keepdims=True) + self.eps).sqrt()
        return x / rms * self.weight


def use_rmsnorm(model: MiniGPT) -> MiniGPT:
    """Swap every LayerNorm of a MiniGPT for an RMSNorm of the same width."""
    width = model.config["d_model"]
    for block in model.transformer.h:
        block.ln_1, block.ln_2 = RMSNorm(width), RMSNorm(width)
    model.transformer.ln_f = RMSNorm(width)
    return model


def test_rmsnorm_gradchecks():
    norm = RMSNorm(5, dtype=np.float64)
    norm.weight.data[...] = np.random.default_rng(1).normal(1, 0.3, 5)
    x = Tensor(np.random.default_rng(2).normal(size=(2, 3, 5)), requires_grad=True, dtype=np.float64)
    assert gradcheck(lambda *_: norm(x), [x, norm.weight])


def test_minigpt_with_rmsnorm_trains_from_python():
    model = use_rmsnorm(MiniGPT(n_layer=2, n_head=2, d_model=32, d_ff=64, vocab_size=64, max_seq_len=32, rng=0))
    assert "transformer.h.0.ln_1.bias" not in model.state_dict()  # RMSNorm has no shift
    optimizer = AdamW(model.trainable_parameters(), lr=3e-3, buffer=model.pack_parameters())
    tokenizer = CharTokenizer.load(DATA / "vocab.json")
    batcher = TrainBatcher(encode_split(load_records(DATA / "train.jsonl")[:256], tokenizer, 32), 16, data_seed=0)
    losses = []
    for _ in range(60):
        loss, _ = train_step(model, optimizer, [next(batcher)], clip_norm=1.0)
        optimizer.step()
        losses.append(loss)
    assert np.mean(losses[-10:]) < 0.75 * np.mean(losses[:10])


# ---------------------------------------------------------------------------------- example 3: an optimizer


class Lion(Optimizer):
    """Lion (Chen et al., 2023): a step of fixed size per element, in the sign of a momentum.

    c = β1·m + (1 − β1)·g;   p ← p − lr·(sign(c) + wd·p);   m ← β2·m + (1 − β2)·g
    """

    name = "lion"

    def __init__(self, named_params, lr=1e-4, beta1=0.9, beta2=0.99, weight_decay=0.0, groups=None, buffer=None):
        check_range("beta1", beta1, open_high=True)
        check_range("beta2", beta2, open_high=True)
        self.beta1, self.beta2 = beta1, beta2
        super().__init__(named_params, lr, weight_decay, {"exp_avg": 0.0}, groups, buffer)

    def _update(self, data, grad, state, lr, weight_decay):
        m = state["exp_avg"]
        direction = np.sign(self.beta1 * m + (1 - self.beta1) * grad)
        data -= lr * (direction + weight_decay * data)
        m *= self.beta2
        m += (1 - self.beta2) * grad


def test_lion_takes_the_documented_step_and_trains():
    p = nn.Parameter(np.array([[1.0, -2.0, 0.5]]))  # a matrix: weight decay applies (minitrain.autograd.parameters)
    p.grad = np.array([[0.3, 0.1, -4.0]], dtype=np.float32)
    opt = Lion([("p", p)], lr=0.1, weight_decay=0.5)
    opt.step()
    np.testing.assert_allclose(p.data, [[1 - 0.1 * (1 + 0.5), -2 - 0.1 * (1 - 1.0), 0.5 - 0.1 * (-1 + 0.25)]])
    np.testing.assert_allclose(opt.state["exp_avg"], 0.01 * p.grad.reshape(-1))
    model = MiniGPT(n_layer=1, n_head=2, d_model=16, d_ff=32, vocab_size=8, max_seq_len=6, rng=0)
    opt = Lion(model.trainable_parameters(), lr=3e-3, buffer=model.pack_parameters())  # one flat pass per step
    idx = np.random.default_rng(0).integers(0, 8, (4, 6))
    first = None
    for _ in range(100):
        opt.zero_grad()
        _, loss = model(idx, idx)
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.2 * first
    restored = Lion(model.trainable_parameters(), lr=3e-3, buffer=model.buffer)
    restored.load_state_dict(opt.state_dict())  # checkpoints work as for any optimizer
    np.testing.assert_array_equal(restored.state["exp_avg"], opt.state["exp_avg"])


# ---------------------------------------------------------------------------------- the page itself


def test_docs_extending_quotes_exactly_this_file_and_every_example():
    page = parse(ROOT / "docs" / "extending.md")
    quoted = [code for source, code in page.excerpts if source == "tests/test_extending.py"]
    source = Path(__file__).read_text(encoding="utf-8")
    for code in quoted:
        assert excerpt_matches(code, source), f"docs/extending.md: this excerpt no longer matches:\n{code}"
    shown = "".join(quoted)
    for definition in ("def softplus", "class RMSNorm", "def use_rmsnorm", "class Lion", "def _update"):
        assert definition in shown, f"docs/extending.md does not show {definition}"
