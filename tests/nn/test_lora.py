"""LoRA (minitrain/nn/lora.py, minitrain/lora/): gradients by central differences in float64, the base bitwise
frozen, targets by name (GPT-2's and the spec's Llama names), adapter tensors per bias mode, and merging."""

from __future__ import annotations

import numpy as np
import pytest

from minitrain import functional as F
from minitrain import gradcheck
from minitrain.autograd import kernels
from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import UserError
from minitrain.lora import (
    LoraSettings,
    adapter_names,
    adapter_state,
    add_adapters,
    base_weight_bytes,
    linear_paths,
    load_adapter_state,
    merge_adapters,
    merged_state,
    resolve_targets,
    settings_of,
)
from minitrain.models.minigpt import MiniGPT
from minitrain.models.mlp_lm import MLPLanguageModel
from minitrain.models.registry import linear_module_paths
from minitrain.nn import Linear, Module, inference
from minitrain.nn.lora import LoRALinear, init_lora_a
from minitrain.nn.quantized import Linear4Bit
from minitrain.optim import AdamW

LAB = dict(n_layer=2, n_head=4, d_model=64, d_ff=256, vocab_size=64, max_seq_len=32)
ALL = ("c_attn", "attn.c_proj", "c_fc", "mlp.c_proj")


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def settings(targets=ALL, model=None, **kw) -> LoraSettings:
    paths, problems = resolve_targets(list(targets), None, linear_paths(model or MiniGPT(**LAB, rng=0)))
    assert not problems
    return LoraSettings(**{"rank": 4, "alpha": 8, "targets": tuple(paths), **kw})


@pytest.fixture(params=kernels.BACKENDS)
def backend(request):
    with kernels.use_backend(request.param):
        yield request.param


@pytest.mark.parametrize("activation", [None, "gelu"])
@pytest.mark.parametrize("four_bit", [False, True])
def test_lora_linear_gradcheck(backend, activation, four_bit):
    base = Linear(64, 5, activation=activation, rng=rng(), dtype=np.float64)
    base.bias.data[...] = rng(1).normal(0, 0.3, 5)
    base.requires_grad_(False)
    if four_bit:
        base = Linear4Bit(base)
    layer = LoRALinear(base, rank=3, alpha=6.0, rng=rng(2), init="gaussian")
    layer.lora_B.data[...] = rng(3).normal(0, 0.5, layer.lora_B.shape)  # B = 0 would hide A's gradient
    x = Tensor(rng(4).standard_normal((2, 3, 64)), requires_grad=True, dtype=np.float64)
    assert gradcheck(lambda *_: layer(x), [x, layer.lora_A, layer.lora_B])
    # y = base(x) + (alpha/rank)·x·A·B, the update before the activation
    weight = base.weight.dequantize() if four_bit else base.weight.data
    pre = x.data @ weight + base.bias.data + 2.0 * x.data @ layer.lora_A.data @ layer.lora_B.data
    expected = F.gelu(Tensor(pre, dtype=np.float64)).data if activation else pre
    np.testing.assert_allclose(layer(x).data, expected, rtol=1e-10)


def test_b_starts_at_zero_so_the_adapted_model_starts_as_the_base():
    model = MiniGPT(**LAB, rng=0)
    idx = rng().integers(0, 64, (3, 20))
    with inference(model):
        before = model(idx)[0].data
    add_adapters(model, settings(), rng(1))
    with inference(model):
        np.testing.assert_array_equal(model(idx)[0].data, before)


@pytest.mark.parametrize("init", ["gaussian", "kaiming", "xavier"])
def test_a_is_drawn_with_the_spread_its_init_names(init):
    a = init_lora_a(256, 8, init, rng())
    uniform_std = 1 / np.sqrt(3)  # of U(-1, 1)
    expected_std = {"gaussian": 1 / 8, "kaiming": uniform_std / np.sqrt(256), "xavier": uniform_std * np.sqrt(6 / 264)}
    assert a.shape == (256, 8) and abs(a.std() / expected_std[init] - 1) < 0.05


