"""Tensor._accumulate_product (a linear layer's dW and db written straight into a zeroed gradient buffer) gives
exactly the bytes of its reference, `_accumulate(a @ b)`: alone, in every case it distinguishes, and over whole
training steps of MiniGPT with gradient accumulation."""

from __future__ import annotations

import numpy as np
import pytest

from minitrain.autograd.parameters import ParameterBuffer
from minitrain.autograd.tensor import Tensor
from minitrain.models.minigpt import MiniGPT
from minitrain.optim import AdamW
from minitrain.optim.clip import clip_grad_norm_


def reference(self: Tensor, a: np.ndarray, b: np.ndarray) -> None:
    if self.requires_grad:
        self._accumulate(a @ b)


def packed(shape: tuple[int, int], grad_fill: float) -> Tensor:
    """A parameter whose grad is a view into a flat buffer (as after Module.pack_parameters), filled with a value."""
    t = Tensor(np.zeros(shape, np.float32), requires_grad=True)
    buffer = ParameterBuffer([("w", t.data)])
    t.data, t.grad = buffer.views("w")
    t.grad[...] = grad_fill
    return t


@pytest.mark.parametrize("grad_fill", [0.0, -0.0, 0.5])  # write-through, write-through over −0, add
def test_one_product_gives_the_reference_bytes(grad_fill):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 256), dtype=np.float32), rng.standard_normal((256, 48), dtype=np.float32)
    fast, slow = packed((64, 48), grad_fill), packed((64, 48), grad_fill)
    fast._accumulate_product(a, b)
    reference(slow, a, b)
    assert fast.grad.tobytes() == slow.grad.tobytes()
    assert fast.grad.base is not None  # still the buffer's view, written in place


def test_a_leaf_without_a_buffer_and_a_frozen_one():
    a, b = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    leaf = Tensor(np.zeros((3, 2), np.float32), requires_grad=True)
    leaf._accumulate_product(a, b)  # no buffer: the first gradient is the product itself
    np.testing.assert_array_equal(leaf.grad, np.full((3, 2), 4.0))
    frozen = Tensor(np.zeros((3, 2), np.float32))
    frozen._accumulate_product(a, b)
    assert frozen.grad is None


def test_whole_training_steps_give_the_reference_bytes(monkeypatch):
    rng = np.random.default_rng(1)
    idx, targets = rng.integers(0, 64, (4, 16)), rng.integers(0, 64, (4, 16))
    results = []
    for variant in (Tensor._accumulate_product, reference):
        monkeypatch.setattr(Tensor, "_accumulate_product", variant)
        model = MiniGPT(n_layer=2, n_head=2, d_model=32, d_ff=64, vocab_size=64, max_seq_len=16, rng=0)
        optimizer = AdamW(model.trainable_parameters(), buffer=model.pack_parameters(), lr=1e-3)
        for _ in range(3):
            model.zero_grad()
            for half in (slice(0, 2), slice(2, 4)):  # two micro-batches: the second one adds to the first
                _, loss = model(idx[half], targets[half])
                loss.backward()
            clip_grad_norm_(model.buffer, 1.0)
            optimizer.step()
        results.append(model.buffer.data.tobytes() + model.buffer.grad.tobytes())
    assert results[0] == results[1]
