"""minitrain.nn: the Module API (registration, names, modes, state dicts, freezing, packing, repr) and every layer
gradchecked in float64 on both kernel backends."""

from __future__ import annotations

import numpy as np
import pytest

import minitrain
from minitrain import functional as F
from minitrain import gradcheck, nn
from minitrain.autograd import kernels
from minitrain.autograd.tensor import TAPE, Tensor
from minitrain.common.errors import UserError
from minitrain.optim import AdamW


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def t64(shape, seed=0, scale=1.0) -> Tensor:
    return Tensor(rng(seed).standard_normal(shape) * scale, requires_grad=True, dtype=np.float64)


class TwoLayer(nn.Module):
    """A small model as a student would write it."""

    def __init__(self, dtype=np.float32) -> None:
        super().__init__()
        r = rng(1)
        self.embed = nn.Embedding(5, 4, rng=r, dtype=dtype)
        self.body = nn.Sequential(nn.Linear(4, 6, rng=r, dtype=dtype), nn.Tanh(), nn.Linear(6, 3, rng=r, dtype=dtype))
        self.norm = nn.LayerNorm(3, dtype=dtype)
        self.scale = nn.Parameter(np.full(3, 2.0), dtype=dtype)

    def forward(self, idx):
        return self.norm(self.body(self.embed(idx))) * self.scale


# ---------------------------------------------------------------------------------------------- the Module API


def test_parameters_are_registered_by_assignment_with_dotted_names_in_order():
    model = TwoLayer()
    assert [name for name, _ in model.named_parameters()] == [
        "scale", "embed.weight", "body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias", "norm.weight",
        "norm.bias",
    ]  # fmt: skip
    assert [name for name, _ in model.named_modules()] == ["", "embed", "body", "body.0", "body.1", "body.2", "norm"]
    assert [type(m).__name__ for m in model.children()] == ["Embedding", "Sequential", "LayerNorm"]
    assert model.num_parameters() == 3 + 20 + 4 * 6 + 6 + 6 * 3 + 3 + 3 + 3


def test_reassigning_an_attribute_replaces_what_it_registered():
    model = TwoLayer()
    model.norm = nn.ReLU()  # a module without parameters now stands where the LayerNorm was
    model.scale = None
    assert "norm.weight" not in dict(model.named_parameters()) and "scale" not in dict(model.named_parameters())
    del model.embed
    assert [name for name, _ in model.named_modules()] == ["", "body", "body.0", "body.1", "body.2", "norm"]


def test_a_shared_parameter_is_listed_once_under_its_first_name():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3, rng=rng())
            self.b = nn.Linear(3, 3, rng=rng())
            self.b.weight = self.a.weight

    assert [name for name, _ in Tied().named_parameters()] == ["a.weight", "a.bias", "b.bias"]


def test_forgetting_super_init_is_a_clear_error():
    class Broken(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.zeros(2))

    with pytest.raises(AttributeError, match=r"call super\(\).__init__\(\)"):
        Broken()


def test_train_and_eval_reach_every_module_and_inference_restores_the_mode():
    model = TwoLayer()
    assert all(m.training for m in model.modules())
    model.eval()
    assert not any(m.training for m in model.modules())
    model.train()
    with nn.inference(model):
        assert not any(m.training for m in model.modules())
        assert not TAPE.recording
    assert all(m.training for m in model.modules()) and TAPE.recording


