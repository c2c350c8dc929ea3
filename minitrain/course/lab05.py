"""Lab 05's checker: `LoRALinear` (minitrain/nn/lora.py) and the integer grid of quantization (minitrain/quant/
grid.py: `scale_and_zero`, `quantize_units`, `dequantize_units`), then the LoRA run, its merge and its 4-bit file.

The unit checks build small layers and grids in float64 whose answers follow from the formulas; a wrong answer
is compared with the usual mistakes (the scale alpha instead of alpha/rank, B drawn at random, a merge without
the scale, 2^(bits−1) levels instead of 2^(bits−1) − 1, truncation, the scales along the wrong axis) to say
which one it is. Every check decides in the checker's process (checks.py `here`): the layers, inputs and schemes
the student's code is given are built in the child (`_there`), with the seeds this process builds its own from;
the gradient check's central differences come back from there as arrays (gradcheck.gradients). The run folder is
scored here from its files (the LoRA run's adapters on their base, the merged model, the 4-bit file) on the
held-out imperfect, never read from results.json; the committed reference run keeps its merge and not its
adapters, so its merged model is scored in their place (`_adapted_run`).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

from minitrain.autograd import functional as F
from minitrain.autograd.gradcheck import GradcheckError, compare_gradients, gradients
from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import UserError
from minitrain.common.paths import course_file
from minitrain.course import fixtures
from minitrain.course.checks import Checklist, Failed, is_a
from minitrain.course.remote import StudentError
from minitrain.course.runs import check_manifest, run_file
from minitrain.data.batcher import encode_split  # the library's: `lab check` refuses the seam
from minitrain.hub.sources import load_model
from minitrain.nn import Linear, inference
from minitrain.quant.grid import dequantize_units, quantize_units, scale_and_zero  # the library's: the yardstick
from minitrain.quant.scheme import Scheme
from minitrain.runs.model_files import load_model_file
from minitrain.runs.run_dir import locate
from minitrain.training.scoring import score_records

CHECKS = Checklist(here=True)
LORA, GRID = "minitrain/nn/lora.py", "minitrain/quant/grid.py"
RANK, ALPHA = 2, 6.0  # scale alpha/rank = 3, so alpha (6), 1 and rank/alpha (1/3) are each told apart
# The experiment's base, before adaptation, on the held-out imperfect (experiments/21-lora/results.json).
BASE_RESULTS = course_file("experiments/21-lora/results.json")
MERGED, QUANTIZED = "merged", "merged-int4.safetensors"


def _base(activation: str | None = None) -> Linear:
    """A frozen 6 → 5 float64 Linear with a non-zero bias."""
    rng = np.random.default_rng(0)
    layer = Linear(6, 5, activation=activation, rng=rng, dtype=np.float64)
    layer.bias.data[...] = rng.normal(0.0, 0.5, 5)
    layer.requires_grad_(False)
    return layer


def _there(lab):
    """This module where the student's code runs (`lab.library`): the objects handed to that code are built there."""
    return lab.library(sys.modules[__name__])


def _rng(lab, seed: int):
    """np.random.default_rng(seed) where the student's code runs."""
    return lab.library(np.random).default_rng(seed)


def _adapted_there(lora_linear, activation: str | None = None, seed: int = 1):
    """Runs where the student's code does (`_there`): their `lora_linear` (rank 2, alpha 6) over `_base`, with A
    and B set to known random values."""
    layer = lora_linear(_base(activation), RANK, ALPHA, rng=np.random.default_rng(seed))
    values = np.random.default_rng(seed + 10)
    layer.lora_A.data[...] = values.normal(0.0, 0.5, layer.lora_A.shape)
    layer.lora_B.data[...] = values.normal(0.0, 0.5, layer.lora_B.shape)
    return layer


def _adapted(lab, activation: str | None = None, seed: int = 1):
    return _there(lab)._adapted_there(lab.module(LORA).LoRALinear, activation, seed)


