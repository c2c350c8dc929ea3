"""The worked examples of docs/extending.md, as the code the page quotes and the tests that prove it works: a new op
with its backward, a new layer (RMSNorm) trained inside MiniGPT, a new optimizer (Lion), and a new family composed
from the decoder's pieces (the first Gemma, from the pieces of minitrain/models/gemma.py), checked against a forward
written in plain NumPy from Gemma's equations."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from extending.gemma1 import Gemma1
from extending.lion import Lion
from test_course_text import excerpt_matches, parse

from minitrain import gradcheck, nn
from minitrain.autograd.tensor import Tensor
from minitrain.data.batcher import TrainBatcher, encode_split
from minitrain.data.corpus import load_records
from minitrain.data.tokenizer import CharTokenizer
from minitrain.loop import train_step
from minitrain.models.minigpt import MiniGPT
from minitrain.optim import AdamW

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


# ---------------------------------------------------------------------------------- example 5: a composed family


def gemma_reference(w: dict[str, np.ndarray], idx: np.ndarray, c: dict) -> np.ndarray:
    """Gemma's logits (B, T, V) in plain NumPy, from its published equations (Gemma Team 2024; transformers'
    GemmaForCausalLM), nothing of minitrain: `w` by Hugging Face name, linear weights [in, out]."""
    (batch, time), heads, kv, dim = idx.shape, c["n_head"], c["n_kv_head"], c["head_dim"]

    def norm(x, gain):  # RMSNorm with the gain stored as its offset from 1
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + c["rms_norm_eps"]) * (1.0 + gain)

    def gelu(x):  # the tanh approximation
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))

    def rope(x):  # pair (i, i + D/2) of position t turned by the angle t·θ^(−2i/D)
        angle = np.arange(time)[:, None, None] * c["rope_theta"] ** (-np.arange(0, dim, 2) / dim)
        a, b = x[..., : dim // 2], x[..., dim // 2 :]
        return np.concatenate([a * np.cos(angle) - b * np.sin(angle), b * np.cos(angle) + a * np.sin(angle)], -1)

    x = w["model.embed_tokens.weight"][idx] * np.sqrt(c["d_model"])
    for i in range(c["n_layer"]):
        p = {name.removeprefix(f"model.layers.{i}.").removesuffix(".weight"): v for name, v in w.items()}
        h = norm(x, p["input_layernorm"])
        q = rope((h @ p["self_attn.q_proj"]).reshape(batch, time, heads, dim))
        k = rope((h @ p["self_attn.k_proj"]).reshape(batch, time, kv, dim)).repeat(heads // kv, axis=2)
        v = (h @ p["self_attn.v_proj"]).reshape(batch, time, kv, dim).repeat(heads // kv, axis=2)  # head h: kv h//G
        scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(dim)
        scores = np.where(np.tril(np.ones((time, time), dtype=bool)), scores, -np.inf)  # causal
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        x = x + np.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, time, heads * dim) @ p["self_attn.o_proj"]
        h = norm(x, p["post_attention_layernorm"])
        x = x + (gelu(h @ p["mlp.gate_proj"]) * (h @ p["mlp.up_proj"])) @ p["mlp.down_proj"]
    return norm(x, w["model.norm.weight"]) @ w["model.embed_tokens.weight"].T  # the tied head


GEMMA = dict(n_layer=2, n_head=4, n_kv_head=2, d_model=16, head_dim=6, d_ff=24, vocab_size=11, max_seq_len=8,
             rope_theta=100.0)


def test_gemma_is_the_decoder_with_its_own_pieces_and_matches_its_equations_in_numpy():
    model = Gemma1(**GEMMA, rng=0)
    assert all(not p.data.any() for name, p in model.named_parameters() if name.endswith("norm.weight"))  # w = 0
    assert "lm_head.weight" not in model.state_dict() and len(model.state_dict()) == 2 + 9 * GEMMA["n_layer"]
    rng = np.random.default_rng(1)
    model.load_state_dict({name: rng.normal(0.0, 0.4, p.shape) for name, p in model.state_dict().items()})
    idx = rng.integers(0, GEMMA["vocab_size"], (2, 7))
    want = gemma_reference({k: v.astype(np.float64) for k, v in model.state_dict().items()}, idx, model.config)
    logits, _ = model(idx)
    assert logits.dtype == np.float32 and np.abs(want).max() > 1.0
    np.testing.assert_allclose(logits.data, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    mask = np.ones((2, 8), dtype=bool)
    mask[:, 0] = False
    left_padded = model(np.concatenate([idx[:, :1], idx], 1), attn_pad_mask=mask)[0].data[:, 1:]
    np.testing.assert_allclose(left_padded, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())  # positions from 0
    [generated] = model.generate(idx[0, :3].tolist(), 4)  # the KV cache: each step the argmax of a full pass
    full = np.concatenate([idx[0, :3], generated])[None]
    assert generated == model(full)[0].data[0, 2:-1].argmax(-1).tolist()


def test_gemma_gradients_match_central_differences_in_float64():
    model = Gemma1(**{**GEMMA, "n_layer": 1, "d_model": 8, "head_dim": 4, "d_ff": 8}, rng=2, dtype=np.float64)
    rng = np.random.default_rng(3)
    model.load_state_dict({name: rng.normal(0.0, 0.4, p.shape) for name, p in model.state_dict().items()})
    idx = rng.integers(0, GEMMA["vocab_size"], (2, 5))
    params = [p for _, p in model.named_parameters()]
    assert gradcheck(lambda *_: model(idx, np.roll(idx, -1, axis=1))[1], params, rtol=1e-5, atol=1e-8)


# ---------------------------------------------------------------------------------- the page itself


def test_docs_extending_quotes_exactly_this_file_and_every_example():
    page = parse(ROOT / "docs" / "extending.md")
    quoted = [code for source, code in page.excerpts if source == "tests/test_extending.py"]
    source = Path(__file__).read_text(encoding="utf-8")
    for code in quoted:
        assert excerpt_matches(code, source), f"docs/extending.md: this excerpt no longer matches:\n{code}"
    shown = "".join(quoted)
    for definition in ("def softplus", "class RMSNorm", "def use_rmsnorm"):
        assert definition in shown, f"docs/extending.md does not show {definition}"
    for plug_in in PLUG_INS:  # the files a user adds are quoted whole
        quoted = [code for source, code in page.excerpts if source == f"tests/extending/{plug_in.name}"]
        assert quoted and excerpt_matches(quoted[0], plug_in.read_text(encoding="utf-8")), plug_in.name


# ---------------------------------------------------------------- one file and one line: a family and an optimizer

PLUG_INS = [ROOT / "tests" / "extending" / name for name in ("bigram.py", "lion.py", "gemma1.py")]
REGISTRATIONS = [  # (the file a plug-in goes into, the registry it joins, the line that registers it)
    ("minitrain/models/bigram.py", "minitrain/models/registry.py", '    "sequential",\n', '    "bigram",\n'),
    ("minitrain/optim/lion.py", "minitrain/optim/factory.py", '    "lamb.Lamb",\n', '    "lion.Lion",\n'),
    ("minitrain/models/gemma1.py", "minitrain/models/registry.py", '    "gemma",\n', '    "gemma1",\n'),
]


def run_with_plug_ins(tmp_path: Path, test_files: list[str], plug_ins: list[tuple], tests: list[str]) -> str:
    """Copy minitrain and `test_files` (paths under tests/), add each plug-in — (its file or None, where it goes
    or None, the registry, the line it follows, its line) — and run `tests` in the copy: pytest's output, checked
    to have passed. Nothing else is edited."""
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "minitrain", copy / "minitrain", ignore=shutil.ignore_patterns("__pycache__", "*.nb?"))
    for name in ("conftest.py", "fakehub.py", *test_files):
        (copy / "tests" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "tests" / name, copy / "tests" / name)
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    (copy / "data").symlink_to(ROOT / "data")
    for plug_in, target, registry, after, line in plug_ins:
        if target is not None:
            shutil.copy(plug_in, copy / target)
        text = (copy / registry).read_text(encoding="utf-8")
        assert text.count(after) == 1, (registry, after)
        (copy / registry).write_text(text.replace(after, after + line), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(copy), "NUMBA_DISABLE_JIT": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *tests],
                          cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done.stdout


def test_a_family_and_an_optimizer_are_each_one_file_and_one_line(tmp_path):
    """Copy minitrain, drop in the three files, add one line to each registry, and run the contract test
    (tests/models/test_families.py) on the new families and with the new optimizer: built from YAML, trained, saved,
    loaded, sampled, resumed bit-exactly, summarised. Nothing else is edited."""
    tests = ["test_every_family_trains_saves_loads_serves_and_resumes[bigram]",
             "test_every_family_resumes_bit_exactly_with_every_optimizer[bigram-lion]",
             "test_every_family_resumes_bit_exactly_with_every_optimizer[minigpt-lion]",
             "test_every_family_trains_saves_loads_serves_and_resumes[gemma1]",
             "test_every_family_resumes_bit_exactly_with_every_optimizer[gemma1-lion]"]
    plug_ins = [(plug_in, *registration) for plug_in, registration in zip(PLUG_INS, REGISTRATIONS, strict=True)]
    out = run_with_plug_ins(tmp_path, ["models/test_families.py"], plug_ins,
                            [f"tests/models/test_families.py::{t}" for t in tests])
    assert "5 passed" in out