def test_state_dict_round_trip_and_one_error_listing_every_problem():
    source, target = TwoLayer(), TwoLayer()
    for p in source.parameters():
        p.data[...] = rng(9).standard_normal(p.shape)
    target.load_state_dict(source.state_dict())
    idx = np.array([[0, 4, 2]])
    np.testing.assert_array_equal(source(idx).data, target(idx).data)
    state = source.state_dict()
    state["body.0.weight"] = state["body.0.weight"].copy()
    state["body.0.weight"][0, 0] = 123.0
    assert source.body[0].weight.data[0, 0] != 123.0  # state_dict hands out copies

    bad = source.state_dict()
    del bad["norm.bias"]
    bad["head.weight"] = np.zeros(2)
    bad["body.2.weight"] = np.zeros((7, 3))
    before = target.state_dict()
    with pytest.raises(UserError) as error:
        target.load_state_dict(bad, source="x.safetensors")
    message = str(error.value)
    assert message.startswith("x.safetensors does not fit this TwoLayer: ")
    assert "missing tensor 'norm.bias'" in message and "unexpected tensor 'head.weight'" in message
    assert "tensor 'body.2.weight' has shape [7, 3], the model expects [6, 3]" in message
    assert all(np.array_equal(before[k], v) for k, v in target.state_dict().items())  # nothing was copied


def test_freeze_by_glob_and_requires_grad():
    model = TwoLayer()
    assert model.freeze(["body.0.*", "scale"]) == ["scale", "body.0.weight", "body.0.bias"]
    assert model.num_parameters(trainable_only=True) == model.num_parameters() - 3 - 24 - 6
    assert [name for name, _ in model.trainable_parameters()] == [
        "embed.weight", "body.2.weight", "body.2.bias", "norm.weight", "norm.bias"]
    model(np.array([[1, 2]])).sum().backward()
    assert model.body[0].weight.grad is None and model.body[2].weight.grad is not None
    with pytest.raises(ValueError, match=r"freeze: 'body\.9\.\*', 'Scale' matches no parameter"):
        model.freeze(["body.9.*", "Scale", "norm.*"])
    assert model.norm.weight.requires_grad  # a bad pattern freezes nothing, not even the good ones
    assert model.freeze("norm") == ["norm.weight", "norm.bias"]  # a module path freezes what lives under it
    with pytest.raises(ValueError, match="'bod' matches no parameter"):
        model.freeze("bod")  # a prefix of a name is not a module path
    model.requires_grad_(False)
    assert model.num_parameters(trainable_only=True) == 0
    model.body.requires_grad_(True)
    assert model.num_parameters(trainable_only=True) == 24 + 6 + 18 + 3


def test_repr_prints_the_tree_with_shapes_counts_and_frozen_parameters():
    model = TwoLayer()
    model.freeze("embed.*")
    text = repr(model)
    assert text.splitlines()[0] == "TwoLayer()  scale [3]: 3  # 80 parameters, 60 trainable"
    assert "  (embed): Embedding(5, 4)  weight [5, 4] frozen: 20" in text
    assert "  (body): Sequential()\n    (0): Linear(4 → 6)  weight [4, 6], bias [6]: 30\n    (1): Tanh()" in text
    assert "(norm): LayerNorm(3)  weight [3], bias [3]: 6" in text


# ---------------------------------------------------------------------------------------------- packing


def test_pack_makes_every_parameter_a_view_of_one_flat_buffer_with_frozen_ones_last():
    model = TwoLayer()
    model.freeze("body.0.*")
    values = model.state_dict()
    buffer = model.pack_parameters()
    assert model.buffer is buffer
    assert buffer.names == ["embed.weight", "body.2.weight", "scale", "body.2.bias", "norm.weight", "norm.bias"]
    assert buffer.frozen_names == ["body.0.weight", "body.0.bias"]
    assert buffer.size == model.num_parameters() and buffer.trainable_size == model.num_parameters(True)
    assert buffer.grad.size == buffer.trainable_size  # frozen parameters have no gradient at all
    for name, p in model.named_parameters():
        assert p.data.base is buffer.data and np.array_equal(p.data, values[name])
        assert (p.grad is None) if name.startswith("body.0") else (p.grad.base is buffer.grad)
    model(np.array([[1, 2, 3]])).sum().backward()
    assert buffer.grad.any()
    model.zero_grad()
    assert not buffer.grad.any()


