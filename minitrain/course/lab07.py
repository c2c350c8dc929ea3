"""Lab 07's checker: from GPT-2 to Llama. RMSNorm (minitrain/nn/rms_norm.py), rotary embeddings applied to queries
and keys (minitrain/nn/apply_rotary.py), the SwiGLU MLP (minitrain/nn/llama_mlp.py) and grouped-query attention
with a KV cache (minitrain/nn/llama_attention.py), then the Llama-style run of experiments/27-llama-verbs.

Each piece is compared in float64 with the library's, with the same weights, and its gradients with central
differences. A wrong answer is compared with the usual mistakes (a centred RMSNorm, no eps, the other half rotated,
interleaved pairs, silu on the wrong projection, v rotated too, key/value heads tiled instead of repeated, no 1/√D,
no causal mask) to say which one it is. For a workspace, the library's fused op for the whole piece
(functional.rms_norm, rope, grouped_attention, attention, self_attention) raises while the piece runs: the lab
asks for each from Tensor ops, which the library's own files (the yardstick) do not use.

Every check decides in the checker's process (checks.py `here`): the student's pieces, given the library's
weights, and their inputs live in the child; what comes back is arrays (an output, gradcheck.gradients' pairs,
the logits of a small Llama built there around the student's attention, `_cache_there`), compared here.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from unittest import mock

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.gradcheck import GradcheckError, compare_gradients, gradients
from minitrain.autograd.tensor import Tensor
from minitrain.course.checks import Checklist, Failed
from minitrain.course.runs import check_manifest, not_the_reference, run_model, scored_model
from minitrain.models.decoder import Decoder
from minitrain.models.kv_cache import KVCache
from minitrain.nn import LlamaAttention, LlamaMLP, RMSNorm, RotaryEmbedding, inference  # the yardsticks
from minitrain.nn.apply_rotary import apply_rotary
from minitrain.nn.rotary import rope_positions

CHECKS = Checklist(here=True)
NORM, ROTARY = "minitrain/nn/rms_norm.py", "minitrain/nn/apply_rotary.py"
MLP, ATTENTION = "minitrain/nn/llama_mlp.py", "minitrain/nn/llama_attention.py"
FILES = (NORM, ROTARY, MLP, ATTENTION)
C, D_FF, B, T = 8, 12, 2, 5
EPS = 1e-2  # large, so that an eps left out or put outside the root shows
OWN_OPS = ("write it from Tensor ops (*, +, **, .mean, .sum, @, reshape, transpose, slices, ops.concat, "
           "ops.masked_fill, F.sigmoid, F.silu, F.softmax): the library's fused op for the whole piece is the "
           "yardstick, not an answer")
NO_KEY = ("fill the blocked scores with a large negative number (−1e9), not −inf, and multiply the weights by the "
          "mask: a row with no allowed key (a left-padded row's padding) then gets weights 0, as the library's does")
NORM_OPS = ("RMSNorm.forward", ("rms_norm", "layer_norm"))  # (the piece, functional's fused ops it may not call)
ROTARY_OPS, MLP_OPS = ("apply_rotary", ("rope",)), ("LlamaMLP.forward", ())
ATTENTION_OPS = ("LlamaAttention.forward", ("grouped_attention", "attention", "self_attention"))
CACHE = ("with a cache: rotate k first, then keys, values = cache.update(k.data, v.data) and attend over what it "
         "returns, every position so far (the cache stores ROTATED keys: each at its own position)")


def _x(*shape: int, seed: int = 0, scale: float = 1.0, grad: bool = False) -> Tensor:
    return Tensor(np.random.default_rng(seed).normal(0.0, scale, shape), requires_grad=grad, dtype=np.float64)


def _there(lab):
    """This module where the student's code runs (`lab.library`): the inputs handed to that code are built there."""
    return lab.library(sys.modules[__name__])


