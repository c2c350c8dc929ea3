"""The Llama decoder (Llama 2/3, Qwen2, Mistral) against a forward written in plain NumPy from the published
equations (Touvron et al. 2023; Su et al. 2021's rotary embeddings in transformers' rotate_half layout; Shazeer
2020's SwiGLU; Zhang & Sennrich 2019's RMSNorm; Llama 3.1's rope_scaling as transformers'
`_compute_llama3_parameters`), nothing of minitrain but the weights, read by Hugging Face name from the state dict.
float64 throughout and a tight tolerance, on tiny random configs chosen so that every piece shows: a large eps
against small activations, a small θ with many pairs, all three rope_scaling regimes, GQA, q/k/v biases, an untied
head, head_dim ≠ d_model / n_head, and sliding windows shorter than the sequence (transformers' rule: the query at
position i sees keys i − W < j ≤ i), on every layer (Mistral) or some (Qwen2's layer_types)."""

import math

import numpy as np
import pytest

from minitrain.models.llama import Llama


def inverse_frequencies(dim: int, theta: float, scaling: dict | None) -> np.ndarray:
    """ω_i = θ^(−2i/D), i < D/2; Llama 3.1 keeps the fast ones, divides the slow ones by `factor` and blends between."""
    omega = np.array([theta ** (-2.0 * i / dim) for i in range(dim // 2)])
    if scaling is None:
        return omega
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    context = scaling["original_max_position_embeddings"]
    out = []
    for w in omega:
        wavelength = 2 * math.pi / w
        if wavelength < context / high:
            out.append(w)
        elif wavelength > context / low:
            out.append(w / factor)
        else:
            s = (context / wavelength - low) / (high - low)
            out.append((1 - s) * w / factor + s * w)
    return np.array(out)


def llama_reference(w: dict[str, np.ndarray], idx: np.ndarray, c: dict) -> np.ndarray:
    """Logits (B, T, V) of LlamaForCausalLM / Qwen2ForCausalLM / MistralForCausalLM; linear weights [in, out]."""
    (batch, time), heads, kv, dim = idx.shape, c["n_head"], c["n_kv_head"], c["head_dim"]
    angle = np.arange(time)[:, None, None] * inverse_frequencies(dim, c["rope_theta"], c["rope_scaling"])

    def norm(x, gain):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + c["rms_norm_eps"]) * gain

    def rope(x):  # pair (i, i + D/2) of position t turned by the angle t·ω_i
        a, b = x[..., : dim // 2], x[..., dim // 2 :]
        return np.concatenate([a * np.cos(angle) - b * np.sin(angle), b * np.cos(angle) + a * np.sin(angle)], -1)

    def proj(h, p, name):
        return h @ p[f"self_attn.{name}.weight"] + p.get(f"self_attn.{name}.bias", 0.0)

    x = w["model.embed_tokens.weight"][idx]
    q_at, k_at = np.arange(time)[:, None], np.arange(time)[None, :]
    window = c.get("sliding_window")
    kinds = c.get("layer_types") or ["sliding_attention" if window else "full_attention"] * c["n_layer"]
    for i in range(c["n_layer"]):
        p = {name.removeprefix(f"model.layers.{i}."): v for name, v in w.items()}
        h = norm(x, p["input_layernorm.weight"])
        q = rope(proj(h, p, "q_proj").reshape(batch, time, heads, dim))
        k = rope(proj(h, p, "k_proj").reshape(batch, time, kv, dim)).repeat(heads // kv, axis=2)  # head h: kv h//G
        v = proj(h, p, "v_proj").reshape(batch, time, kv, dim).repeat(heads // kv, axis=2)
        scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(dim)
        seen = (k_at <= q_at) & ((k_at > q_at - window) if kinds[i] == "sliding_attention" else True)
        scores = np.where(seen, scores, -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        attended = np.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, time, heads * dim)
        x = x + attended @ p["self_attn.o_proj.weight"]
        h = norm(x, p["post_attention_layernorm.weight"])
        gate, up = h @ p["mlp.gate_proj.weight"], h @ p["mlp.up_proj.weight"]
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ p["mlp.down_proj.weight"]  # silu(gate) · up
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"].T
    return norm(x, w["model.norm.weight"]) @ head


LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}  # head_dim 8, θ 100: wavelengths 6.3 | 20, 63 | 199, one per regime
BASE = dict(n_layer=2, n_head=4, d_model=16, d_ff=24, vocab_size=23, max_seq_len=16, rope_theta=100.0,
            rms_norm_eps=0.05)
CONFIGS = {
    "llama3-gqa-untied-head_dim": dict(n_kv_head=2, head_dim=8, rope_scaling=LLAMA3, tie_embeddings=False),
    "qwen2-bias-tied": dict(n_kv_head=2, attention_bias=True, rope_theta=30.0),
    "mistral-mha": dict(n_kv_head=4, head_dim=6, tie_embeddings=False, rms_norm_eps=0.2),
    "mistral-window-4": dict(n_kv_head=2, sliding_window=4, tie_embeddings=False),
    "qwen2-window-on-layer-1": dict(n_kv_head=2, attention_bias=True, sliding_window=3,
                                    layer_types=["full_attention", "sliding_attention"]),
}


@pytest.mark.parametrize("keys", CONFIGS.values(), ids=CONFIGS.keys())
def test_logits_match_the_published_equations_in_numpy(keys):
    model = Llama(**{**BASE, **keys}, rng=0, dtype=np.float64)
    rng = np.random.default_rng(7)
    weights = {name: (1.0 + rng.normal(0, 0.3, p.shape) if "norm" in name else rng.normal(0, 0.3, p.shape))
               for name, p in model.state_dict().items()}  # activations of rms ~0.3: eps is far from negligible
    model.load_state_dict(weights)
    assert ("model.layers.1.self_attn.q_proj.bias" in weights) == bool(keys.get("attention_bias"))
    assert ("lm_head.weight" in weights) == (keys.get("tie_embeddings") is False)
    idx = rng.integers(0, BASE["vocab_size"], (2, 12))
    want = llama_reference(weights, idx, model.config)
    logits, _ = model(idx)
    assert logits.dtype == np.float64 and np.abs(want).max() > 0.5
    np.testing.assert_allclose(logits.data, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())


def test_the_oracle_sees_every_regime_of_llama3_scaling():
    """A self-check of the test: the scaled frequencies differ from the plain ones in two of three regimes."""
    plain, scaled = inverse_frequencies(8, 100.0, None), inverse_frequencies(8, 100.0, LLAMA3)
    assert scaled[0] == plain[0] and scaled[-1] == plain[-1] / 8 and plain[1] / 8 < scaled[1] < plain[1]


def test_the_oracle_window_changes_the_logits():
    """A self-check of the test: a window shorter than the sequence changes what the reference computes."""
    model = Llama(**{**BASE, **CONFIGS["mistral-window-4"]}, rng=0, dtype=np.float64)
    weights = {name: p.data for name, p in model.named_parameters()}
    idx = np.random.default_rng(1).integers(0, BASE["vocab_size"], (1, 12))
    windowed = llama_reference(weights, idx, model.config)
    full = llama_reference(weights, idx, {**model.config, "sliding_window": None})
    assert np.allclose(windowed[:, :4], full[:, :4]) and not np.allclose(windowed[:, 4:], full[:, 4:])
