"""The Llama family (minitrain/models/llama.py and its layers): a float64 gradcheck of a whole tiny model, the KV
cache against full recomputation, packed documents against separate runs, padding, grouped-query attention
against multi-head attention with repeated key/value weights, Llama 3's rotary scaling, LoRA targets by Hugging
Face names, and sampling. The logits against the published equations in NumPy: test_llama_oracle.py; parity with
transformers itself is scripts/check_llama_parity.py (torch is not a test dependency)."""

import numpy as np
import pytest

from minitrain import gradcheck
from minitrain.common.errors import ArgumentError
from minitrain.config import ConfigError, load_config
from minitrain.data.tokenizer import CharTokenizer
from minitrain.lora import LoraSettings, add_adapters, linear_paths, resolve_targets
from minitrain.models.decoder import Decoder
from minitrain.models.llama import FAMILY, Llama, parameter_shapes
from minitrain.models.registry import build_model, linear_module_paths, tensor_count
from minitrain.models.sampling import generate, nucleus
from minitrain.nn import inference
from minitrain.nn.rotary import inverse_frequencies, rope_positions

TINY = dict(n_layer=2, n_head=4, n_kv_head=2, d_model=16, d_ff=24, vocab_size=19, max_seq_len=24)
HF_NAMES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def tiny(dtype=np.float32, rng=0, **keys):
    """A small model with weights far from their init (N(0, 0.02²) makes every position predict alike), and norms
    and biases away from 1 and 0, so every term is exercised and greedy decoding does not repeat one token."""
    model = Llama(**{**TINY, **keys}, rng=rng, dtype=dtype)
    draws = np.random.default_rng(1)
    for _, p in model.named_parameters():
        p.data += draws.normal(0, 0.05 if p.ndim == 1 else 0.5, p.shape).astype(dtype)
    return model


def ids(shape, seed=0, vocab=TINY["vocab_size"]):
    return np.random.default_rng(seed).integers(0, vocab, shape)


def logits_of(model, idx, **masks):
    with inference(model):
        return model(idx, **masks)[0].data


# ----------------------------------------------------------------------------------------- structure
def test_names_shapes_and_init_follow_hugging_face():
    model = Llama(**TINY, attention_bias=True, tie_embeddings=False, rng=0)
    names = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    assert names == parameter_shapes(model.config)
    assert len(names) == tensor_count(model.config)
    attn = "model.layers.0.self_attn"
    assert names[:4] == [("model.embed_tokens.weight", (19, 16)), (f"{attn}.q_proj.weight", (16, 16)),
                         (f"{attn}.q_proj.bias", (16,)), (f"{attn}.k_proj.weight", (16, 8))]
    assert names[-2:] == [("model.norm.weight", (16,)), ("lm_head.weight", (16, 19))]
    weights = np.concatenate([p.data.ravel() for n, p in model.named_parameters() if n.endswith("proj.weight")])
    assert abs(weights.std() - 0.02) < 0.002 and abs(weights.mean()) < 0.002  # N(0, 0.02²)
    assert all((p.data == 1).all() for n, p in model.named_parameters() if "norm" in n)
    assert all((p.data == 0).all() for n, p in model.named_parameters() if n.endswith(".bias"))
    tied = Llama(**TINY, rng=0)
    assert "lm_head.weight" not in dict(tied.named_parameters())
    assert tied.state_dict()["model.embed_tokens.weight"].tobytes() == model.state_dict()[
        "model.embed_tokens.weight"].tobytes()  # the same draws, in the same order: the same seed, the same model


def test_the_constructor_refuses_shapes_that_do_not_fit():
    with pytest.raises(ArgumentError, match="multiple of n_kv_head"):
        Llama(**{**TINY, "n_kv_head": 3})
    with pytest.raises(ArgumentError, match="divisible by n_head"):
        Llama(**{**TINY, "d_model": 18})
    with pytest.raises(ArgumentError, match="llama3"):
        Llama(**TINY, rope_scaling={"rope_type": "yarn", "factor": 4.0})
    assert Llama(**{**TINY, "d_model": 18}, head_dim=4).config["head_dim"] == 4