def _xs(lab, *shape: int, **keys) -> tuple[Tensor, object]:
    """`_x(*shape, **keys)` here (for the library's answer) and where the student's code runs (for theirs)."""
    return _x(*shape, **keys), _there(lab)._x(*shape, **keys)


def _close(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-9, atol=1e-12)


def _verdict(got, want, what: str, mistakes) -> None:
    """Pass when `got` is `want`; else fail naming the first of `mistakes` ((what it computes, why, hint)) that
    `got` is, or with how far off it is."""
    if _close(got, want):
        return
    off = np.abs(got - want).max() if got.shape == want.shape else None
    for variant, why, hint in mistakes:
        if _close(got, variant):
            raise Failed(f"{what} is off by up to {off:.3g}: {why}", hint=hint)
    raise Failed(f"{what} is off by up to {off:.3g}" if off is not None else f"{what} has shape {got.shape}; "
                 f"expected {want.shape}")


def _own_ops(active: bool, piece: str, fused: tuple[str, ...]) -> AbstractContextManager:
    """When `active` (a workspace): while `piece` runs, functional's fused ops `fused` raise (see the module
    docstring)."""
    if not (active and fused):
        return nullcontext()

    def refuse(name: str):
        def fused_op(*args, **kwargs):
            raise Failed(f"{piece} calls functional.{name}, the library's fused op for the whole piece",
                         hint=OWN_OPS)
        return fused_op

    return mock.patch.multiple(F, **{name: refuse(name) for name in fused})


def _same_weights(theirs, ours) -> None:
    """Copy `ours`' parameters into `theirs` (Hugging Face's names), failing when names or shapes differ."""
    want = {name: p.shape for name, p in ours.named_parameters()}
    got = {name: tuple(p.shape) for name, p in theirs.named_parameters()}
    if got != want:
        raise Failed(f"your {type(ours).__name__} has parameters {got}; expected {want} (Hugging Face's names, "
                     "linear weights [in, out])")
    theirs.load_state_dict(ours.state_dict())


def _rng(lab, seed: int):
    """np.random.default_rng(seed) where the student's code runs."""
    return lab.library(np.random).default_rng(seed)


def _output_there(active: bool, piece: str, fused: tuple[str, ...], function, *args) -> np.ndarray:
    """Runs where the student's code does (`_there`): function(*args).data, under `_own_ops`."""
    with _own_ops(active, piece, fused):
        return np.asarray(function(*args).data)


def _output(lab, ops: tuple, function, *args) -> np.ndarray:
    """The student's `function(*args)` (its .data), run where their code runs while `ops` are refused."""
    return _there(lab)._output_there(lab.workspace is not None, *ops, function, *args)


def _gradients_there(active: bool, piece: str, fused: tuple[str, ...], function, inputs, *extra) -> list:
    """Runs where the student's code does: gradcheck.gradients of function(inputs[0], *extra) for `inputs`, under
    `_own_ops`."""
    with _own_ops(active, piece, fused):
        return gradients(lambda *given: function(given[0], *extra), inputs, eps=1e-6)


def _gradients(lab, ops: tuple, function, inputs, *extra, what: str) -> None:
    """Fail unless the gradients of the student's function(inputs[0], *extra) match central differences."""
    try:
        compare_gradients(_there(lab)._gradients_there(lab.workspace is not None, *ops, function, inputs, *extra),
                          rtol=1e-5, atol=1e-8)
    except GradcheckError as error:
        raise Failed(f"{what}: the gradients do not match central differences: {error}") from None


# ------------------------------------------------------------------------------------------------ RMSNorm
def _norms(lab):
    theirs = lab.module(NORM).RMSNorm(C, EPS, dtype=lab.library(np).float64)
    ours = RMSNorm(C, EPS, dtype=np.float64)
    ours.weight.data[...] = np.random.default_rng(3).normal(1.0, 0.3, C)
    _same_weights(theirs, ours)
    return theirs, ours


@CHECKS.check("RMSNorm divides each row by √(mean(x²) + eps) and multiplies by weight",
              hint="y = x / √(mean(x², last axis) + eps) · weight, with eps INSIDE the root; no mean is subtracted "
                   "and there is no bias (that is LayerNorm)")