def _gradients_there(layer, x) -> list:
    """Runs where the student's code does: (backward's gradient, central differences) of lora_A and lora_B for
    `layer(x)`, as arrays (gradcheck.gradients)."""
    return gradients(lambda a, b: layer(x), [layer.lora_A, layer.lora_B])


def _x() -> Tensor:
    return Tensor(np.random.default_rng(2).normal(0.0, 1.0, (3, 4, 6)), dtype=np.float64)


def _scale_mistake(got: np.ndarray, base: np.ndarray, update: np.ndarray) -> str:
    """Which scale the update `got − base` was added with, in words ("" when none of the usual ones)."""
    for factor, what in ((ALPHA, "alpha (6), not alpha/rank (3)"), (1.0, "1: the scale alpha/rank is missing"),
                         (RANK / ALPHA, "rank/alpha (1/3), upside down"), (0.0, "0: the update is not added")):
        if np.allclose(got, base + factor * update, rtol=1e-9, atol=1e-12):
            return f": your update was scaled by {what}"
    return ""


@CHECKS.check("a fresh LoRALinear computes exactly its base layer: lora_B starts at zero",
              hint="lora_A (in, rank) drawn from rng, lora_B (rank, out) all zeros: then A·B = 0 and the adapted "
                   "model starts as exactly the base model")
def _starts_as_base(lab):
    layer = lab.module(LORA).LoRALinear(_there(lab)._base(), RANK, ALPHA, rng=_rng(lab, 1))
    shapes = (tuple(layer.lora_A.shape), tuple(layer.lora_B.shape))
    if shapes != ((6, RANK), (RANK, 5)):
        raise Failed(f"over a 6 → 5 layer with rank {RANK}, lora_A / lora_B have shapes {shapes[0]} / {shapes[1]}; "
                     f"expected (6, {RANK}) / ({RANK}, 5): x·A·B must map (…, in) to (…, out)")
    b = np.asarray(layer.lora_B.data)
    if np.any(b != 0):
        raise Failed(f"lora_B is not all zeros (max |B| = {np.abs(b).max():.3g}): the adapted model "
                     "starts away from its base, and fine-tuning first has to undo a random change")
    if not np.allclose(layer(_there(lab)._x()).data, _base()(_x()).data, rtol=1e-12, atol=1e-12):
        raise Failed("with B = 0 the output differs from the base layer's: forward must be x·W + b + the update")


@CHECKS.check("lora_A starts random, drawn from the rng it is given",
              hint="draw A from `rng` by `init` (kaiming by default: U(−1/√in, 1/√in)); with A = 0 as well as "
                   "B = 0, neither matrix ever gets a gradient")
def _a_random(lab):
    make = lab.module(LORA).LoRALinear
    a = [np.asarray(make(_there(lab)._base(), RANK, ALPHA, rng=_rng(lab, seed)).lora_A.data) for seed in (1, 1, 2)]
    if not np.any(a[0]):
        raise Failed("lora_A is all zeros: with A = 0 and B = 0 the gradients of both are 0 (∂L/∂B ∝ A, "
                     "∂L/∂A ∝ B), so nothing ever trains")
    if not np.array_equal(a[0], a[1]) or np.array_equal(a[0], a[2]):
        raise Failed("lora_A does not follow the rng: the same seed must give the same A, another seed another A "
                     "(runs are reproducible only if A comes from the training RNG)")
    bound = 1 / math.sqrt(6)
    if np.abs(a[0]).max() > bound:
        raise Failed(f"lora_A has values up to {np.abs(a[0]).max():.3g}; the default init, kaiming, draws from "
                     f"U(−1/√in, 1/√in) = ±{bound:.3g} for in = 6")


@CHECKS.check("forward adds (alpha/rank)·x·A·B to x·W + b",
              hint="y = base_layer.pre_activation(x) + (alpha / rank) · dropout(x)·A·B, with Tensor ops "
                   "(F.linear, *): the scale is alpha/rank, so changing the rank does not change the update's size")
