"""Sliding-window attention in the composed decoder (models/decoder.py): the window counts a document's real tokens
(padding and packed neighbours change nothing), and generation through the KV cache equals greedy decoding by full
forward passes over the growing sequence. The window's math itself is checked against NumPy in test_llama_oracle.py."""

import numpy as np
import pytest

from minitrain.autograd.tensor import no_grad
from minitrain.models.llama import Llama

KEYS = dict(n_layer=2, n_head=4, n_kv_head=2, d_model=16, d_ff=24, vocab_size=19, max_seq_len=32, rope_theta=50.0)
WINDOWS = {"mistral": dict(sliding_window=3),
           "qwen2-layer-1": dict(sliding_window=2, layer_types=["full_attention", "sliding_attention"])}


def model_of(keys: dict) -> Llama:
    model = Llama(**KEYS, **keys, rng=3, dtype=np.float64)
    rng = np.random.default_rng(5)
    model.load_state_dict({n: rng.normal(0, 0.5, p.shape) for n, p in model.state_dict().items()})
    return model


def logits(model: Llama, idx, mask=None) -> np.ndarray:
    with no_grad():
        return model(np.asarray(idx), attn_pad_mask=None if mask is None else np.asarray(mask))[0].data


@pytest.mark.parametrize("keys", WINDOWS.values(), ids=WINDOWS.keys())
def test_padding_and_packed_neighbours_do_not_move_the_window(keys):
    model = model_of(keys)
    a, b = [3, 1, 4, 1, 5, 9, 2], [6, 5, 3, 5, 8]
    alone_a, alone_b = logits(model, [a])[0], logits(model, [b])[0]
    padded = logits(model, [[0, 0, 0, *a]], [[False] * 3 + [True] * len(a)])[0, 3:]
    packed = logits(model, [a + b], [[1] * len(a) + [2] * len(b)])[0]  # integer mask: segment ids
    np.testing.assert_allclose(padded, alone_a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(packed, np.concatenate([alone_a, alone_b]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("keys", WINDOWS.values(), ids=WINDOWS.keys())
def test_generation_through_the_cache_is_greedy_full_forward_with_the_window(keys):
    model = model_of(keys)
    prompts = [[3, 1, 4, 1, 5, 9, 2, 6], [2, 7]]  # the first longer than the window, the second left-padded
    got = model.generate(prompts, max_new_tokens=9)
    for prompt, new in zip(prompts, got, strict=True):
        ids = list(prompt)
        for _ in range(9):
            ids.append(int(logits(model, [ids])[0, -1].argmax()))
        assert new == ids[len(prompt):]
    plain = Llama(**KEYS, rng=3, dtype=np.float64)
    plain.load_state_dict(model.state_dict())
    assert plain.generate(prompts, max_new_tokens=9) != got  # the window mattered


def test_a_sliding_layers_cache_rolls_keeping_the_window_minus_one_latest_keys():
    from minitrain.models.kv_cache import KVCache
    from minitrain.nn import inference

    model = model_of(WINDOWS["qwen2-layer-1"])  # layer 0 full, layer 1 a window of 2
    ids = np.array([[3, 1, 4, 1, 5, 9, 2, 6]])
    cache = KVCache(2, 1, 12, 2, 4, np.float64, [None, 2])
    with inference(model):
        first = model.step(ids[:, :6], np.ones((1, 6), bool), cache)
        later = [model.step(ids[:, t : t + 1], np.ones((1, 1), bool), cache) for t in (6, 7)]
    assert cache.layers[0].keys.shape[1] == 12 and cache.layers[1].keys.shape[1] == 1  # W − 1 = 1 kept
    full = logits(model, ids)[0]
    np.testing.assert_allclose(np.stack([first[0], *(z[0] for z in later)]), full[5:], rtol=1e-12, atol=1e-12)