def _norm_forward(lab):
    theirs, ours = _norms(lab)
    x, there = _xs(lab, B, T, C, seed=1, scale=0.1)  # rows small enough that eps (0.01) matters
    want = ours(x).data
    got = _output(lab, NORM_OPS, theirs, there)
    a, w = x.data, ours.weight.data
    centred = a - a.mean(-1, keepdims=True)
    _verdict(got, want, f"RMSNorm(eps={EPS}) on rows of scale 0.1", [
        (centred / np.sqrt((centred**2).mean(-1, keepdims=True) + EPS) * w, "your rows are centred first",
         "RMSNorm subtracts no mean: y = x / √(mean(x²) + eps) · weight (centring is LayerNorm's)"),
        (a / np.sqrt((a**2).mean(-1, keepdims=True)) * w, "eps is missing",
         "eps goes inside the root, √(mean(x²) + eps): it keeps a row of zeros (padding) from dividing by 0"),
        (a / (np.sqrt((a**2).mean(-1, keepdims=True)) + EPS) * w, "eps was added outside the root",
         "eps goes inside the root, √(mean(x²) + eps), as transformers' LlamaRMSNorm does"),
        (a / np.sqrt((a**2).mean(-1, keepdims=True) + EPS), "weight was not applied",
         "multiply by self.weight last: the gain is learned"),
    ])


@CHECKS.check("RMSNorm's gradients (x and weight) match central differences in float64", needs=(_norm_forward,),
              hint="build y from Tensor ops on x and self.weight (x * x, .mean(axis=-1, keepdims=True), ** -0.5): "
                   "an op on .data is off the tape, so no gradient flows through it")
def _norm_gradients(lab):
    theirs, _ = _norms(lab)
    _gradients(lab, NORM_OPS, theirs, [_there(lab)._x(2, 3, C, seed=2, scale=0.3, grad=True), theirs.weight],
               what="RMSNorm")


# ------------------------------------------------------------------------------------------------ rotary
D = 8
HALF_HINT = "rotate_half([x₁ | x₂]) = [−x₂ | x₁] (the minus on the SECOND half, moved to the front), then " \
            "x·cos + rotate_half(x)·sin"


def _angles(positions: np.ndarray, theta: float = 100.0) -> tuple[np.ndarray, np.ndarray]:
    return RotaryEmbedding(D, theta)(positions, np.float64)


def _rotate(lab, x, cos, sin) -> np.ndarray:
    """The student's apply_rotary(x, cos, sin).data, `x` where their code runs."""
    return _output(lab, ROTARY_OPS, lab.module(ROTARY).apply_rotary, x, cos, sin)


@CHECKS.check("apply_rotary rotates each pair (x₁[i], x₂[i]) by its angle: x·cos + rotate_half(x)·sin",
              hint=HALF_HINT + "; pair i is dims i and i + D/2 (transformers' layout), not 2i and 2i + 1")
def _rotary_forward(lab):
    x, there = _xs(lab, B, T, 3, D, seed=4)
    cos, sin = _angles(rope_positions(B, T))
    want = apply_rotary(x, cos, sin).data
    got = _rotate(lab, there, cos, sin)
    a, h = x.data, D // 2
    interleaved = np.empty_like(a)
    c, s = cos[..., :h], sin[..., :h]
    interleaved[..., 0::2] = a[..., 0::2] * c - a[..., 1::2] * s
    interleaved[..., 1::2] = a[..., 1::2] * c + a[..., 0::2] * s
    _verdict(got, want, f"on (B, T, H, D) = {x.shape} your rotation", [
        (apply_rotary(x, cos, -sin).data, "every pair turned the other way: the wrong half got the minus", HALF_HINT),
        (interleaved, "you paired dims 2i and 2i + 1 (GPT-J's layout)",
         "pair i is dims i and i + D/2: the first half against the second, as transformers' rotate_half does"),
        (apply_rotary(x, sin, cos).data, "cos and sin are swapped", "x·cos + rotate_half(x)·sin: cos on x itself"),
    ])