def _forward(lab):
    layer = _adapted(lab)
    x, ours = _x(), _base()
    base = x.data @ ours.weight.data + ours.bias.data
    update = x.data @ layer.lora_A.data @ layer.lora_B.data
    got = layer(_there(lab)._x()).data
    want = base + ALPHA / RANK * update
    if not np.allclose(got, want, rtol=1e-9, atol=1e-12):
        raise Failed(f"rank {RANK}, alpha {ALPHA:g}: the output is off by up to {np.abs(got - want).max():.3g}"
                     + _scale_mistake(got, base, update))


@CHECKS.check("the update goes in before the base's activation: gelu(x·W + b + ΔW-term)",
              hint="GPT-2's c_fc applies GELU; add the update to pre_activation(x), then apply GELU when "
                   "self.activation == 'gelu' (the activation property returns base_layer.activation)")
def _activation(lab):
    layer = _adapted(lab, activation="gelu")
    if layer.activation != "gelu":
        raise Failed(f"over a GELU layer, activation is {layer.activation!r}; expected 'gelu', the base's")
    x, ours = _x(), _base("gelu")
    pre = x.data @ ours.weight.data + ours.bias.data
    update = ALPHA / RANK * (x.data @ layer.lora_A.data @ layer.lora_B.data)
    got, want = layer(_there(lab)._x()).data, F.gelu(Tensor(pre + update)).data
    if np.allclose(got, want, rtol=1e-9, atol=1e-12):
        return
    after = F.gelu(Tensor(pre)).data + update
    why = ": you added the update after GELU" if np.allclose(got, after, rtol=1e-9, atol=1e-12) else ""
    raise Failed(f"over a GELU layer the output is off by up to {np.abs(got - want).max():.3g}{why}; merging folds "
                 "the update into W, which sits inside the GELU")


@CHECKS.check("gradients reach lora_A and lora_B, and match central differences",
              hint="compute the update with Tensor ops on self.lora_A and self.lora_B (F.linear, *), never on "
                   "their .data: NumPy arrays are not on the tape, so no gradient would reach them")
def _gradients(lab):
    layer = _adapted(lab, activation="gelu")
    x = _there(lab)._x()
    if not layer(x).requires_grad:
        raise Failed("the output does not require grad, though lora_A and lora_B do: the update was computed off "
                     "the tape (on .data?), so no gradient reaches them")
    try:
        compare_gradients(_there(lab)._gradients_there(layer, x))
    except GradcheckError as error:
        raise Failed(f"the gradients of lora_A / lora_B are wrong: {error}") from None
    if layer.lora_A.grad is None or layer.lora_B.grad is None or not np.any(layer.lora_B.grad):
        raise Failed("after backward, lora_A.grad or lora_B.grad is empty: the update is not on the tape")


@CHECKS.check("delta_weight is (alpha/rank)·A·B: the merged layer computes what the adapted one did",
              hint="ΔW = (alpha / rank) · A @ B, shape (in, out): merging writes W + ΔW into a plain Linear, so "
                   "forgetting the scale gives a merged model that differs from the one trained")
def _delta(lab):
    layer = _adapted(lab, activation="gelu")
    delta = np.asarray(layer.delta_weight())
    if delta.shape != (6, 5):
        raise Failed(f"delta_weight() has shape {delta.shape}; expected (in, out) = (6, 5)")
    product = layer.lora_A.data @ layer.lora_B.data
    if np.allclose(delta, product, rtol=1e-9):
        raise Failed("delta_weight() is A·B: the scale alpha/rank is missing, so the merged model computes "
                     f"{RANK / ALPHA:.3g}× the update the adapted one did")
    base = _base("gelu")
    merged = Linear.from_arrays(base.weight.data + delta, base.bias.data, base.activation)
    gap = np.abs(merged(_x()).data - layer(_there(lab)._x()).data).max()
    if not gap <= 1e-9:  # NaN too
        raise Failed(f"the layer merged with W + delta_weight() differs from the adapted layer by up to {gap:.3g}")


# ------------------------------------------------------------------------------------------------ the grid