def test_the_base_stays_bitwise_frozen_while_the_adapters_train():
    model = MiniGPT(**LAB, dropout=0.1, rng=0)
    add_adapters(model, settings(["c_attn", "mlp.c_proj"], dropout=0.1), rng(1))
    before = {n: p.data.copy() for n, p in model.named_parameters()}
    model.pack_parameters()
    opt = AdamW(model.trainable_parameters(), lr=1e-2, weight_decay=0.1, buffer=model.buffer)
    idx = rng(2).integers(0, 64, (4, 20))
    for _ in range(3):
        opt.zero_grad()
        model(idx[:, :-1], idx[:, 1:])[1].backward()
        opt.step()
    trained = set(adapter_names(model))
    assert trained == {f"transformer.h.{i}.{m}.lora_{ab}" for i in (0, 1) for m in ("attn.c_attn", "mlp.c_proj")
                       for ab in "AB"}
    for name, p in model.named_parameters():
        assert np.array_equal(p.data, before[name]) == (name not in trained), name
    assert model.buffer.trainable_size == sum(p.size for n, p in model.named_parameters() if n in trained)


@pytest.mark.parametrize(("bias", "extra"), [
    ("none", set()),
    ("lora_only", {"transformer.h.0.attn.c_attn.base_layer.bias", "transformer.h.1.attn.c_attn.base_layer.bias"}),
    ("all", None),
])
def test_the_bias_setting_names_the_trained_biases_as_peft_does(bias, extra):
    model = MiniGPT(**LAB, rng=0)
    add_adapters(model, settings(["c_attn"], bias=bias), rng(1))
    names = set(adapter_names(model))
    lora = {f"transformer.h.{i}.attn.c_attn.lora_{ab}" for i in (0, 1) for ab in "AB"}
    if extra is None:  # every bias: LayerNorms' and the layers' not adapted too
        extra = {n for n, _ in model.named_parameters() if n.endswith(".bias")}
        assert "transformer.ln_f.bias" in extra and "transformer.h.0.mlp.c_fc.bias" in extra
    assert names == lora | extra
    assert {n for n, p in model.named_parameters() if p.requires_grad} == names
    assert set(adapter_state(model)) == names


@pytest.mark.parametrize("quantize_base", [False, True])
def test_merged_model_computes_what_the_adapted_model_did(quantize_base):
    model = MiniGPT(**LAB, rng=0)
    base = {name: array.copy() for name, array in model.state_dict().items()}
    # Two of the four linear layers adapted: under QLoRA the other two are merged from their 4-bit blocks too.
    add_adapters(model, settings(("c_attn", "mlp.c_proj"), bias="all", quantize_base=quantize_base,
                                 double_quantize=True), rng(1))
    for name, p in model.named_parameters():
        if name in adapter_names(model):
            p.data[...] += rng(2).normal(0, 0.05, p.shape)
    idx = rng(3).integers(0, 64, (4, 24))
    with inference(model):
        adapted = model(idx)[0].data
    folded = merged_state(base, adapter_state(model), settings_of(model), linear_module_paths(LAB))
    merge_adapters(model)
    # The NumPy fold (what export writes, building no model) is the merged model's state, bit for bit.
    assert list(folded) == list(model.state_dict())
    assert all(np.array_equal(folded[n], a) and folded[n].dtype == a.dtype for n, a in model.state_dict().items())
    assert not np.array_equal(folded["transformer.h.0.attn.c_attn.weight"], base["transformer.h.0.attn.c_attn.weight"])
    assert settings_of(model) is None and not any(isinstance(m, LoRALinear | Linear4Bit) for m in model.modules())
    assert set(model.state_dict()) == set(MiniGPT(**LAB, rng=0).state_dict())
    with inference(model):
        merged = model(idx)[0].data
    assert np.abs(merged - adapted).max() < 2e-5
    assert np.abs(adapted).max() > 0.5  # the comparison is not between near-zero logits


def test_qlora_keeps_the_linear_weights_in_about_a_seventh_of_the_bytes():
    model = MiniGPT(**LAB, rng=0)
    full = base_weight_bytes(model)
    add_adapters(model, settings(["c_attn"], quantize_base=True), rng(1))
    assert full == 4 * 2 * (64 * 192 + 64 * 64 + 64 * 256 + 256 * 64)
    n = full // 4
    assert base_weight_bytes(model) == n // 2 + 4 * n // 64  # 4-bit codes and one float32 absmax per 64
    model2 = MiniGPT(**LAB, rng=0)
    add_adapters(model2, settings(["c_attn"], quantize_base=True, double_quantize=True), rng(1))
    assert base_weight_bytes(model2) < base_weight_bytes(model) < full / 6