@CHECKS.check("rotated queries and keys keep their lengths, and q_m·k_n depends on m − n only",
              needs=(_rotary_forward,),
              hint="a rotation of each pair by m·ω_i keeps its length, and rotating q by m and k by n turns their "
                   "pair by (m − n)·ω_i: rotate queries and keys with the same cos and sin of their own positions")
def _relative(lab):
    (q, q_there), (_, k_there) = _xs(lab, 1, 1, 1, D, seed=5), _xs(lab, 1, 1, 1, D, seed=6)

    def score(m: int, n: int) -> float:
        rq = _rotate(lab, q_there, *_angles(np.array([[m]])))
        rk = _rotate(lab, k_there, *_angles(np.array([[n]])))
        return float((rq * rk).sum())

    rotated = _rotate(lab, q_there, *_angles(np.array([[7]])))
    if not np.isclose(np.linalg.norm(rotated), np.linalg.norm(q.data), rtol=1e-12):
        raise Failed(f"|q| = {np.linalg.norm(q.data):.6g} becomes {np.linalg.norm(rotated):.6g} at position 7: "
                     "a rotation keeps lengths")
    for m, n, shift in [(3, 1, 5), (0, 4, 9), (6, 6, 11)]:
        if not np.isclose(score(m, n), score(m + shift, n + shift), rtol=1e-9, atol=1e-12):
            raise Failed(f"q at {m}, k at {n} score {score(m, n):.6g}; both moved by {shift}, "
                         f"{score(m + shift, n + shift):.6g}: the score must depend on m − n only")
    if np.isclose(score(3, 1), score(5, 1), rtol=1e-6):
        raise Failed("q at 3 and at 5 give the same score with k at 1: the positions are not rotating anything")


@CHECKS.check("apply_rotary's gradient matches central differences in float64", needs=(_rotary_forward,),
              hint="build it from Tensor ops on x (slices x[..., :half], ops.concat, * with Tensor(cos), +): "
                   "NumPy on x.data is off the tape")
def _rotary_gradients(lab):
    cos, sin = _angles(rope_positions(1, 3))
    _gradients(lab, ROTARY_OPS, lab.module(ROTARY).apply_rotary, [_there(lab)._x(1, 3, 2, D, seed=7, grad=True)],
               cos, sin, what="apply_rotary")


# ------------------------------------------------------------------------------------------------ SwiGLU
def _mlps(lab):
    theirs = lab.module(MLP).LlamaMLP(C, D_FF, rng=_rng(lab, 8), dtype=lab.library(np).float64)
    ours = LlamaMLP(C, D_FF, rng=np.random.default_rng(9), dtype=np.float64)
    for seed, p in enumerate(ours.parameters()):  # gate and up differ, so a swap shows
        p.data[...] = np.random.default_rng(seed).normal(0.0, 0.5, p.shape)
    _same_weights(theirs, ours)
    return theirs, ours


def _silu(z: np.ndarray) -> np.ndarray:
    return z / (1.0 + np.exp(-z))


@CHECKS.check("LlamaMLP is down_proj(silu(gate_proj(x)) · up_proj(x)), SwiGLU",
              hint="gate_proj, up_proj: Linear(C, d_ff), down_proj: Linear(d_ff, C), no biases; silu (z·σ(z)) on "
                   "gate_proj's output only, times up_proj's, then down_proj")