def _ranges() -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] of three units (1, 3): the last is all zeros."""
    return np.array([[-0.5, -1.4, 0.0]]), np.array([[0.7, 0.2, 0.0]])


@CHECKS.check("scale_and_zero, symmetric: s = max(|lo|, |hi|) / (2^(bits−1) − 1), z = 0",
              hint="the symmetric grid is −qmax..qmax with qmax = 2^(bits−1) − 1 (−7..7 at 4 bits), so the "
                   "largest |value| lands on qmax; an all-zero unit gets s = 1. Use scheme.qmax")
def _symmetric(lab):
    scale, zero = lab.module(GRID).scale_and_zero(*_ranges(), _there(lab).Scheme(4, "symmetric"))
    scale = np.asarray(scale, dtype=np.float64).reshape(-1)
    want = np.array([0.1, 0.2, 1.0])
    if np.allclose(scale, want, rtol=1e-6) and not np.any(zero):
        return
    mistakes = [(np.array([0.7 / 8, 0.175, 1.0]), "divided by 2^(bits−1) = 8: the symmetric grid is −7..7, so "
                                                     "0.7 lands on 8, off the grid, and is clipped to 7"),
                (np.array([0.7 / 15, 1.4 / 15, 1.0]), "divided by 2^bits − 1 = 15, the asymmetric grid's size"),
                (np.array([0.7 / 7, 0.2 / 7, 1.0]), "used hi alone; the scale must cover max(|lo|, |hi|)")]
    found = next((what for value, what in mistakes if np.allclose(scale, value, rtol=1e-6)), None)
    raise Failed(f"at 4 bits, ranges [−0.5, 0.7], [−1.4, 0.2], [0, 0] gave scales {np.round(scale, 6).tolist()} "
                 f"and zero points {np.asarray(zero).reshape(-1).tolist()}; expected [0.1, 0.2, 1.0] and 0"
                 + (f": you {found}" if found else ""))


@CHECKS.check("scale_and_zero, asymmetric: s = (hi − lo) / (2^bits − 1), z = round(−lo / s)",
              hint="the asymmetric grid is 0..2^bits − 1 spread over [lo, hi]; the zero point is the code of 0.0, "
                   "round(−lo / s), clipped to the grid")
def _asymmetric(lab):
    scale, zero = lab.module(GRID).scale_and_zero(np.array([[-0.3, 0.0]]), np.array([[1.2, 1.5]]),
                                                  _there(lab).Scheme(4, "asymmetric"))
    got = (np.round(np.asarray(scale, dtype=np.float64).reshape(-1), 6).tolist(), np.asarray(zero).reshape(-1).tolist())
    if got != ([0.1, 0.1], [3, 0]):
        raise Failed(f"at 4 bits, ranges [−0.3, 1.2] and [0, 1.5] gave scales {got[0]} and zero points {got[1]}; "
                     "expected s = 1.5 / 15 = 0.1 for both, z = round(0.3 / 0.1) = 3 and 0")


def _units() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One unit per channel (1, 4, 3), scales 0.1, 0.2 and 1 (symmetric, 4 bits), with values that must round up,
    round down, and clamp at the grid's ends."""
    units = np.array([[[0.26, -0.26, 3.0], [0.74, 0.5, -0.4], [-0.95, 1.41, 9.0], [0.04, -0.29, -7.6]]])
    return units, np.array([[0.1, 0.2, 1.0]], dtype=np.float32), np.zeros((1, 3), dtype=np.int32)


AXIS = "units are (G, g, C) and scales (G, C): divide by scale[:, None, :], so column c of group i uses scale[i, c]"


@CHECKS.check("quantize_units rounds to the nearest level, clamps to [qmin, qmax], stores q − qmin as uint8",
              hint="q = clip(round(w / s) + z, qmin, qmax) (np.round, not int(): 0.26 / 0.1 is 3, not 2), then "
                   "(q − qmin).astype(np.uint8)")