def test_adapter_state_loads_into_a_freshly_adapted_model():
    model = MiniGPT(**LAB, rng=0)
    add_adapters(model, settings(["c_fc"]), rng(1))
    model.transformer.h[0].mlp.c_fc.lora_B.data[...] = 1.0
    state = adapter_state(model)
    other = add_adapters(MiniGPT(**LAB, rng=0), settings(["c_fc"]), rng(5))
    load_adapter_state(other, state, "adapter.safetensors")
    assert all(np.array_equal(a, adapter_state(other)[n]) for n, a in state.items())
    with pytest.raises(UserError, match=r"missing tensor.*unexpected tensor 'x'"):
        load_adapter_state(other, {**{k: v for k, v in list(state.items())[1:]}, "x": np.zeros(1)}, "f")
    with pytest.raises(UserError, match="already has LoRA adapters"):
        add_adapters(other, settings(["c_fc"]), rng(1))


@pytest.mark.parametrize(("targets", "pattern", "chosen", "problem"), [
    (["c_attn"], None, ["h.0.attn.c_attn", "h.1.attn.c_attn"], None),
    (["c_proj"], None, ["h.0.attn.c_proj", "h.0.mlp.c_proj", "h.1.attn.c_proj", "h.1.mlp.c_proj"], None),
    (["transformer.h.1.mlp.c_fc"], None, ["h.1.mlp.c_fc"], None),
    (["q_proj", "k_proj", "v_proj", "o_proj"], None, ["h.0.attn.c_attn", "h.0.attn.c_proj", "h.1.attn.c_attn",
                                                      "h.1.attn.c_proj"], None),
    (["up_proj", "down_proj"], None, ["h.0.mlp.c_fc", "h.0.mlp.c_proj", "h.1.mlp.c_fc", "h.1.mlp.c_proj"], None),
    ([], r"transformer\.h\.0\..*", ["h.0.attn.c_attn", "h.0.attn.c_proj", "h.0.mlp.c_fc", "h.0.mlp.c_proj"], None),
    (["q_proj", "v_proj"], None, [], "write c_attn"),
    (["gate_proj"], None, [], "no gate projection"),
    (["c_atn"], None, [], "names no linear layer"),
    ([], r".*\.self_attn\.(q|k|v|o)_proj", [], "matches no linear layer"),
    ([], "(", [], "not a regular expression"),
])
def test_targets_by_name_suffix_pattern_and_the_specs_llama_names(targets, pattern, chosen, problem):
    paths, problems = resolve_targets(targets, pattern, linear_paths(MiniGPT(**LAB, rng=0)))
    assert paths == [f"transformer.{c}" for c in chosen]
    if problem is None:
        assert problems == {}
    else:
        assert any(problem in message for message in problems.values()), problems


@pytest.mark.parametrize("model", [MiniGPT(**LAB, rng=0), MLPLanguageModel(64, 32, hidden=[32, 16], rng=0)])
def test_the_linear_layers_a_config_names_are_the_built_models(model):
    assert linear_module_paths(model.config) == linear_paths(model)


def test_wrapping_a_linear_by_hand_freezes_its_base():
    """The trap of issue 47: LoRALinear(base) left base_layer.weight trainable, so it got a gradient and an optimizer
    built from trainable_parameters() trained it, though the layer's docstring says the base never trains."""
    layer = LoRALinear(Linear(6, 5, rng=rng()), rank=2, alpha=4, rng=rng(1))
    assert [name for name, _ in layer.trainable_parameters()] == ["lora_A", "lora_B"]
    layer(Tensor(rng(2).normal(0, 1, (3, 6)))).sum().backward()
    assert layer.base_layer.weight.grad is None and layer.base_layer.bias.grad is None
    assert layer.lora_A.grad is not None and layer.lora_B.grad is not None


class TwoLayers(Module):
    """A user's own network, with no `config` of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = Linear(6, 8, activation="gelu", rng=rng(3))
        self.out = Linear(8, 4, rng=rng(4))

    def forward(self, x: Tensor) -> Tensor:
        return self.out(self.hidden(x))


def test_add_adapters_and_merge_work_on_any_module():
    model, x = TwoLayers(), Tensor(rng(5).normal(0, 1, (3, 6)))
    add_adapters(model, LoraSettings(rank=2, alpha=4, targets=("hidden", "out")), rng(1))
    assert [n for n, _ in model.trainable_parameters()] == [f"{m}.lora_{ab}" for m in ("hidden", "out") for ab in "AB"]
    assert adapter_names(model) == [n for n, _ in model.trainable_parameters()]
    model.out.lora_B.data[...] = rng(6).normal(0, 0.5, model.out.lora_B.shape)
    adapted = model(x).data
    merge_adapters(model)
    assert isinstance(model.out, Linear) and settings_of(model) is None
    np.testing.assert_allclose(model(x).data, adapted, rtol=1e-5, atol=1e-6)