def test_the_whole_model_passes_gradcheck_in_float64():
    """Every parameter of a 2-layer model with q/k/v biases, GQA and an untied head, through padding and packing."""
    model = tiny(np.float64, d_model=4, n_head=2, n_kv_head=1, d_ff=3, vocab_size=5, attention_bias=True,
                 tie_embeddings=False)
    idx = np.array([[1, 2, 3, 4, 0], [0, 4, 4, 2, 1]])
    targets = np.roll(idx, -1, axis=1)
    pad = np.array([[True] * 5, [False, True, True, True, True]])
    segments = np.array([[1, 1, 1, 2, 2], [0, 1, 1, 1, 1]])
    params = [p for _, p in model.named_parameters()]
    assert gradcheck(lambda *_: model(idx, targets, pad, pad, segments)[1], params)


# ----------------------------------------------------------------------------------------- masks, positions
def test_positions_count_real_tokens_of_the_segment():
    pad = np.array([[False, False, True, True, True]])
    assert rope_positions(1, 5, pad).tolist() == [[0, 0, 0, 1, 2]]
    segments = np.array([[1, 1, 1, 2, 2, 3]])
    assert rope_positions(1, 6, None, segments).tolist() == [[0, 1, 2, 0, 1, 0]]
    assert rope_positions(1, 2, None, None, start=np.array([7])).tolist() == [[7, 8]]


def test_packed_documents_equal_each_document_alone():
    model = tiny(np.float64)
    first, second = ids((1, 5), 1), ids((1, 7), 2)
    packed = np.concatenate([first, second, ids((1, 3), 3)], axis=1)  # the last 3 positions: padding
    segments = np.array([[1] * 5 + [2] * 7 + [0] * 3])
    out = logits_of(model, packed, attn_pad_mask=segments > 0, segment_ids=segments)
    np.testing.assert_allclose(out[:, :5], logits_of(model, first), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out[:, 5:12], logits_of(model, second), rtol=1e-10, atol=1e-12)


def test_left_and_right_padding_leave_the_real_tokens_unchanged():
    model = tiny(np.float64)
    idx = ids((1, 6), 4)
    alone = logits_of(model, idx)
    left = np.concatenate([ids((1, 3), 5), idx], axis=1)
    out = logits_of(model, left, attn_pad_mask=np.arange(9)[None] >= 3)
    np.testing.assert_allclose(out[:, 3:], alone, rtol=1e-10, atol=1e-12)
    right = np.concatenate([idx, ids((1, 3), 5)], axis=1)
    out = logits_of(model, right, attn_pad_mask=np.arange(9)[None] < 6)
    np.testing.assert_allclose(out[:, :6], alone, rtol=1e-10, atol=1e-12)


def test_grouped_query_attention_equals_multi_head_with_repeated_key_value_weights():
    grouped = tiny(np.float64, attention_bias=True)
    full = Llama(**{**TINY, "n_kv_head": TINY["n_head"]}, attention_bias=True, rng=0, dtype=np.float64)
    group, head_dim = TINY["n_head"] // TINY["n_kv_head"], TINY["d_model"] // TINY["n_head"]
    state = {}
    for name, array in grouped.state_dict().items():
        if ".k_proj." in name or ".v_proj." in name:  # kv head j serves query heads j·G .. j·G + G − 1
            heads = array.reshape(*array.shape[:-1], TINY["n_kv_head"], head_dim)
            array = np.repeat(heads, group, axis=-2).reshape(*array.shape[:-1], -1)
        state[name] = array
    full.load_state_dict(state)
    idx = ids((2, 9), 6)
    np.testing.assert_allclose(logits_of(full, idx), logits_of(grouped, idx), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------------------- the KV cache
def full_recomputation(model, prompt, steps):
    """Greedy decoding that re-runs the whole sequence every step; the logits of each step's last position."""
    sequence, logits = list(prompt), []
    for _ in range(steps):
        last = logits_of(model, np.array([sequence]))[0, -1]
        logits.append(last)
        sequence.append(int(np.argmax(last)))
    return sequence[len(prompt):], np.array(logits)


def test_cached_generation_equals_full_recomputation():
    model = tiny(rope_theta=100.0)  # a small θ: the positions matter in every frequency
    prompt = ids(5, 7).tolist()
    expected, expected_logits = full_recomputation(model, prompt, 12)
    assert model.generate(prompt, 12) == [expected]
    from minitrain.models.kv_cache import KVCache

    cache = KVCache(TINY["n_layer"], 1, 17, TINY["n_kv_head"], 4)
    sequence = np.array([prompt])
    with inference(model):
        logits = [model.step(sequence, np.ones(sequence.shape, bool), cache)[0]]
        for token in expected[:-1]:
            logits.append(model.step(np.array([[token]]), np.ones((1, 1), bool), cache)[0])
    assert np.abs(np.array(logits) - expected_logits).max() <= 1e-5


def test_batched_prompts_of_different_lengths_generate_as_each_alone():
    model = tiny(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 16})
    prompts = [ids(3, 8).tolist(), ids(7, 9).tolist(), ids(1, 10).tolist()]
    together = model.generate(prompts, 8)
    assert together == [model.generate(p, 8)[0] for p in prompts]
    assert together == [full_recomputation(model, p, 8)[0] for p in prompts]