def _mlp_forward(lab):
    theirs, ours = _mlps(lab)
    x, there = _xs(lab, B, T, C, seed=10)
    want = ours(x).data
    got = _output(lab, MLP_OPS, theirs, there)
    g, u = x.data @ ours.gate_proj.weight.data, x.data @ ours.up_proj.weight.data
    down = ours.down_proj.weight.data
    _verdict(got, want, "your MLP", [
        (_silu(u) * g @ down, "silu went on up_proj's output: gate and up are swapped",
         "silu goes on gate_proj's output, not up_proj's: down_proj(silu(gate_proj(x)) · up_proj(x))"),
        (g * u @ down, "there is no silu", "silu(z) = z·σ(z) on gate_proj's output: without it the gate is linear"),
        (_silu(g) @ down, "up_proj is missing", "the gate multiplies up_proj(x): silu(gate) · up"),
        (_silu(g * u) @ down, "silu went on the product", "silu on gate_proj's output only, then times up_proj's"),
    ])


@CHECKS.check("LlamaMLP's gradients (x and the three weights) match central differences", needs=(_mlp_forward,),
              hint="compose Tensor ops (the three Linear layers, F.silu or z * F.sigmoid(z), *): no .data")
def _mlp_gradients(lab):
    theirs, _ = _mlps(lab)
    weights = [theirs.gate_proj.weight, theirs.up_proj.weight, theirs.down_proj.weight]
    _gradients(lab, MLP_OPS, theirs, [_there(lab)._x(1, 3, C, seed=11, grad=True), *weights], what="LlamaMLP")


# ------------------------------------------------------------------------------------------------ attention
HEAD_DIM = 4
GROUP_HINT = ("query head h reads key/value head h // (H/H_kv): heads 0, 1 share key/value head 0, heads 2, 3 share "
              "head 1 (np.repeat of the key/value heads, or q grouped as (B, T, H_kv, G, D)), not h % H_kv (tiled)")


def _attentions(lab, n_kv_head: int, bias: bool = False):
    theirs = lab.module(ATTENTION).LlamaAttention(C, 4, n_kv_head, HEAD_DIM, bias, rng=_rng(lab, 12),
                                                  dtype=lab.library(np).float64)
    ours = LlamaAttention(C, 4, n_kv_head, HEAD_DIM, bias, rng=np.random.default_rng(13), dtype=np.float64)
    for seed, p in enumerate(ours.parameters()):  # k and v differ, so rotating v shows
        p.data[...] = np.random.default_rng(seed + 20).normal(0.0, 0.6, p.shape)
    _same_weights(theirs, ours)
    return theirs, ours


def _attend(lab, attention, x, cos, sin, allowed) -> np.ndarray:
    return _output(lab, ATTENTION_OPS, attention, x, cos, sin, allowed, None)