def test_repacking_keeps_the_values_and_the_optimizer_sees_a_stale_layout():
    model = TwoLayer()
    model.pack_parameters()
    opt = AdamW(model.trainable_parameters(), lr=0.1, buffer=model.buffer)
    model.freeze("norm.*")  # after the optimizer was built: it must not go on updating norm
    with pytest.raises(RuntimeError, match=r"norm\.weight was frozen after the optimizer was built"):
        opt.step()
    before = model.state_dict()
    model.pack_parameters()
    assert all(np.array_equal(before[k], v) for k, v in model.state_dict().items())
    with pytest.raises(ValueError, match=r"\['norm.bias', 'norm.weight'\] are frozen"):
        AdamW(model.named_parameters(), lr=0.1, buffer=model.buffer)


def test_frozen_parameters_stay_bitwise_fixed_while_the_rest_trains():
    model = TwoLayer()
    model.freeze(["embed.*", "body.2.bias"])
    frozen = {n: p.data.copy() for n, p in model.named_parameters() if not p.requires_grad}
    trainable = {n: p.data.copy() for n, p in model.trainable_parameters()}
    model.pack_parameters()
    opt = AdamW(model.trainable_parameters(), lr=0.05, weight_decay=0.1, buffer=model.buffer)
    idx, target = np.array([[0, 1, 2, 3, 4]]), rng(3).integers(0, 3, (1, 5))
    for _ in range(5):
        opt.zero_grad()
        F.cross_entropy(model(idx), target).backward()
        opt.step()
    params = dict(model.named_parameters())
    assert all(np.array_equal(params[n].data, v) for n, v in frozen.items())
    assert all(not np.array_equal(params[n].data, v) for n, v in trainable.items())
    assert set(opt.state_dict()["buffers"]) == {f"{k}.{n}" for k in ("exp_avg", "exp_avg_sq") for n in trainable}


# ---------------------------------------------------------------------------------------------- layers


@pytest.fixture(params=kernels.BACKENDS)
def backend(request):
    with kernels.use_backend(request.param):
        yield request.param


def check_layer(layer: nn.Module, x: Tensor | np.ndarray, *args) -> None:
    """Float64 central differences for the input (when it is a tensor) and every parameter of the layer."""
    for p in layer.parameters():  # a non-trivial point: gains and biases away from 1 and 0
        p.data[...] += rng(5).normal(0, 0.3, p.shape)
    inputs = ([x] if isinstance(x, Tensor) else []) + layer.parameters()
    assert gradcheck(lambda *_: layer(x, *args), inputs)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("activation", [None, "gelu"])
def test_linear_gradcheck(backend, bias, activation):
    check_layer(nn.Linear(4, 3, bias, activation, rng=rng(), dtype=np.float64), t64((2, 3, 4)))


def test_embedding_gradcheck_with_repeated_ids(backend):
    check_layer(nn.Embedding(5, 3, rng=rng(), dtype=np.float64), np.array([[0, 2, 2], [4, 0, 2]]))


def test_layer_norm_gradcheck(backend):
    check_layer(nn.LayerNorm(6, dtype=np.float64), t64((2, 3, 6)))


@pytest.mark.parametrize("activation", [nn.GELU(), nn.ReLU(), nn.Tanh(), nn.Sigmoid(), nn.Softmax(axis=1)])
def test_activation_gradcheck(backend, activation):
    x = Tensor(rng(2).standard_normal((3, 5)) + 0.01, requires_grad=True, dtype=np.float64)  # never at relu's kink
    check_layer(activation, x)


def test_sigmoid_is_exact_and_never_overflows():
    x = np.array([-800.0, -30.0, -1.0, 0.0, 2.0, 40.0, 800.0])
    with np.errstate(over="raise"):
        y = nn.Sigmoid()(Tensor(x, dtype=np.float64)).data
    np.testing.assert_allclose(y, [0.0, 1 / (1 + np.exp(30)), 1 / (1 + np.exp(1)), 0.5, 1 / (1 + np.exp(-2)), 1, 1],
                               rtol=1e-15, atol=0)