def test_generation_stops_at_eos_and_samples_reproducibly():
    model = tiny()
    prompt = ids(4, 11).tolist()
    greedy = model.generate(prompt, 10)[0]
    eos = greedy[-1]
    assert model.generate(prompt, 10, eos_id=eos)[0] == greedy[: greedy.index(eos)]  # EOS ends it, not returned
    assert model.generate(prompt, 10, temperature=1.0, top_k=1, rng=5) == [greedy]  # top-1 is greedy
    sampled = model.generate([prompt, prompt], 10, temperature=2.0, top_p=0.9, rng=3)
    assert sampled == model.generate([prompt, prompt], 10, temperature=2.0, top_p=0.9, rng=3)
    assert sampled[0] != sampled[1]  # two rows, two draws
    with pytest.raises(ValueError, match="max_seq_len"):
        model.generate(prompt, 30)
    with pytest.raises(ValueError, match="at least one token"):
        model.generate([prompt, []], 3)


def test_nucleus_keeps_the_likeliest_tokens_up_to_top_p():
    p = np.array([0.1, 0.5, 0.3, 0.1])
    np.testing.assert_allclose(nucleus(p, 0.7), [0, 0.625, 0.375, 0])  # 0.5 < 0.7, 0.5 + 0.3 reaches it
    np.testing.assert_allclose(nucleus(p, 0.5), [0, 1, 0, 0])
    np.testing.assert_allclose(nucleus(p, 1.0), p)


# ----------------------------------------------------------------------------------------- rope scaling
def test_llama3_scaling_slows_only_the_low_frequencies():
    plain = inverse_frequencies(64, 500000.0)
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    scaled = inverse_frequencies(64, 500000.0, scaling)
    wavelength = 2 * np.pi / plain
    fast, slow = wavelength < 8192 / 4, wavelength > 8192 / 1
    np.testing.assert_array_equal(scaled[fast], plain[fast])
    np.testing.assert_allclose(scaled[slow], plain[slow] / 8)
    medium = ~fast & ~slow
    assert medium.any() and ((scaled[medium] < plain[medium]) & (scaled[medium] > plain[medium] / 8)).all()


# ----------------------------------------------------------------------------------------- LoRA, registry
def test_lora_targets_by_hugging_face_names():
    model = Llama(**TINY, rng=0)
    paths = linear_paths(model)
    assert linear_module_paths(model.config) == paths
    chosen, problems = resolve_targets(HF_NAMES, None, paths)
    assert not problems and chosen == paths and len(chosen) == 7 * TINY["n_layer"]
    chosen, problems = resolve_targets(["q_proj", "v_proj"], None, paths)  # GPT-2 would refuse two of three
    assert not problems and chosen == [p for p in paths if p.endswith(("q_proj", "v_proj"))]
    add_adapters(model, LoraSettings(rank=2, alpha=4.0, targets=tuple(chosen)), rng=np.random.default_rng(0))
    trained = [name for name, _ in model.trainable_parameters()]
    assert trained == [f"model.layers.{i}.self_attn.{n}.{ab}" for i in range(2) for n in ("q_proj", "v_proj")
                       for ab in ("lora_A", "lora_B")]
    _, loss = model(ids((2, 6), 12), ids((2, 6), 13))
    loss.backward()
    assert all(np.abs(p.grad).sum() > 0 for name, p in model.trainable_parameters() if name.endswith("lora_B"))