def _numpy_attention(layer, x, cos, sin, allowed, rotate_v=False, tiled=False, scaled=True, causal=True
                     ) -> np.ndarray:
    """The attention `layer` computes, in NumPy, with one of the usual mistakes when asked."""
    batch, time, _ = x.shape
    n, n_kv, d = layer.n_head, layer.n_kv_head, layer.head_dim

    def project(linear, heads):
        out = x @ linear.weight.data + (0 if linear.bias is None else linear.bias.data)
        return out.reshape(batch, time, heads, d)

    def rotate(a):
        return a * cos + np.concatenate([-a[..., d // 2:], a[..., : d // 2]], axis=-1) * sin

    q, k, v = rotate(project(layer.q_proj, n)), rotate(project(layer.k_proj, n_kv)), project(layer.v_proj, n_kv)
    v = rotate(v) if rotate_v else v
    heads = np.arange(n) % n_kv if tiled else np.arange(n) // (n // n_kv)
    scores = np.einsum("bihd,bjhd->bhij", q, k[:, :, heads]) / (np.sqrt(d) if scaled else 1.0)
    allowed = allowed if causal else np.ones((1, time, time), dtype=bool)
    scores = np.where(np.broadcast_to(allowed, (batch, time, time))[:, None], scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = np.einsum("bhij,bjhd->bihd", weights, v[:, :, heads]).reshape(batch, time, n * d)
    return out @ layer.o_proj.weight.data


def _compare_attention(lab, n_kv_head: int, bias: bool = False) -> None:
    theirs, ours = _attentions(lab, n_kv_head, bias)
    x, there = _xs(lab, B, T, C, seed=14)
    cos, sin = RotaryEmbedding(HEAD_DIM, 10.0)(rope_positions(B, T), np.float64)
    allowed = F.attention_mask(T, T)
    want = ours(x, cos, sin, allowed).data
    got = _attend(lab, theirs, there, cos, sin, allowed)
    mistakes = [(dict(rotate_v=True), "v was rotated too", "rotate q and k only, never v: the rotation is about "
                 "where a query and a key are, and v carries what is read"),
                (dict(scaled=False), "the scores are not divided by √D", "scores = q·k / √D (D = head_dim)"),
                (dict(causal=False), "every position read the ones after it", "scores where `allowed` is False "
                 "get −inf before the softmax (allowed is causal: key j ≤ query i)")]
    if n_kv_head < 4:
        mistakes.insert(0, (dict(tiled=True), f"query head h read key/value head h % {n_kv_head} (tiled)",
                            GROUP_HINT))
    _verdict(got, want, f"H = 4, H_kv = {n_kv_head}: your attention",
             [(_numpy_attention(ours, x.data, cos, sin, allowed, **variant), why, hint)
              for variant, why, hint in mistakes])


@CHECKS.check("LlamaAttention with H_kv = H: rotary q and k, causal softmax(q·k/√D)·v, o_proj, as the library's",
              hint="q_proj, k_proj, v_proj, o_proj as the docstring says; rotate q and k (not v) with "
                   "apply_rotary, scores q·k/√D, −inf where allowed is False, softmax over the keys, times v, heads "
                   "side by side into o_proj")
def _attention_heads(lab):
    _compare_attention(lab, 4)
    _compare_attention(lab, 4, bias=True)  # Qwen2's biases on q, k, v


@CHECKS.check("grouped-query attention, H = 4 query heads over H_kv = 2 and 1 key/value heads",
              needs=(_attention_heads,), hint=GROUP_HINT)
def _grouped(lab):
    for n_kv_head in (2, 1):
        _compare_attention(lab, n_kv_head)


@CHECKS.check("LlamaAttention's gradients (x and the four weights), H = 4 over H_kv = 2, match central differences",
              needs=(_grouped,),
              hint="compose Tensor ops (reshape, transpose, @, ops.masked_fill, F.softmax): a step on .data, or an "
                   "index array built from the values, is off the tape")
def _attention_gradients(lab):
    theirs, _ = _attentions(lab, 2)
    cos, sin = RotaryEmbedding(HEAD_DIM, 10.0)(rope_positions(1, 3), np.float64)
    weights = [getattr(theirs, name).weight for name in ("q_proj", "k_proj", "v_proj", "o_proj")]
    _gradients(lab, ATTENTION_OPS, theirs, [_there(lab)._x(1, 3, C, seed=15, grad=True), *weights], cos, sin,
               F.attention_mask(3, 3), None, what="LlamaAttention")


# a small Llama composed with the student's attention; row 1 of its batch is left-padded (its positions start at 0
# after the padding), fed through a KV cache as a 5-token prompt, then one token at a time
CACHE_MODEL = dict(n_layer=2, n_head=4, n_kv_head=2, d_model=16, d_ff=24, vocab_size=11, max_seq_len=16, head_dim=4,
                   rope_theta=10000.0, rms_norm_eps=1e-5, dropout=0.0)
CACHE_STEPS = [(0, 5)] + [(t, t + 1) for t in range(5, 9)]


def _cache_there(active: bool, attention) -> dict:
    """Runs where the student's code does: the small Llama's logits (B, T, vocab) over the whole sequence
    ("full"), then the last position's of each step through a KV cache ("steps"), up to the first step that
    raised ("raised": [step, its exception's type name, text]), all under `_own_ops`."""
    model = Decoder(CACHE_MODEL, norm=RMSNorm, attention=attention, rng=16, dtype=np.float64)
    idx = np.random.default_rng(18).integers(1, 11, (2, 9))
    mask = np.ones(idx.shape, dtype=bool)
    mask[1, :2] = False
    found: dict = {"steps": [], "raised": None}
    with _own_ops(active, *ATTENTION_OPS), inference(model), np.errstate(invalid="ignore"):  # NaN: told apart
        found["full"] = model(idx, attn_pad_mask=mask)[0].data
        if np.isnan(found["full"]).any():
            return found
        cache = KVCache(2, 2, 9, 2, 4, np.float64)
        for number, (start, end) in enumerate(CACHE_STEPS):
            try:
                found["steps"].append(np.asarray(model.step(idx[:, start:end], mask[:, start:end], cache)))
            except Failed:
                raise
            except Exception as error:
                found["raised"] = [number, type(error).__name__, str(error)]
                break
    return found


@CHECKS.check("with a KV cache, feeding tokens one at a time gives the logits of one pass over the whole sequence",
              needs=(_grouped,), hint=CACHE)
def _cache(lab):
    found = _there(lab)._cache_there(lab.workspace is not None, lab.module(ATTENTION).LlamaAttention)
    full = found["full"]
    if np.isnan(full).any():
        raise Failed("with a left-padded row and no cache, your attention gives NaN logits: a padding query "
                     "has no allowed key, and a softmax over a row of −inf is 0/0", hint=NO_KEY)
    for number, (start, end) in enumerate(CACHE_STEPS):
        if number == len(found["steps"]):
            _, kind, text = found["raised"]
            what = "the 5-token prompt" if number == 0 else f"new token {number} ({start} cached)"
            raise Failed(f"with a cache, {what} raised {kind}: {text}")
        got = found["steps"][number]
        if not np.allclose(got, full[:, end - 1], rtol=1e-8, atol=1e-10):
            off = np.abs(got - full[:, end - 1]).max()
            if number == 0:
                raise Failed(f"the 5-token prompt through an empty cache gives other logits (off by {off:.3g}) "
                             "than the same tokens without one")
            raise Failed(f"the prompt's logits agree, but new token {number} (position {end - 1}, {start} "
                         f"cached) is off by {off:.3g}: its query must meet the cached keys, each rotated at "
                         "its own position")


# ------------------------------------------------------------------------------------------------ run folder
REFERENCE_PPL, REFERENCE_EXACT = 1.389, 0.549  # experiments/27-llama-verbs/results.json, seed 42
CONFIG = "experiments/27-llama-verbs/config.yaml"


@CHECKS.check("run folder: the Llama run of experiments/27-llama-verbs finished with your four files",
              hint="train experiments/27-llama-verbs/config.yaml into the run folder with MINITRAIN_LAB_DIR set to "
                   "the workspace (its README has the command)")
def _run_done(lab):
    check_manifest(lab, files=FILES)
    model, _ = run_model(lab, CONFIG)  # the model file itself: the config's Llama, trained for its 2,000 steps
    not_the_reference(lab, model)


@CHECKS.check("run folder: on the held-out verbs, val PPL under 1.6 and exact match over 10 %",
              needs=(_run_done,),
              hint=f"the reference run reaches val PPL {REFERENCE_PPL} and {REFERENCE_EXACT * 100:.1f} % exact match "
                   "(seeds 43 and 44: 1.355 and 1.540, 52.8 % and 12.5 %; MiniGPT at equal parameters: 1.373, "
                   "61.8 %); a run far above means a piece trains badly: the items above grade each one")
def _run_scores(lab):
    scores = scored_model(lab, CONFIG, exact_below=1.6)  # from the weights and the lab's val split, never
    if not (scores["ppl"] < 1.6 and scores["exact_match"] > 0.1):  # results.json's numbers
        exact = f" and exact match {scores['exact_match']:.1%}" if "exact_match" in scores else ""
        raise Failed(f"scored here from its model file, the run's held-out val PPL is {scores['ppl']:.4g}{exact}; "
                     "expected under 1.6 and over 10 % (the n-gram baseline: 5.8 and 0 %)")