def _quantize(lab):
    units, scale, zero = _units()
    scheme = Scheme(4, "symmetric")
    try:
        codes = np.asarray(lab.module(GRID).quantize_units(units, scale, zero, _there(lab).Scheme(4, "symmetric")))
    except (ValueError, StudentError) as error:  # the scales along the wrong axis: the next item's mistake
        if not is_a(error, ValueError) or "broadcast" not in str(error):
            raise
        raise Failed(f"units (G, g, C) = {units.shape} and scales (G, C) = {scale.shape} did not broadcast in your "
                     f"quantize_units: {error}", hint=AXIS) from None
    want = quantize_units(units, scale, zero, scheme)
    if codes.dtype != np.uint8:
        raise Failed(f"the codes are {codes.dtype}; expected uint8, the stored bytes")
    if np.array_equal(codes, want):
        return
    q = codes.astype(np.int64) + scheme.qmin
    first = q[0, 0, 0]
    if codes.shape == want.shape and first == 2:
        raise Failed("0.26 with s = 0.1 gave q = 2: you truncated w / s; round to the nearest level (3)")
    if codes.shape == want.shape and np.array_equal(codes.astype(np.int64), want.astype(np.int64) + scheme.qmin):
        raise Failed("the codes are q itself; store q − qmin (so −7..7 becomes 0..14 and fits unsigned bytes)")
    if codes.shape == want.shape and q.max() > scheme.qmax:
        raise Failed(f"9.0 with s = 1 gave q = {q.max()}: clamp q to [qmin, qmax] = [−7, 7]")
    raise Failed(f"codes {codes.reshape(-1).tolist()}; expected {want.reshape(-1).tolist()} (q − qmin of "
                 f"{(want.astype(int) + scheme.qmin).reshape(-1).tolist()})")


@CHECKS.check("each unit's scale applies to its own values: (G, C) scales broadcast over the unit's g rows",
              hint=AXIS)
def _axis(lab):
    rng = np.random.default_rng(3)
    units = rng.normal(0.0, 1.0, (2, 4, 4)) * np.array([0.1, 1.0, 10.0, 100.0])  # a scale per column
    scheme = Scheme(8, "symmetric")
    scale, zero = scale_and_zero(np.minimum(units.min(axis=1), 0), np.maximum(units.max(axis=1), 0), scheme)
    codes = np.asarray(lab.module(GRID).quantize_units(units, scale, zero, _there(lab).Scheme(8, "symmetric")))
    if np.array_equal(codes, quantize_units(units, scale, zero, scheme)):
        return
    transposed = quantize_units(np.swapaxes(units, 1, 2), scale, zero, scheme)
    if codes.shape == units.shape and np.array_equal(np.swapaxes(codes, 1, 2), transposed):
        raise Failed("the scale of column c was applied to row c of each unit: broadcast the (G, C) scales as "
                     "scale[:, None, :], over the rows of the channel they belong to")
    raise Failed("2 groups × 4 rows × 4 channels, one scale per (group, channel): the codes differ from q = "
                 "round(w / scale[g, c]) + zero[g, c]")


@CHECKS.check("dequantize_units gives (q − z)·s: a round trip is off by at most s/2",
              hint="ŵ = (codes + qmin − z) · s as float32, with scale[:, None, :] and zero[:, None, :]; the zero "
                   "point matters for the asymmetric scheme")
def _dequantize(lab):
    student = lab.module(GRID)
    units = np.random.default_rng(4).normal(0.3, 1.0, (2, 8, 3))
    for kind in ("symmetric", "asymmetric"):
        scheme, theirs = Scheme(4, kind), _there(lab).Scheme(4, kind)
        scale, zero = scale_and_zero(np.minimum(units.min(axis=1), 0), np.maximum(units.max(axis=1), 0),
                                          scheme)
        codes = quantize_units(units, scale, zero, scheme)
        got = np.asarray(student.dequantize_units(codes, scale, zero, theirs))
        want = dequantize_units(codes, scale, zero, scheme)
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-6, atol=1e-7):
            no_zero = (codes.astype(np.int32) + scheme.qmin) * scale[:, None, :]
            why = (": you left out the zero point (q − z)" if got.shape == want.shape and kind == "asymmetric"
                   and np.allclose(got, no_zero, rtol=1e-6) else "")
            raise Failed(f"{kind}, 4 bits: dequantized values off by up to "
                         f"{np.abs(got - want).max() if got.shape == want.shape else 'a shape'}{why}")
        mine = student.dequantize_units(student.quantize_units(units, scale, zero, theirs), scale, zero, theirs)
        worst = (np.abs(np.asarray(mine) - units) / scale[:, None, :]).max()
        if not worst <= 0.5 + 1e-5:  # NaN too
            raise Failed(f"{kind}: your quantize then dequantize moved a value by {worst:.3g} steps; at most 0.5")