def test_the_family_builds_from_a_config_with_its_defaults():
    model = build_model({"type": "llama", **{k: v for k, v in TINY.items() if k != "n_kv_head"}})
    assert model.config["n_kv_head"] == TINY["n_head"] and model.config["head_dim"] == 4
    assert FAMILY.file_schema.model_validate(model.config).n_kv_head == 4


def test_sampling_text_through_the_cache_equals_the_full_recomputation(monkeypatch):
    """`minitrain sample`'s generate uses the model's KV cache; without it (the sliding-window loop) the same text,
    greedy and sampled, and only ids the tokenizer knows (its vocabulary is smaller than the embedding)."""
    tokenizer = CharTokenizer(sorted(set("comer|R1í")))
    assert tokenizer.vocab_size < TINY["vocab_size"]
    model = tiny()
    cached = [generate(model, tokenizer, "comer|R1|", 10, temperature=t, seed=4) for t in (0.0, 1.5)]
    monkeypatch.delattr(Decoder, "generate")  # where Llama has it from
    assert [generate(model, tokenizer, "comer|R1|", 10, temperature=t, seed=4) for t in (0.0, 1.5)] == cached


def test_a_yaml_config_builds_it_and_refuses_heads_that_do_not_group(tmp_path):
    path = tmp_path / "config.yaml"
    rope = ("{rope_type: llama3, factor: 8, low_freq_factor: 1, high_freq_factor: 4, "
            "original_max_position_embeddings: 16}")
    write = lambda kv: path.write_text(  # noqa: E731
        f"model: {{type: llama, n_layer: 1, n_head: 4, n_kv_head: {kv}, d_model: 16, d_ff: 32, rope_scaling: {rope}}}\n"
        "optimizer: {lr_max: 0.001}\nscheduler: {total_steps: 4}\n", encoding="utf-8")
    write(2)
    model = build_model(load_config(path).model.architecture())
    assert model.config["n_kv_head"] == 2 and model.config["rope_scaling"]["factor"] == 8.0
    write(3)
    with pytest.raises(ConfigError, match=r"model\.n_kv_head: n_head 4 is not a multiple of n_kv_head 3"):
        load_config(path)


@pytest.mark.parametrize("adapt", ["full", "lora", "qlora"])
def test_gradient_checkpointing_gives_the_same_loss_and_gradients_bit_for_bit(adapt):
    """Each layer recomputed in backward (minitrain/autograd/recompute.py): the loss and every trained
    parameter's gradient are the same bytes as without, dropout masks included (the layer's rng is replayed),
    and the tape holds one node per layer instead of the layer's activations."""

    def grads(checkpointing: bool) -> tuple[np.ndarray, dict, int]:
        model = tiny(dropout=0.1, rng=np.random.default_rng(5))
        if adapt != "full":
            add_adapters(model, LoraSettings(rank=2, alpha=4.0, targets=tuple(linear_paths(model)), dropout=0.1,
                                             quantize_base=adapt == "qlora"), rng=np.random.default_rng(0))
        model.gradient_checkpointing = checkpointing
        from minitrain.autograd.tensor import TAPE

        _, loss = model(ids((2, 7), 3), ids((2, 7), 4))
        taped = len(TAPE.nodes)
        loss.backward()
        return loss.data, {n: p.grad.copy() for n, p in model.trainable_parameters()}, taped

    (loss, plain, taped), (loss_c, checked, taped_c) = grads(False), grads(True)
    assert loss.tobytes() == loss_c.tobytes()
    assert plain.keys() == checked.keys() and len(plain) > 0
    assert all(plain[name].tobytes() == checked[name].tobytes() for name in plain)
    assert taped_c < taped / 3  # the layers' insides are not on the tape


def test_checkpointing_is_not_used_for_generation_or_without_a_tape():
    model = tiny()
    expected = model.generate(ids(5, 2).tolist(), 6)
    model.gradient_checkpointing = True
    assert model.generate(ids(5, 2).tolist(), 6) == expected
