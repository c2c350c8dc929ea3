"""docs/pytorch-users.md's table of PyTorch habits, row by row: each row's first cell (PyTorch's spelling) is a key of
`CHECKS`, and its check shows what the row says (works: PyTorch's meaning, checked against NumPy or by hand;
differs: the other behaviour, or the error naming minitrain's way; planned: still missing). A row without a check, or
a check without a row, fails. The page's example program runs too."""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import minitrain
from minitrain import Tensor
from minitrain import functional as F
from minitrain.common.errors import ArgumentError, UserError
from minitrain.lora import LoraSettings, add_adapters
from minitrain.nn import Linear, LoRALinear, Module
from minitrain.optim import SGD, AdamW

DOCS = Path(__file__).resolve().parents[1] / "docs" / "pytorch-users.md"
STATUSES = ("works", "differs", "planned")


def table() -> dict[str, list[str]]:
    """PyTorch's spelling (the first cell, as written) -> the row's other cells."""
    body = DOCS.read_text(encoding="utf-8").split("\n## The habits\n", 1)[1]
    rows = [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in body.splitlines()
            if line.startswith("| ")]
    return {row[0]: row[1:] for row in rows[2:]}  # after the header and its rule


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


class Net(Module):
    """A user's own network: a hidden layer with a bias and a LayerNorm-free output."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = Linear(4, 6, activation="gelu", rng=rng(1))
        self.out = Linear(6, 3, rng=rng(2))

    def forward(self, x: Tensor) -> Tensor:
        return self.out(self.hidden(x))


def loss_of(model: Module) -> Tensor:
    x = Tensor(rng(3).normal(0, 1, (8, 4)))
    return F.cross_entropy(model(x), np.arange(8) % 3)


def steps(make_optimizer: Callable[[Net], object], n: int = 3, pack: bool = False) -> tuple[Net, object]:
    model = Net()
    if pack:
        model.pack_parameters()
    optimizer = make_optimizer(model)
    for _ in range(n):
        optimizer.zero_grad()
        loss_of(model).backward()
        optimizer.step()
    return model, optimizer


def same_weights(a: Module, b: Module) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


# ------------------------------------------------------------------------------------------------- optimizers
def adamw_parameters() -> None:
    by_name, named = steps(lambda m: AdamW(m.named_parameters(), lr=1e-2))
    bare, optimizer = steps(lambda m: AdamW(m.parameters(), lr=1e-2))
    assert same_weights(bare, by_name) and not same_weights(bare, Net())
    assert optimizer.state_dict()["buffers"].keys() == named.state_dict()["buffers"].keys()
    packed, fused = steps(lambda m: AdamW(m.parameters(), lr=1e-2), pack=True)
    assert fused.buffer is packed.buffer and len(fused._segments) == 2  # decay and no-decay: two fused calls
    np.testing.assert_allclose(packed.out.weight.data, by_name.out.weight.data, rtol=1e-5, atol=1e-7)
    frozen = Net()
    frozen.hidden.requires_grad_(False)
    assert [name for name, _ in AdamW(frozen.parameters()).params] == ["out.weight", "out.bias"]


def adamw_betas() -> None:
    torch_style, _ = steps(lambda m: AdamW(m.parameters(), lr=1e-2, betas=(0.8, 0.95)))
    config_style, _ = steps(lambda m: AdamW(m.parameters(), lr=1e-2, beta1=0.8, beta2=0.95))
    assert same_weights(torch_style, config_style) and not same_weights(torch_style, steps(
        lambda m: AdamW(m.parameters(), lr=1e-2))[0])
    with pytest.raises(ArgumentError, match="sgd has no betas"):
        SGD(Net().parameters(), betas=(0.9, 0.99))


def param_groups() -> None:
    """SGD's step is p − lr·g exactly, so each group's lr shows in the update; a group's weight_decay too (AdamW
    with a zero gradient only decays: p·(1 − lr·wd))."""
    model = Net()
    loss_of(model).backward()
    before = {n: p.data.copy() for n, p in model.named_parameters()}
    grads = {n: p.grad.copy() for n, p in model.named_parameters()}
    SGD([{"params": model.hidden.parameters(), "lr": 1e-4}, {"params": model.out.parameters()}], lr=1e-1).step()
    for name, p in model.named_parameters():
        lr = 1e-4 if name.startswith("hidden") else 1e-1
        np.testing.assert_allclose(p.data, before[name] - np.float32(lr) * grads[name], rtol=1e-6, atol=1e-9)
    model.zero_grad()
    bias = model.out.bias.data.copy()
    AdamW([{"params": [model.out.bias], "weight_decay": 0.5}], lr=0.1).step()
    np.testing.assert_allclose(model.out.bias.data, bias * (1 - 0.1 * 0.5), rtol=1e-6)
    with pytest.raises(ArgumentError, match=r"param group 0: \['betas'\].*set every other setting on the optimizer"):
        AdamW([{"params": model.parameters(), "betas": (0.9, 0.9)}])


def weight_decay_skips_1d() -> None:
    model = Net()
    before = {n: p.data.copy() for n, p in model.named_parameters()}
    AdamW(model.parameters(), lr=0.1, weight_decay=0.5).step()  # no gradient yet: only the decay moves anything
    for name, p in model.named_parameters():
        factor = 1 - 0.1 * 0.5 if p.ndim >= 2 else 1.0
        np.testing.assert_allclose(p.data, before[name] * factor, rtol=1e-6, err_msg=name)


def set_lr() -> None:
    model = Net()
    loss_of(model).backward()
    before = {n: p.data.copy() for n, p in model.named_parameters()}
    optimizer = SGD([{"params": model.hidden.parameters(), "lr": 0.2}, {"params": model.out.parameters()}], lr=0.1)
    optimizer.set_lr(0.01)  # the hidden group keeps twice the base lr
    optimizer.step()
    for name, p in model.named_parameters():
        lr = 0.02 if name.startswith("hidden") else 0.01
        np.testing.assert_allclose(p.data, before[name] - np.float32(lr) * p.grad, rtol=1e-6, atol=1e-9)
    with pytest.raises(AttributeError, match=r"optimizer.param_groups: .*optimizer.set_lr\(lr\)"):
        optimizer.param_groups  # noqa: B018


# ------------------------------------------------------------------------------------------------ state dicts
def load_state_dict_strict() -> None:
    source, target = Net(), Net()
    state = {**source.state_dict(), "extra.weight": np.zeros(2, np.float32)}
    del state["out.bias"]
    target.out.weight.data[...], target.out.bias.data[...] = 5.0, 7.0
    with pytest.raises(UserError, match=r"missing tensor 'out.bias'; unexpected tensor 'extra.weight'"):
        target.load_state_dict(state)
    assert np.all(target.out.weight.data == 5.0)  # nothing copied
    missing, unexpected = target.load_state_dict(state, strict=False)
    assert (missing, unexpected) == (["out.bias"], ["extra.weight"])
    np.testing.assert_array_equal(target.out.weight.data, source.out.weight.data)
    assert np.all(target.out.bias.data == 7.0)  # missing: left as it was
    with pytest.raises(UserError, match="has shape"):
        target.load_state_dict({"out.weight": np.zeros((2, 2), np.float32)}, strict=False)


def state_dict_arrays() -> None:
    model = Net()
    state = model.state_dict()
    assert all(type(a) is np.ndarray for a in state.values())
    state["out.weight"][...] = 7.0
    assert not np.any(model.out.weight.data == 7.0)


def save_and_load(tmp_path: Path) -> None:
    model, path = Net(), tmp_path / "net.safetensors"
    minitrain.save({**model.state_dict(), "as_tensor": Tensor(np.arange(3.0))}, path)
    state = minitrain.load(path)
    assert state.pop("as_tensor").dtype == np.float64
    fresh = Net()
    fresh.out.weight.data[...] = 0
    fresh.load_state_dict(state)
    assert same_weights(fresh, model)
    assert path.read_bytes()[8:9] == b"{"  # a JSON header after its length: safetensors, not a pickle


def no_pickle(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"got a Net, not a state dict.*minitrain.save\(model.state_dict\(\), path\)"):
        minitrain.save(Net(), tmp_path / "model.pt")
    with pytest.raises(TypeError, match=r"'step' is int, not an array.*never pickles"):
        minitrain.save({"step": 3}, tmp_path / "model.pt")
    pt = tmp_path / "model.pt"
    pt.write_bytes(pickle.dumps({"weight": np.zeros(3)}))
    with pytest.raises(UserError, match="a pickle, which minitrain never opens"):
        minitrain.load(pt)
    cases = ((tmp_path / "none.safetensors", "not found"), (tmp_path, "is a folder, not a regular file"))
    for missing, problem in cases:
        with pytest.raises(UserError, match=f"minitrain.load: {missing} {problem}$"):  # no word of pickles there
            minitrain.load(missing)


# ----------------------------------------------------------------------------------------------- tensor methods
def numel() -> None:
    model = Net()
    assert sum(p.numel() for p in model.parameters()) == model.num_parameters() == 4 * 6 + 6 + 6 * 3 + 3


def size_is_numpys() -> None:
    x = Tensor(np.zeros((2, 3)))
    assert x.size == 6 and x.shape == (2, 3) and x.shape[0] == 2
    with pytest.raises(TypeError, match="not callable"):
        x.size()


def backward_of(f: Callable[[Tensor], Tensor], data: np.ndarray, g: np.ndarray) -> np.ndarray:
    """d(sum(f(x)·g))/dx, by the tape."""
    x = Tensor(data, requires_grad=True)
    (f(x) * g).sum().backward()
    return x.grad


def view() -> None:
    data = rng().normal(0, 1, (2, 3, 4))
    assert np.array_equal(Tensor(data).view(2, -1).data, data.reshape(2, -1))
    g = rng(1).normal(0, 1, (2, 12))
    np.testing.assert_array_equal(backward_of(lambda x: x.view(2, -1), data, g), g.reshape(2, 3, 4))
    assert Tensor(data).view(2, -1).data.base is not None  # a view, as PyTorch's


def unsqueeze() -> None:
    data = rng().normal(0, 1, (2, 3))
    assert Tensor(data).unsqueeze(1).shape == (2, 1, 3) and Tensor(data).unsqueeze(-1).shape == (2, 3, 1)
    g = rng(1).normal(0, 1, (2, 1, 3))
    np.testing.assert_array_equal(backward_of(lambda x: x.unsqueeze(1), data, g), g.reshape(2, 3))


def softmax() -> None:
    data = rng().normal(0, 1, (2, 3, 4))
    for dim in (0, 1, -1):
        e = np.exp(data - data.max(axis=dim, keepdims=True))
        want = e / e.sum(axis=dim, keepdims=True)
        for got in (Tensor(data).softmax(dim=dim), F.softmax(Tensor(data), dim=dim), Tensor(data).softmax(dim)):
            np.testing.assert_allclose(got.data, want, rtol=1e-12)
    g = rng(1).normal(0, 1, data.shape)  # dx = y·(g − Σ g·y), the softmax Jacobian applied to g
    y = Tensor(data).softmax(dim=1).data
    np.testing.assert_allclose(backward_of(lambda x: x.softmax(dim=1), data, g),
                               y * (g - (g * y).sum(axis=1, keepdims=True)), rtol=1e-10)


def sum_and_mean_dim() -> None:
    data = rng().normal(0, 1, (2, 3, 4))
    x = Tensor(data)
    np.testing.assert_allclose(x.sum(dim=1, keepdim=True).data, data.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(x.mean(dim=(0, 1)).data, data.mean(axis=(0, 1)))
    np.testing.assert_allclose(x.sum(dim=-1).data, x.sum(axis=-1).data)
    g = rng(1).normal(0, 1, (2, 1, 4))
    np.testing.assert_allclose(backward_of(lambda t: t.sum(dim=1, keepdim=True), data, g), np.repeat(g, 3, axis=1))


def max_dim() -> None:
    data = rng().normal(0, 1, (3, 5))
    values, indices = Tensor(data).max(dim=1)
    np.testing.assert_array_equal(values.data, data.max(axis=1))
    np.testing.assert_array_equal(indices, data.argmax(axis=1))
    assert indices.dtype == np.int64 and Tensor(data).max(dim=0, keepdim=True).values.shape == (1, 5)
    g = rng(1).normal(0, 1, 3)
    want = np.zeros_like(data)
    want[np.arange(3), data.argmax(axis=1)] = g
    np.testing.assert_array_equal(backward_of(lambda x: x.max(dim=1).values, data, g), want)


def max_positional() -> None:
    data = rng().normal(0, 1, (3, 5))
    got = Tensor(data).max(1)
    assert isinstance(got, Tensor) and got.shape == (3,)
    np.testing.assert_array_equal(got[1].data, data.max(axis=1)[1])  # the second value, not the indices


def transpose_two_axes() -> None:
    data = rng().normal(0, 1, (2, 3, 4))
    for a, b in ((0, 1), (0, 2), (1, -1)):
        np.testing.assert_array_equal(Tensor(data).transpose(a, b).data, np.swapaxes(data, a, b))
    g = rng(1).normal(0, 1, (3, 2, 4))
    np.testing.assert_array_equal(backward_of(lambda x: x.transpose(0, 1), data, g), np.swapaxes(g, 0, 1))
    np.testing.assert_array_equal(Tensor(data).transpose(2, 0, 1).data, data.transpose(2, 0, 1))
    np.testing.assert_array_equal(Tensor(data).permute(2, 0, 1).data, data.transpose(2, 0, 1))
    matrix = rng(2).normal(0, 1, (2, 3))
    for order in ((0, 1), (1, 0)):  # a matrix's transpose either way, as in PyTorch
        assert Tensor(matrix).transpose(*order).shape == (3, 2)


def no_devices() -> None:
    for thing, owner in ((Tensor(np.zeros(2)), "Tensor"), (Net(), "Net")):
        for call in (lambda t: t.cuda(), lambda t: t.to("cuda"), lambda t: t.cpu()):
            with pytest.raises(AttributeError, match=rf"{owner}\.\w+\(\): minitrain is CPU-only"):
                call(thing)
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'colour'"):
        Tensor(np.zeros(2)).colour  # noqa: B018


def no_grad() -> None:
    x = Tensor(np.ones(3), requires_grad=True)
    with minitrain.no_grad():
        y = x * 2
    assert not y.requires_grad and (x * 2).requires_grad


def manual_seed() -> None:
    minitrain.manual_seed(0)
    first = Linear(4, 3).weight.data.copy()
    minitrain.manual_seed(0)
    assert np.array_equal(Linear(4, 3).weight.data, first)
    assert not np.array_equal(Linear(4, 3).weight.data, first)


def linear_layout() -> None:
    layer = Linear(4, 16, rng=rng())
    assert layer.weight.shape == (4, 16)
    x = rng(1).normal(0, 1, (2, 4)).astype(np.float32)
    np.testing.assert_allclose(layer(Tensor(x)).data, x @ layer.weight.data + layer.bias.data, rtol=1e-6)


def lora_any_module() -> None:
    model = Net()
    add_adapters(model, LoraSettings(rank=2, alpha=4, targets=("out",)), rng(4))
    assert [n for n, _ in model.trainable_parameters()] == ["out.lora_A", "out.lora_B"]
    by_hand = LoRALinear(Linear(4, 3, rng=rng()), 8, 16)
    assert [n for n, _ in by_hand.trainable_parameters()] == ["lora_A", "lora_B"]


def cross_entropy_options() -> None:
    logits, targets = Tensor(rng().normal(0, 1, (4, 3)), requires_grad=True), np.array([0, 2, -100, 1])
    log_p = logits.data - np.log(np.exp(logits.data).sum(axis=1, keepdims=True))  # log softmax, by hand
    kept = targets != -100
    nll = np.where(kept, -log_p[np.arange(4), np.where(kept, targets, 0)], 0)
    smoothed = np.where(kept, 0.9 * nll - 0.1 * log_p.mean(axis=1), 0)  # torch's (1 − ε)·nll + ε·mean(−log p)
    np.testing.assert_allclose(F.cross_entropy(logits, targets).item(), nll.sum() / 3, rtol=1e-6)
    np.testing.assert_allclose(F.cross_entropy(logits, Tensor(targets), reduction="sum").item(), nll.sum(), rtol=1e-6)
    np.testing.assert_allclose(F.cross_entropy(logits, targets, reduction="none").data, nll, rtol=1e-6)
    loss = F.cross_entropy(logits, targets, reduction="sum", label_smoothing=0.1)
    np.testing.assert_allclose(loss.item(), smoothed.sum(), rtol=1e-6)
    loss.backward()  # d/dz of Σ [(1 − ε)·nll + ε·mean(−log p)] = p − (1 − ε)·onehot − ε/V on the counted rows
    onehot = np.eye(3)[np.where(kept, targets, 0)]
    want = (np.exp(log_p) - 0.9 * onehot - 0.1 / 3) * kept[:, None]
    np.testing.assert_allclose(logits.grad, want, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="reduction must be"):
        F.cross_entropy(logits, targets, reduction="batchmean")


CHECKS: dict[str, Callable[..., None]] = {
    "`AdamW(model.parameters(), lr=1e-3)`": adamw_parameters,
    "`AdamW(params, betas=(0.9, 0.95))`": adamw_betas,
    '`AdamW([{"params": ..., "lr": 1e-4}, {"params": ..., "weight_decay": 0.0}], lr=1e-3)`': param_groups,
    "`AdamW(model.parameters(), weight_decay=0.1)`": weight_decay_skips_1d,
    '`for g in optimizer.param_groups: g["lr"] = 1e-4`': set_lr,
    "`model.load_state_dict(sd, strict=False)`": load_state_dict_strict,
    "`model.state_dict()`": state_dict_arrays,
    "`torch.save(model.state_dict(), path)`, `torch.load(path)`": save_and_load,
    '`torch.save(model, path)`, `torch.load("model.pt")`': no_pickle,
    "`p.numel()`": numel,
    "`x.size()`, `x.size(0)`": size_is_numpys,
    "`x.view(2, -1)`, `x.reshape(2, -1)`": view,
    "`x.unsqueeze(1)`": unsqueeze,
    "`x.softmax(dim=-1)`, `F.softmax(x, dim=-1)`": softmax,
    "`x.sum(dim=1, keepdim=True)`, `x.mean(dim=(0, 1))`": sum_and_mean_dim,
    "`x.max(dim=1)`": max_dim,
    "`x.max(1)`": max_positional,
    "`x.transpose(0, 1)`": transpose_two_axes,
    '`x.cuda()`, `x.to("cuda")`, `model.to(device)`': no_devices,
    "`with torch.no_grad():`": no_grad,
    "`torch.manual_seed(0)`": manual_seed,
    "`nn.Linear(4, 16).weight.shape == (16, 4)`": linear_layout,
    '`get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["fc"]))`': lora_any_module,
    '`F.cross_entropy(logits, targets, ignore_index=-100, reduction="sum", label_smoothing=0.1)`':
        cross_entropy_options,
}


def test_every_row_has_a_check_and_a_status():
    rows = table()
    assert list(rows) == list(CHECKS), "docs/pytorch-users.md's rows and CHECKS differ"
    for spelling, (_, status, _) in rows.items():
        assert status in STATUSES, f"{spelling}: status {status!r}"


@pytest.mark.parametrize("spelling", list(CHECKS))
def test_the_row_says_what_minitrain_does(spelling, tmp_path):
    check = CHECKS[spelling]
    check(tmp_path) if "tmp_path" in check.__code__.co_varnames else check()


def test_the_pages_program_runs(tmp_path, monkeypatch):
    program = re.search(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(program, namespace)  # the page's own example
    assert namespace["loss"].item() < 0.5 and (tmp_path / "net.safetensors").is_file()