# ------------------------------------------------------------------------------------------------ run folder


def _model(path: Path):
    """The model at `path` (a run folder, whose LoRA adapters the library folds into their base; a merged
    folder; a model file), loaded here by the library."""
    try:
        return load_model(str(path))[0]
    except UserError as error:
        raise Failed(f"{path} cannot be read as a model: {error}") from None


def _adapted_run(lab):
    """The LoRA run's model, its adapters (the run's model file) on their base, loaded here by the library; None
    when the library's own files are graded (no workspace) on a run folder without its models/, which keeps its
    merge only: the course's reference run, whose base was trained on another machine and is not committed."""
    if lab.workspace is None and not (lab.run_dir / "models").is_dir():
        return None
    return _model(lab.run_dir)


def _base_of_adapters(lab):
    """The base model the run's adapters record (found as the run's paths are), loaded here by the library."""
    run = run_file(lab)
    if run.adapter is None:
        raise Failed(f"the run's model file {run.model_path} holds a whole model, not LoRA adapters")
    return _model(locate(run.adapter.base, lab.run_dir) or Path(run.adapter.base or ""))


def _imperfect() -> list[dict]:
    """The imperfect of the held-out val verbs: the 24 forms the adaptation is scored on."""
    return [r for r in fixtures.records("val") if r["tense"] == "I"]


def _held_out_ppl(model) -> float:
    return score_records(model, fixtures.tokenizer(), _imperfect())["ppl"]


def _logits(model) -> np.ndarray:
    """The model's logits at the real tokens of the held-out imperfect, (tokens, vocab)."""
    batch = encode_split(_imperfect(), fixtures.tokenizer(), model.config["max_seq_len"])
    with inference(model):
        return model(batch.input, attn_pad_mask=batch.attn_pad_mask)[0].data[batch.attn_pad_mask]


@CHECKS.check("run folder: the LoRA run finished with your LoRALinear, training only the adapters",
              hint="train experiments/21-lora/lora.yaml into the run folder with MINITRAIN_LAB_DIR set (the "
                   "workspace README has the command), after `.venv/bin/python experiments/21-lora/run.py --base-only`")
def _run_done(lab):
    manifest = check_manifest(lab, files=(LORA,))
    model, lora = manifest["config"]["model"], manifest["config"].get("lora") or {}
    if not lora.get("enabled"):
        raise Failed("the run's config has no `lora: enabled: true`: it fine-tuned every weight")
    d, ff = model["d_model"], model["d_ff"]
    expected = model["n_layer"] * lora["rank"] * ((d + 3 * d) + (d + d) + (d + ff) + (ff + d))
    if manifest.get("trainable_parameters") != expected:
        raise Failed(f"the run trained {manifest.get('trainable_parameters')} weights; rank {lora['rank']} adapters "
                     f"on c_attn, attn.c_proj, c_fc and mlp.c_proj of {model['n_layer']} blocks are rank·Σ(in + out) "
                     f"= {expected}")


@CHECKS.check("run folder: the adapters learned the held-out imperfect: val PPL far below the base's",
              hint="the base never saw the imperfect (val PPL 2.300 on it); 400 steps of rank-4 adapters bring it "
                   "near 1.17. A run stuck near the base means the update never trained (A or B frozen, or 0)",
              needs=(_run_done,))