def test_sequential_and_transformer_blocks_gradcheck(backend):
    stack = nn.Sequential(nn.Linear(4, 5, rng=rng(), dtype=np.float64), nn.Tanh(), nn.Dropout(0.0),
                          nn.Linear(5, 2, rng=rng(1), dtype=np.float64))  # fmt: skip
    check_layer(stack, t64((2, 4)))
    pad = np.array([[True, True, True, False], [True, True, True, True]])
    check_layer(nn.MLP(4, 6, rng=rng(), dtype=np.float64), t64((2, 4, 4)))
    check_layer(nn.CausalSelfAttention(4, 2, rng=rng(), scale=0.7, dtype=np.float64), t64((2, 4, 4)), pad)
    check_layer(nn.Block(4, 2, 8, rng=rng(), dtype=np.float64), t64((2, 4, 4)), pad)


def test_linear_init_and_the_rng_it_draws_from():
    weights = nn.Linear(400, 300, rng=rng()).weight.data
    assert weights.shape == (400, 300) and weights.dtype == np.float32
    assert abs(weights.std() - 1 / 20) < 0.001  # LeCun: std 1/sqrt(in)
    assert np.array_equal(nn.Linear(3, 2, rng=rng(4)).weight.data, nn.Linear(3, 2, rng=rng(4)).weight.data)
    # An explicit rng is drawn from exactly as before the default generator existed: N(0, 1/in) in one draw.
    expected = rng(4).normal(0.0, 1 / np.sqrt(3), size=(3, 2)).astype(np.float32)
    assert np.array_equal(nn.Linear(3, 2, rng=rng(4)).weight.data, expected)


def layers_from_the_default_generator() -> list[np.ndarray]:
    """Every random-init layer of minitrain.nn built without an rng, as its state's arrays."""
    layers = [nn.Linear(4, 32), nn.Embedding(10, 4), nn.CausalSelfAttention(8, 2), nn.MLP(8, 16), nn.Block(8, 2, 16),
              nn.LoRALinear(nn.Linear(6, 5), rank=2, alpha=4.0)]
    return [array for layer in layers for array in layer.state_dict().values()]


def test_layers_without_an_rng_draw_from_the_default_generator_manual_seed_seeds():
    assert nn.Linear(4, 32).weight.shape == (4, 32)  # as every PyTorch user writes it
    minitrain.manual_seed(3)
    first = layers_from_the_default_generator()
    minitrain.manual_seed(3)
    again = layers_from_the_default_generator()
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    minitrain.manual_seed(4)
    assert not np.array_equal(nn.Linear(4, 32).weight.data, first[0])


def test_the_default_generator_and_an_explicit_rng_are_independent():
    minitrain.manual_seed(5)
    alone = nn.Linear(3, 2).weight.data
    minitrain.manual_seed(5)
    explicit = nn.Linear(3, 2, rng=rng(9)).weight.data  # draws nothing from the default generator ...
    assert np.array_equal(nn.Linear(3, 2).weight.data, alone)
    minitrain.manual_seed(6)  # ... and the default generator's seed changes nothing drawn from an explicit rng
    assert np.array_equal(nn.Linear(3, 2, rng=rng(9)).weight.data, explicit)


def test_dropout_module_uses_its_rng_only_in_training():
    x = Tensor(np.ones((4, 50)))
    drop = nn.Dropout(0.5, rng=rng(3))
    y = drop(x).data
    assert set(np.unique(y)) == {0.0, 2.0}
    assert np.array_equal(drop.eval()(x).data, x.data)
    with pytest.raises(ValueError, match="p must be in"):
        nn.Dropout(1.0)
    drop = nn.Dropout(0.5)  # no rng: the masks come from the default generator, reseeded in place
    minitrain.manual_seed(7)
    mask = drop(x).data
    minitrain.manual_seed(7)
    assert np.array_equal(drop(x).data, mask)
