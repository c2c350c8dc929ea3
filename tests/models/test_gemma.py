"""The Gemma family (minitrain/models/gemma.py) against transformers and against its published equations.

- tests/data/gemma/{gemma2,gemma3}: tiny random Hugging Face folders written by transformers
  (scripts/make_gemma_fixtures.py), with its per-token log-probabilities; loaded through minitrain's folder path
  (hub/pretrained.py) they give the same log-probs within 1e-4, and the same greedy continuation.
- a forward in plain NumPy from the equations (Gemma Team 2024, 2025; transformers' Gemma2/Gemma3 modelling), float64,
  nothing of minitrain but the weights by Hugging Face name: sandwich norms x·(1 + w), q/k norms, GeGLU, √d embedding
  scale, query_pre_attn_scalar, soft-capping, local windows with their own RoPE base, linear scaling on global ones.
- gradients against central differences in float64 (both soft-caps, q/k norms, the window); a training step lowers
  the loss; generation through the KV cache equals greedy full forward passes; the export round-trips.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from minitrain import gradcheck
from minitrain.autograd import functional as F
from minitrain.autograd.tensor import Tensor, no_grad
from minitrain.formats.hf_config import from_hf_config, from_hf_state, to_hf_config, to_hf_state
from minitrain.hub.pretrained import load_pretrained_base
from minitrain.models.gemma import Gemma
from minitrain.models.registry import build_model
from minitrain.optim import AdamW

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "gemma"
KINDS = ("gemma2", "gemma3")


def loaded(kind: str, dtype: type = np.float32) -> tuple[Gemma, dict]:
    config, state, _, _ = load_pretrained_base(FIXTURES / kind)
    model = build_model(config, dtype=dtype)
    model.load_state_dict(state)
    return model, json.loads((FIXTURES / kind / "expected.json").read_text())


def token_logprobs(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(-1, keepdims=True)
    logprobs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return np.take_along_axis(logprobs[:, :-1], ids[:, 1:, None], -1)[..., 0]


# ------------------------------------------------------------------------------------------- the NumPy oracle
def gemma_reference(w: dict[str, np.ndarray], idx: np.ndarray, c: dict) -> np.ndarray:
    """Logits (B, T, V) of Gemma2ForCausalLM / Gemma3ForCausalLM from the equations; linear weights [in, out]."""
    (batch, time), heads, kv, dim = idx.shape, c["n_head"], c["n_kv_head"], c["head_dim"]
    positions = np.arange(time)

    def norm(x, gain, eps=c["rms_norm_eps"]):  # the gain stored as its offset from 1
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1.0 + gain)

    def gelu(x):  # gelu_pytorch_tanh
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))

    def rope(x, theta, factor):  # pair (i, i + D/2) at position t turned by t·θ^(−2i/D)/factor
        angle = positions[:, None, None] * theta ** (-np.arange(0, dim, 2) / dim) / factor
        a, b = x[..., : dim // 2], x[..., dim // 2 :]
        return np.concatenate([a * np.cos(angle) - b * np.sin(angle), b * np.cos(angle) + a * np.sin(angle)], -1)

    def capped(z, cap):
        return z if cap is None else cap * np.tanh(z / cap)

    x = w["model.embed_tokens.weight"][idx] * np.sqrt(c["d_model"])
    for i, kind in enumerate(c["layer_types"]):
        p = {name.removeprefix(f"model.layers.{i}.").removesuffix(".weight"): v for name, v in w.items()}
        local = kind == "sliding_attention"
        theta = c["rope_local_theta"] if local and c["rope_local_theta"] else c["rope_theta"]
        factor = 1.0 if local or not c["rope_scaling"] else c["rope_scaling"]["factor"]
        h = norm(x, p["input_layernorm"])
        q = (h @ p["self_attn.q_proj"]).reshape(batch, time, heads, dim)
        k = (h @ p["self_attn.k_proj"]).reshape(batch, time, kv, dim)
        if c["qk_norm"]:
            q, k = norm(q, p["self_attn.q_norm"]), norm(k, p["self_attn.k_norm"])
        q, k = rope(q, theta, factor), rope(k, theta, factor).repeat(heads // kv, axis=2)
        v = (h @ p["self_attn.v_proj"]).reshape(batch, time, kv, dim).repeat(heads // kv, axis=2)
        scores = capped(np.einsum("bqhd,bkhd->bhqk", q, k) * c["query_pre_attn_scalar"] ** -0.5,
                        c["attn_logit_softcapping"])
        seen = positions[None] <= positions[:, None]
        if local:
            seen &= positions[None] > positions[:, None] - c["sliding_window"]
        scores = np.where(seen, scores, -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        attended = np.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, time, heads * dim)
        x = x + norm(attended @ p["self_attn.o_proj"], p["post_attention_layernorm"])
        h = norm(x, p["pre_feedforward_layernorm"])
        mlp = (gelu(h @ p["mlp.gate_proj"]) * (h @ p["mlp.up_proj"])) @ p["mlp.down_proj"]
        x = x + norm(mlp, p["post_feedforward_layernorm"])
    logits = norm(x, w["model.norm.weight"]) @ w["model.embed_tokens.weight"].T  # the tied head
    return capped(logits, c["final_logit_softcapping"])


# ------------------------------------------------------------------------------------------- transformers
@pytest.mark.parametrize("kind", KINDS)
def test_log_probs_match_transformers_on_its_own_folder(kind):
    model, expected = loaded(kind)
    ids = np.array(expected["ids"])
    assert model.config["layer_types"] == expected["layer_types"] and model.config["sliding_window"] < ids.shape[1]
    assert {"sliding_attention", "full_attention"} == set(expected["layer_types"])
    with no_grad():
        logits, _ = model(ids)
    got = token_logprobs(logits.data.astype(np.float64), ids)
    np.testing.assert_allclose(got, np.array(expected["logprobs"]), rtol=0, atol=1e-4)
    assert model.generate(expected["prompt"], len(expected["greedy"]))[0] == expected["greedy"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_numpy_oracle_gives_the_models_logits(kind):
    model, expected = loaded(kind, np.float64)
    weights = {name: p.data for name, p in model.named_parameters()}
    ids = np.array(expected["ids"])
    want = gemma_reference(weights, ids, model.config)
    got, _ = model(ids)
    np.testing.assert_allclose(got.data, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
    windowless = gemma_reference(weights, ids, {**model.config, "sliding_window": 10**6})
    assert not np.allclose(windowless, want)  # the window is shorter than the sequence: it matters


# ------------------------------------------------------------------------------------------- training, cache
SMALL = dict(n_layer=2, n_head=4, n_kv_head=2, d_model=8, d_ff=12, vocab_size=13, max_seq_len=16, head_dim=4,
             sliding_window=3, layer_types=["sliding_attention", "full_attention"], query_pre_attn_scalar=6.0)
VARIANTS = {"gemma2": dict(qk_norm=False, attn_logit_softcapping=1.5, final_logit_softcapping=2.0),
            "gemma3": dict(rope_local_theta=20.0, rope_scaling={"rope_type": "linear", "factor": 3.0})}


def randomised(keys: dict, dtype: type = np.float64, seed: int = 0) -> Gemma:
    model = Gemma(**SMALL, **keys, rng=seed, dtype=dtype)
    rng = np.random.default_rng(seed + 1)
    model.load_state_dict({n: rng.normal(0, 0.5, p.shape) for n, p in model.state_dict().items()})
    return model


@pytest.mark.parametrize("keys", VARIANTS.values(), ids=VARIANTS.keys())
def test_gradients_match_central_differences_in_float64(keys):
    model = randomised(keys)
    idx = np.random.default_rng(2).integers(0, SMALL["vocab_size"], (2, 6))
    params = [p for _, p in model.named_parameters()]
    assert gradcheck(lambda *_: model(idx, np.roll(idx, -1, axis=1))[1], params, rtol=1e-5, atol=1e-8)


def test_soft_capped_attention_gradients_match_central_differences():
    """The fused op alone, float64, scores large enough for the tanh to bend (|s|/c up to ~3)."""
    rng = np.random.default_rng(4)
    q, k, v = (Tensor(rng.normal(0, 2.0, s), requires_grad=True, dtype=np.float64)
               for s in ((2, 5, 4, 3), (2, 5, 2, 3), (2, 5, 2, 3)))
    allowed = F.sliding_window(F.attention_mask(5, 5), np.arange(5)[None], np.arange(5)[None], 3)
    weights = rng.normal(size=(2, 5, 12))
    assert gradcheck(lambda *_: (F.grouped_attention(q, k, v, allowed, 0.7, 2.0) * weights).sum(), [q, k, v],
                     rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("keys", VARIANTS.values(), ids=VARIANTS.keys())
def test_a_training_step_lowers_the_loss_and_the_cache_gives_greedy_full_forward(keys):
    model = randomised(keys, np.float32)
    idx = np.random.default_rng(3).integers(0, SMALL["vocab_size"], (2, 10))
    opt = AdamW(model.named_parameters(), lr=1e-2, weight_decay=0.0, buffer=model.pack_parameters())
    losses = []
    for _ in range(3):
        opt.zero_grad()
        _, loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[2] < losses[0]
    prompts = [[1, 2, 3, 4, 5, 6], [7, 8]]  # longer than the window, and a left-padded one
    got = model.generate(prompts, max_new_tokens=7)
    for prompt, new in zip(prompts, got, strict=True):
        ids = list(prompt)
        for _ in range(7):
            with no_grad():
                ids.append(int(model(np.array([ids]))[0].data[0, -1].argmax()))
        assert new == ids[len(prompt):]


# ------------------------------------------------------------------------------------------- export
@pytest.mark.parametrize("kind", KINDS)
def test_the_export_round_trips_to_the_same_config_and_weights(kind):
    config, state, _, _ = load_pretrained_base(FIXTURES / kind)
    hf = to_hf_config(config, 2, 1, 0)
    assert hf["architectures"] == [{"gemma2": "Gemma2ForCausalLM", "gemma3": "Gemma3ForCausalLM"}[kind]]
    assert from_hf_config(json.loads(json.dumps(hf)), "x")[0] == config
    back = from_hf_state(to_hf_state(state, config), config, "x")
    assert back.keys() == state.keys() and all(np.array_equal(back[n], state[n]) for n in state)
    original = json.loads((FIXTURES / kind / "config.json").read_text())
    for key in ("layer_types", "sliding_window", "head_dim", "num_key_value_heads", "final_logit_softcapping"):
        assert hf[key] == original[key], key


def test_gemma3_wrapper_config_and_refusals():
    text = json.loads((FIXTURES / "gemma3" / "config.json").read_text())
    wrapped = {"model_type": "gemma3", "text_config": text, "vision_config": {}}
    assert from_hf_config(wrapped, "c")[0] == from_hf_config(text, "c")[0]
    for key, value, words in (("hidden_activation", "gelu", "gelu_pytorch_tanh"),
                              ("layer_types", ["full_attention"], "must list 6 layers"),
                              ("tie_word_embeddings", False, "ties its head")):
        with pytest.raises(Exception, match=words):
            from_hf_config({**text, key: value}, "config.json")
    with pytest.raises(Exception, match="rope_type = 'yarn'"):
        from_hf_config({**text, "rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 2.0},
                                                    "sliding_attention": {"rope_type": "default"}}}, "c")