def _run_learned(lab):
    base = json.loads(BASE_RESULTS.read_text(encoding="utf-8"))["adapt"]["base"]["scores"]["val"]["ppl"]
    adapted = _adapted_run(lab)  # scored from the weights, never results.json's number
    ppl = _held_out_ppl(adapted if adapted is not None else _model(lab.run_dir / MERGED))
    if not ppl < 1.5:
        raise Failed(f"scored here from its model file, the run's val PPL on the held-out imperfect is {ppl:.4g}; "
                     f"the base's is {base:.4g}, and the reference run's 1.169: expected under 1.5")
    start = None if adapted is None else _held_out_ppl(_base_of_adapters(lab))
    if start is not None and not start > 0.8 * base:  # adapters of B = 0 on a model that learned it already
        raise Failed(f"the adapters' base scores val PPL {start:.4g} on the held-out imperfect, scored here: it "
                     f"already knows the imperfect, which base.yaml's run never saw ({base:.4g}); train the "
                     "adapters on that base, lora.yaml's init_from")


@CHECKS.check("run folder: merged/ holds the merged model, and it computes what the adapted one did",
              hint="`minitrain merge-adapters RUN RUN/merged` with MINITRAIN_LAB_DIR set: it folds delta_weight() "
                   "into W and compares the logits with the adapted model's", needs=(_run_done,))
def _run_merged(lab):
    folder = lab.run_dir / MERGED
    if not (folder / "results.json").is_file():
        raise Failed(f"{folder}/results.json does not exist: merge the run into {folder} first")
    merged, adapted = _model(folder), _adapted_run(lab)
    if adapted is None:  # the reference run keeps no adapters to compare with (`_adapted_run`)
        return
    difference = np.abs(_logits(merged) - _logits(adapted)).max()  # both computed here, never merge's record
    if not difference < 1e-4:
        raise Failed(f"the merged model's logits differ from the adapted model's by up to {difference:.3g}: "
                     "delta_weight() and forward disagree (the scale?)")


@CHECKS.check("run folder: a 4-bit per-channel file of the merged model, within 5 % of its float val PPL",
              hint=f"`minitrain quantize RUN/merged RUN/{QUANTIZED} --bits 4 --granularity per_channel` with "
                   "MINITRAIN_LAB_DIR set; the file records the val PPL it measured", needs=(_run_merged,))
def _run_quantized(lab):
    path = lab.run_dir / QUANTIZED
    if not path.is_file():
        raise Failed(f"{path} does not exist: quantize the merged model into it")
    _, _, meta = load_model_file(path)
    settings, recorded = meta.get("quantization", {}), meta.get("evaluation", {}).get("val_ppl")
    if (settings.get("bits"), settings.get("granularity")) != (4, "per_channel"):
        raise Failed(f"{path.name} holds {settings.get('bits')}-bit {settings.get('granularity')} weights; the lab "
                     "asks for 4 bits, per channel")
    coded = load_model_file(course_file(f"{lab.lab.reference_run}/{QUANTIZED}"))[2]["quantized"]  # the weights
    if meta.get("kind") != "quantized" or set(meta.get("quantized") or {}) != set(coded):  # `quantize` codes
        raise Failed(f"{path.name} does not hold the {len(coded)} linear weights of the merged model as 4-bit codes, "
                     "whatever its metadata says: write it with `minitrain quantize`")
    ppl, float_ppl = _held_out_ppl(_model(path)), _held_out_ppl(_model(lab.run_dir / MERGED))
    if recorded is not None and not math.isclose(ppl, recorded, rel_tol=1e-4):
        raise Failed(f"the file records val PPL {recorded:.6g}, but the library reading its integers back "
                     f"scores {ppl:.6g}: your quantize_units and dequantize_units do not invert each other as "
                     "(q − qmin) codes and (q − z)·s do")
    if not ppl <= 1.05 * float_ppl:
        raise Failed(f"at 4 bits the val PPL went from {float_ppl:.4g} to {ppl:.4g}, more than 5 % worse: "
                     "per-channel 4-bit rounding should cost about 1 %")
