"""Lab 09's checker: TIES merging (minitrain/merging/ties.py: `trim`, `elect_and_mean`, `ties`) and DARE
(minitrain/merging/dare.py: `mask_rng`, `drop_and_rescale`, `dare_deltas`, `dare_linear`, `dare_ties`), then the
student's merges of experiment 23's two fine-tunes, scored here.

Each function is graded against a NumPy reading of the papers written below (never the library's functions), on
small tensors built so that each usual mistake gives another answer: equal magnitudes at the k-th place, a sign
elected by count instead of mass, the mean over all models instead of the agreeing ones, a sum of exactly 0, the
rescale forgotten or by 1 − density, the draw read the other way or from another stream, τ of the other sign or
taken in float32 (where 0.5 + 2⁻²⁵ rounds to a tie); a wrong answer is compared with those mistakes to say which
one it is. The last item, passed, shows the student's six scores beside the table's. Every check only sends data
to the student's functions (arrays, lists, numbers, strings, and the generator their own `mask_rng` returned) and
compares what comes back (`_array`): the observation and the verdict are apart, so the checks can run in the
checker's process.
"""

from __future__ import annotations

import json
import zlib
from functools import cache

import numpy as np

from minitrain.common.paths import course_file
from minitrain.course.checks import Checklist, Failed
from minitrain.data.corpus import load_records
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.sources import load_model
from minitrain.merging.parents import tensor_order
from minitrain.runs.model_files import load_model_file, save_model_file
from minitrain.training.scoring import score_records

CHECKS = Checklist(here=True)
TIES, DARE = "minitrain/merging/ties.py", "minitrain/merging/dare.py"
LAB = "experiments/23-merging/lab09"


def _array(value, shape: tuple, what: str) -> np.ndarray:
    """`value` as a float64 array of `shape`, or Failed saying what came back instead."""
    if not isinstance(value, np.ndarray) or value.dtype.kind != "f":
        raise Failed(f"{what} returned {type(value).__name__} {getattr(value, 'dtype', '')}; expected a float "
                     f"NumPy array of shape {shape}")
    if value.shape != shape:
        raise Failed(f"{what} returned shape {value.shape}; expected {shape}, the shape it was given")
    return value.astype(np.float64)


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return np.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True)


def _named(got: np.ndarray, mistakes: list[tuple[np.ndarray, str]]) -> str:
    """": <what the mistake is>" for the first of `mistakes` that `got` is, else ""."""
    return next((f": {why}" for value, why in mistakes if _close(got, value)), "")


# ------------------------------------------------------------------------------------ the papers, read here


def ref_trim(tau: np.ndarray, density: float) -> np.ndarray:
    """TIES step 1: keep the k = round(density · size) largest |τ|, the earlier first among equals."""
    flat = tau.ravel()
    keep = sorted(range(flat.size), key=lambda j: (-abs(flat[j]), j))[: round(density * flat.size)]
    out = np.zeros(flat.size)
    out[keep] = flat[keep]
    return out.reshape(tau.shape)


def ref_elect(taus: list[np.ndarray], weights: list[float]) -> np.ndarray:
    """TIES steps 2 and 3: γ = sgn(Σ w_i τ_i); the w-weighted mean of the τ_i ≠ 0 of sign γ; 0 where none."""
    out = np.zeros(taus[0].shape)
    for j in np.ndindex(out.shape):
        gamma = np.sign(sum(w * t[j] for w, t in zip(weights, taus, strict=True)))
        agree = [(w, t[j]) for w, t in zip(weights, taus, strict=True) if t[j] != 0 and np.sign(t[j]) == gamma]
        if gamma != 0 and agree:
            out[j] = sum(w * v for w, v in agree) / sum(w for w, _ in agree)
    return out


def ref_draws(seed: int, i: int, name: str, shape: tuple) -> np.ndarray:
    """The lab's stream: model i's uniforms for tensor `name`, one per entry, in C order."""
    return np.random.default_rng([seed, i, zlib.crc32(name.encode("utf-8"))]).random(shape)


def ref_drop(tau: np.ndarray, density: float, u: np.ndarray) -> np.ndarray:
    """DARE: an entry kept with probability density (u < density) and divided by it, so that E[τ̃] = τ."""
    return tau.copy() if density >= 1 else np.where(u < density, tau / density, 0.0)


def ref_deltas(base, tensors, densities, seed, name) -> list[np.ndarray]:
    taus = [t.astype(np.float64) - base.astype(np.float64) for t in tensors]
    return [ref_drop(t, p, ref_draws(seed, i, name, t.shape))
            for i, (t, p) in enumerate(zip(taus, densities, strict=True))]


# ------------------------------------------------------------------------------------------------ trim

ROWS = np.array([[0.3, -0.9, 0.05, 0.6, -0.75], [0.01, 0.7, -0.4, 0.15, -0.2]])  # no two |τ| equal
# 4 of |τ| 0.5, 14 of 0.3 and 6 of 0.1: k = 12 keeps the 0.5s and the first 8 of the 0.3s (long enough that
# np.argsort's default, unstable sort keeps others)
TIED = np.array([0.3, -0.5, -0.3, 0.1, 0.3, -0.3, 0.5, 0.3, -0.1, 0.3, -0.3, 0.1, -0.5, 0.3, 0.3, -0.1, -0.3, 0.3, 0.5,
                 0.1, -0.3, 0.3, -0.1, 0.3])


def _kept(values: np.ndarray, where: np.ndarray) -> np.ndarray:
    return np.where(where, values, 0.0)


@CHECKS.check("trim keeps the k = round(density · size) largest |τ| of the whole tensor, signs and places kept",
              hint="k = round(density · τ.size) over the WHOLE tensor (τ.ravel()), ranked by |τ|: density is the "
                   "share kept; the kept entries keep their value and sign, the others become 0, same shape")
def _trim(lab):
    got = _array(lab.module(TIES).trim(ROWS.copy(), 0.37), ROWS.shape, "`trim(τ, 0.37)`, τ of shape (2, 5)")
    want = ref_trim(ROWS, 0.37)
    if _close(got, want):
        return
    per_row = np.stack([ref_trim(row, 0.37) for row in ROWS])
    mistakes = [(ref_trim(ROWS, 0.3), "you kept 3: k = round(0.37 · 10) = 4, and int() truncates"),
                (ref_trim(ROWS, 0.63), "you kept the share 1 − density; density is the share KEPT"),
                (per_row, "you trimmed each row on its own; the top k are taken over the whole tensor"),
                (np.abs(want), "the kept values lost their sign (|τ| ranks them; τ is what is kept)"),
                (_kept(ROWS, np.isin(ROWS, np.sort(ROWS.ravel())[-4:])), "you ranked by τ, not |τ|: a large "
                 "negative change matters as much as a large positive one"),
                (ROWS - want, "you zeroed the k largest |τ| and kept the others; trimming keeps the largest")]
    raise Failed(f"`trim(τ, 0.37)` on τ = {ROWS.tolist()} gave {got.tolist()}; expected {want.tolist()}"
                 + _named(got, mistakes))


@CHECKS.check("trim keeps exactly k entries when |τ| ties at the k-th: the earlier ones first", needs=(_trim,),
              hint="rank with a stable sort of −|τ| (np.argsort(-np.abs(flat), kind='stable')[:k]; np.argsort's "
                   "default sort is not stable): among equal magnitudes the earlier entries win, and exactly k are "
                   "kept (never a threshold |τ| ≥ the k-th)")
def _trim_ties(lab):
    got = _array(lab.module(TIES).trim(TIED.copy(), 0.5), TIED.shape, "`trim(τ, 0.5)`, τ of shape (24,)")
    want = ref_trim(TIED, 0.5)
    if _close(got, want):
        return
    kept, tied = np.flatnonzero(got).tolist(), np.flatnonzero(np.isclose(np.abs(TIED), 0.3))
    why = (f": {len(kept)} entries kept where k = 12: every |τ| equal to the k-th (0.3) passed a threshold"
           if _close(got, _kept(TIED, np.abs(TIED) >= 0.3)) else
           f": among the 14 entries of |τ| = 0.3 you kept positions {[j for j in kept if j in tied]}; the contract "
           f"keeps the earlier ones, {tied[:8].tolist()}" if len(kept) == 12 else "")
    raise Failed(f"`trim(τ, 0.5)` on τ = {TIED.tolist()} kept positions {kept}; expected "
                 f"{np.flatnonzero(want).tolist()}{why}")


# ------------------------------------------------------------------------------------ elect and mean

# Three models, one entry per case: e0 and e5 mass against count; e1 and e4 the disjoint mean; e2 a sum of
# exactly 0; e3 no model changed it.
ELECT = [np.array([1.0, 2.0, 3.0, 0.0, 2.0, -1.0]), np.array([1.0, 4.0, -3.0, 0.0, 0.0, -2.0]),
         np.array([-5.0, -1.0, 0.0, 0.0, 0.0, 0.5])]


def _elect(lab, taus=ELECT, weights=(1.0, 1.0, 1.0)) -> np.ndarray:
    got = lab.module(TIES).elect_and_mean([t.copy() for t in taus], list(weights))
    return _array(got, taus[0].shape, f"elect_and_mean({len(taus)} task vectors of shape {taus[0].shape}, weights)")


def _entries(got: np.ndarray, want: np.ndarray, entries: list[int]) -> list[int]:
    return [j for j in entries if not _close(got[j], want[j])]


def _case(j: int) -> str:
    return f"entry {j}, τ = {[float(t[j]) for t in ELECT]}"


@CHECKS.check("elect_and_mean elects each entry's sign by total mass, sgn(Σ w_i τ_i), not by a count of signs",
              hint="γ = np.sign(Σ_i w_i τ_i) per entry: +1 and +1 against −5 elect −, since −5 carries more "
                   "magnitude; counting signs (np.sign(τ).sum()) lets two small changes outvote a large one")
def _mass(lab):
    got, want = _elect(lab), ref_elect(ELECT, [1.0] * 3)
    wrong = [j for j in (0, 5) if np.sign(got[j]) != np.sign(want[j])]  # the sign only: the mean is the next item's
    if wrong:
        j = wrong[0]
        why = ": the sign was elected by count (two + against one −); the paper elects by total mass" \
            if j == 0 and got[0] > 0 else ""
        raise Failed(f"{_case(j)}: got {got[j]:g}, expected {want[j]:g}, of the other sign{why}")


@CHECKS.check("elect_and_mean averages only the models that agree with the elected sign (a disjoint mean)",
              needs=(_mass,),
              hint="the mean is over A = {i : τ_i ≠ 0 and sgn(τ_i) = γ}: Σ_{i∈A} w_i τ_i / Σ_{i∈A} w_i; neither "
                   "the models of the other sign nor those that left the entry at 0 count")
def _disjoint(lab):
    got, want = _elect(lab), ref_elect(ELECT, [1.0] * 3)
    wrong = _entries(got, want, [1, 4])
    if not wrong:
        return
    j = wrong[0]
    agreeing = [t[j] for t in ELECT if t[j] != 0 and np.sign(t[j]) == np.sign(want[j])]
    mistakes = [(sum(agreeing) / 3, "the models that left it at 0 counted in the mean: τ_i = 0 has no sign, so "
                 "it does not agree") if j == 4 else
                (sum(t[j] for t in ELECT) / 3, "the mean over all 3 models, the other sign's included"),
                (sum(agreeing) / 3, "the agreeing values summed, but divided by all 3 models"),
                (sum(agreeing), "the agreeing values summed, not averaged")]
    why = next((f": {w}" for v, w in mistakes if _close(got[j], v)), "")
    raise Failed(f"{_case(j)}: got {got[j]:g}, expected {want[j]:g}{why}")


@CHECKS.check("elect_and_mean gives 0 where the changes sum to exactly 0 (no sign) or no model changed the entry",
              needs=(_mass,),
              hint="np.sign gives 0 for a sum of 0, and then no model agrees: the result is 0; where A is empty "
                   "divide by nothing (np.divide(..., where=count > 0)), never 0/0")
def _zero_sign(lab):
    got = _elect(lab)
    for j, what in ((2, "the changes +3 and −3 sum to exactly 0: no sign is elected, so no model agrees"),
                    (3, "no model changed it")):
        if got[j] != 0:
            nan = " (0/0: no model agrees, so divide only where the count is > 0)" if np.isnan(got[j]) else ""
            raise Failed(f"{_case(j)}: got {got[j]:g}{nan}, expected 0: {what}")


@CHECKS.check("elect_and_mean weights model i by w_i, in the vote and in the mean; random tensors as the paper",
              needs=(_disjoint, _zero_sign),
              hint="the vote is sgn(Σ w_i τ_i) and the mean Σ_{i∈A} w_i τ_i / Σ_{i∈A} w_i; with every w_i = 1 it "
                   "is the paper's plain vote and mean")
def _weighted(lab):
    taus, weights = [np.array([3.0, 1.0]), np.array([-2.0, 3.0])], [1.0, 2.0]
    got, want = _elect(lab, taus, weights), ref_elect(taus, weights)
    if not _close(got, want):
        raise Failed(f"τ = {[t.tolist() for t in taus]}, weights {weights}: got {got.tolist()}, expected "
                     f"{want.tolist()} (3 − 2·2 < 0 elects −; (1·1 + 2·3) / 3 = 7/3)")
    rng = np.random.default_rng(9)
    taus = [ref_trim(rng.normal(size=(4, 6)), 0.5) for _ in range(3)]
    got, want = _elect(lab, taus, [0.5, 1.0, 2.0]), ref_elect(taus, [0.5, 1.0, 2.0])
    if not _close(got, want):
        raise Failed(f"on three random trimmed (4, 6) task vectors, weights [0.5, 1, 2], off by up to "
                     f"{np.nanmax(np.abs(got - want)):.3g}")


# ------------------------------------------------------------------------------------------------ ties


REVERSED = ": the task vectors have the wrong sign: τ_i = θ_i − θ_base, what fine-tuning added to the base"


def _models(seed: int, n: int, shape=(3, 4)) -> tuple[np.ndarray, list[np.ndarray]]:
    """A float32 base and n fine-tunes of it, each changed by its own random task vector."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=shape).astype(np.float32)
    return base, [(base + rng.normal(0, 0.1, shape)).astype(np.float32) for _ in range(n)]


@CHECKS.check("ties = θ_base + λ · elect_and_mean of each model's trimmed task vector (τ_i in float64), in the "
              "base's dtype", needs=(_trim_ties, _weighted),
              hint="τ_i = θ_i − θ_base in float64 (linear.task_vectors), trimmed with its own density; the result is "
                   "base + lam · elect_and_mean(trimmed, weights), cast back to base.dtype")
def _ties(lab):
    base, tensors = _models(1, 2)
    weights, densities, lam = [1.0, 1.0], [0.5, 0.25], 0.7
    got = lab.module(TIES).ties(base.copy(), [t.copy() for t in tensors], weights, densities, lam)
    if isinstance(got, np.ndarray) and got.dtype != base.dtype:
        raise Failed(f"ties returned {got.dtype} for a {base.dtype} base; cast the merge back to base.dtype")
    got = _array(got, base.shape, "ties(base of shape (3, 4), 2 models, ...)")
    taus = [t.astype(np.float64) - base for t in tensors]
    mean = ref_elect([ref_trim(t, p) for t, p in zip(taus, densities, strict=True)], weights)
    want = (base + lam * mean).astype(np.float32)
    if not np.allclose(got, want, rtol=1e-6, atol=1e-7):
        close = lambda v: np.allclose(got, np.asarray(v, np.float32), rtol=1e-6, atol=1e-7)  # noqa: E731
        mistakes = [(base - lam * mean, REVERSED), (base + mean, ": λ was not applied"),
                    (lam * (base + mean), ": λ scaled the base as well"),
                    (lam * mean, ": it returned the merged task vector; add it to the base"),
                    (base + lam * ref_elect([ref_trim(t, 0.5) for t in taus], weights),
                     ": both models were trimmed with densities[0]; each has its own")]
        why = next((w for v, w in mistakes if close(v)), "")
        raise Failed(f"weights {weights}, densities {densities}, λ {lam}: off by up to "
                     f"{np.abs(got - want).max():.3g}" + why)
    # τ = [0.5, 0.5 + 2⁻²⁵] in float64: trim(τ, 0.5) keeps entry 1; in float32 both are 0.5, and entry 0 wins the tie
    base, tuned = np.array([0.0, 2.0**-25], np.float32), np.array([0.5, 0.5 + 2.0**-24], np.float32)
    got = _array(lab.module(TIES).ties(base.copy(), [tuned.copy()], [1.0], [0.5], 1.0), base.shape,
                 "ties(base of shape (2,), 1 model, ...)")
    want = (base + ref_trim(tuned.astype(np.float64) - base, 0.5)).astype(np.float32)
    if not np.array_equal(got, want):
        rounded = np.array_equal(got, base + ref_trim(tuned - base, 0.5))
        raise Failed(f"base {base.tolist()}, one model {tuned.tolist()}, density 0.5, λ 1: got {got.tolist()}, "
                     f"expected {want.tolist()}" + (": τ was taken in float32, where 0.5 + 2⁻²⁵ rounds to 0.5 and the "
                                                    "tie keeps entry 0" if rounded else ""))


# ------------------------------------------------------------------------------------------------ DARE

NAME = "h.0.attn.c_attn.weight"


@CHECKS.check("mask_rng(seed, i, name) is default_rng([seed, i, crc32(name)]): one stream per model and tensor",
              hint="np.random.default_rng([seed, model_index, zlib.crc32(name.encode('utf-8'))]): each model and "
                   "each tensor gets its own mask, the same for the same seed, whatever order tensors come in")
def _mask_rng(lab):
    draws = lab.module(DARE).mask_rng(3, 1, NAME).random(5)
    got = _array(draws, (5,), "mask_rng(3, 1, name).random(5)")
    want = ref_draws(3, 1, NAME, (5,))
    if _close(got, want):
        return
    crc = zlib.crc32(NAME.encode("utf-8"))
    seeded = lambda key: np.random.default_rng(key).random(5)  # noqa: E731
    mistakes = [(seeded(3), "seeded by the seed alone, every model and tensor would drop the same entries"),
                (seeded([3, 1]), "the tensor's name is left out: every tensor of a model gets the same mask"),
                (seeded([3, crc]), "the model index is left out: both models drop the same entries"),
                (seeded([1, 3, crc]), "the seed and the model index are swapped")]
    raise Failed(f"mask_rng(3, 1, {NAME!r}).random(5) gave {np.round(got, 4).tolist()}; expected "
                 f"{np.round(want, 4).tolist()}" + _named(got, mistakes))


DROP = np.array([0.4, -0.2, 0.1, 0.8, -0.5, 0.3, -0.7, 0.6, 0.2, -0.1, 0.9, -0.3])


@CHECKS.check("drop_and_rescale keeps an entry where rng.random(shape) < density and divides it by density",
              needs=(_mask_rng,),
              hint="draw u = rng.random(delta.shape) once; keep where u < density (P = density = 1 − p), divide "
                   "the kept by density so that E[τ̃] = τ; the dropped are 0")
def _drop(lab):
    dare, density = lab.module(DARE), 0.7
    got = _array(dare.drop_and_rescale(DROP.copy(), density, dare.mask_rng(5, 0, NAME)), DROP.shape,
                 "`drop_and_rescale(τ, 0.7, mask_rng(5, 0, name))`, τ of shape (12,)")
    u = ref_draws(5, 0, NAME, DROP.shape)
    want = ref_drop(DROP, density, u)
    if _close(got, want):
        return
    keep = u < density
    mistakes = [(_kept(DROP, keep), "the kept entries were not divided by density: E[τ̃] = density · τ, a "
                 "merge 0.7 times too weak"),
                (_kept(DROP / 0.3, keep), "divided by p = 1 − density (0.3); the kept are divided by density"),
                (_kept(DROP / density, ~keep), "you kept the entries whose draw is ≥ density: those are the "
                 "dropped ones"),
                (_kept(DROP / density, u >= 1 - density), "you kept where u ≥ p = 0.3: the lab's draw keeps where "
                 "u < density"),
                (DROP / density, "nothing was dropped")]
    raise Failed(f"`drop_and_rescale(τ, 0.7, mask_rng(5, 0, {NAME!r}))` kept {np.flatnonzero(got).tolist()} as "
                 f"{np.round(got[got != 0], 4).tolist()}; expected {np.flatnonzero(want).tolist()} as "
                 f"{np.round(want[want != 0], 4).tolist()}" + _named(got, mistakes))


@CHECKS.check("dare_deltas drops model i's task vector with mask_rng(seed, i, name) and its own density",
              needs=(_drop,),
              hint="τ̃_i = drop_and_rescale(θ_i − θ_base, densities[i], mask_rng(seed, i, name)) for i = 0, 1, ..., "
                   "τ_i in float64 (linear.task_vectors): a new generator for each model, never one shared, whose "
                   "draws would depend on the models before")
def _deltas(lab):
    base, tensors = _models(2, 3, (2, 3))
    base[0, 0] = 2.0**-25  # with θ_i = 0.5 + 2⁻²⁴ there, τ_i = 0.5 + 2⁻²⁵ in float64 and 0.5 in float32
    for t in tensors:
        t[0, 0] = 0.5 + 2.0**-24
    densities, seed = [0.5, 0.8, 0.6], 11
    got = lab.module(DARE).dare_deltas(base.copy(), [t.copy() for t in tensors], densities, seed, NAME)
    if not isinstance(got, list | tuple) or len(got) != 3:
        raise Failed(f"dare_deltas for 3 models returned {type(got).__name__} of length "
                     f"{len(got) if hasattr(got, '__len__') else '?'}; expected a list of 3 arrays")
    got = [_array(g, base.shape, f"dare_deltas(...)[{i}]") for i, g in enumerate(got)]
    want = ref_deltas(base, tensors, densities, seed, NAME)
    wrong = [i for i in range(3) if not _close(got[i], want[i])]
    if not wrong:
        return
    taus = [t.astype(np.float64) - base for t in tensors]
    shared = np.random.default_rng([seed, 0, zlib.crc32(NAME.encode("utf-8"))])
    mistakes = {REVERSED: [-d for d in want],
                ": equal to float32's precision only: τ_i was taken in float32; take it in float64": want,
                ": one generator for all the models: model 1 drew the uniforms after model 0's":
                [ref_drop(t, p, shared.random(t.shape)) for t, p in zip(taus, densities, strict=True)],
                ": the models are numbered from 1; the first is model 0":
                [ref_drop(t, p, ref_draws(seed, i + 1, NAME, t.shape))
                 for i, (t, p) in enumerate(zip(taus, densities, strict=True))],
                ": every model was dropped with densities[0]":
                [ref_drop(t, densities[0], ref_draws(seed, i, NAME, t.shape)) for i, t in enumerate(taus)]}
    why = next((w for w, v in mistakes.items()
                if all(np.allclose(g, x, rtol=1e-6) for g, x in zip(got, v, strict=True))), "")
    raise Failed(f"3 models, densities {densities}, seed {seed}: model {wrong[0]}'s τ̃ differs{why}")


def _dare(lab, method: str, *extra) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    base, tensors = _models(3, 2)
    got = getattr(lab.module(DARE), method)(base.copy(), [t.copy() for t in tensors], [0.6, 1.5], [0.5, 0.9], 2,
                                            NAME, *extra)
    if isinstance(got, np.ndarray) and got.dtype != base.dtype:
        raise Failed(f"{method} returned {got.dtype} for a {base.dtype} base; cast the merge back to base.dtype")
    return _array(got, base.shape, f"{method}(base of shape (3, 4), 2 models, ...)"), base, \
        ref_deltas(base, tensors, [0.5, 0.9], 2, NAME)


@CHECKS.check("dare_linear = θ_base + λ Σ w_i τ̃_i (divided by Σ w_i when normalize)", needs=(_deltas,),
              hint="task arithmetic on the dropped and rescaled task vectors: base + lam · Σ_i w_i τ̃_i, "
                   "/ Σ_i w_i when normalize; cast back to base.dtype")
def _dare_linear(lab):
    weights, lam = np.array([0.6, 1.5]), 0.8
    for normalize in (False, True):
        got, base, deltas = _dare(lab, "dare_linear", lam, normalize)
        total = sum(w * d for w, d in zip(weights, deltas, strict=True))
        want = base + lam * total / (weights.sum() if normalize else 1.0)
        if not np.allclose(got, want, rtol=1e-6, atol=1e-7):
            raise Failed(f"weights {weights.tolist()}, densities [0.5, 0.9], λ {lam}, normalize {normalize}: off by "
                         f"up to {np.abs(got - want).max():.3g}")


@CHECKS.check("dare_ties = θ_base + λ · elect_and_mean of the τ̃_i: DARE's drop in place of TIES's trim",
              needs=(_deltas,),
              hint="base + lam · elect_and_mean(dare_deltas(...), weights): the drop replaces the trim (no trim "
                   "after it); cast back to base.dtype")
def _dare_ties(lab):
    weights, lam = [0.6, 1.5], 0.8
    got, base, deltas = _dare(lab, "dare_ties", lam)
    want = base + lam * ref_elect(deltas, weights)
    if np.allclose(got, want, rtol=1e-6, atol=1e-7):
        return
    mistakes = [(base + lam * ref_elect([ref_trim(d, p) for d, p in zip(deltas, [0.5, 0.9], strict=True)], weights),
                 ": the τ̃_i were trimmed as well; DARE's drop replaces the trim"),
                (base + lam * sum(w * d for w, d in zip(weights, deltas, strict=True)),
                 ": that is dare_linear: no sign election")]
    why = next((w for v, w in mistakes if np.allclose(got, v, rtol=1e-6, atol=1e-7)), "")
    raise Failed(f"weights {weights}, densities [0.5, 0.9], λ {lam}: off by up to {np.abs(got - want).max():.3g}"
                 + why)


# ------------------------------------------------------------------------------------------------ end to end

METHODS = {"ties": ((1.0, 1.0), (0.5, 0.5), 1.0), "dare_linear": ((1.0, 1.0), (0.5, 0.5), 1.0),
           "dare_ties": ((1.0, 1.0), (0.5, 0.5), 1.0)}  # weights, densities, λ: LAB's configs; DARE's seed 0
TENSES = {"present_val": "P", "subjunctive_val": "S"}


@cache
def _states() -> tuple[dict, dict, list[dict]]:
    """(model config, lab 01's state, [the present fine-tune's, the subjunctive one's]), LAB's files."""
    base, config, _ = load_model_file(course_file(f"{LAB}/base.safetensors"))
    return config, base, [load_model_file(course_file(f"{LAB}/{n}.safetensors"))[0] for n in ("present", "subjunctive")]


def _scores(lab, method: str) -> dict[str, dict[str, float]]:
    """The student's `method` merge of LAB's fine-tunes, tensor by tensor, scored here on the held-out verbs."""
    config, base, tuned = _states()
    weights, densities, lam = METHODS[method]
    module = lab.module(TIES if method == "ties" else DARE)
    merged = {}
    for name in tensor_order(base):
        args = (base[name].copy(), [s[name].copy() for s in tuned], list(weights), list(densities))
        got = getattr(module, method)(*args, lam) if method == "ties" else \
            getattr(module, method)(*args, 0, name, lam)
        merged[name] = _array(got, base[name].shape, f"{method} on tensor {name}").astype(np.float32)
    path = lab.scratch() / f"{method}.safetensors"
    save_model_file(path, merged, config)
    model, _ = load_model(str(path))
    tokenizer = CharTokenizer.load(course_file("data/processed/vocab.json"))
    records = load_records(course_file("data/processed/val.jsonl"))
    return {split: score_records(model, tokenizer, [r for r in records if r["tense"] == code])
            for split, code in TENSES.items()}


@CHECKS.check("your TIES, DARE-linear and DARE-TIES merges of experiment 23's fine-tunes score as the committed "
              "ones on the held-out present and subjunctive", needs=(_ties, _dare_linear, _dare_ties),
              hint=f"each merge is its function called on every tensor of {LAB}'s three models (the configs there); "
                   "a merge that scores otherwise differs from the items above on something they do not test")
def _end_to_end(lab) -> str:
    committed = json.loads(course_file(f"{LAB}/results.json").read_text(encoding="utf-8"))
    shown = []
    for method in METHODS:
        for split, scores in _scores(lab, method).items():
            want = committed[method][split]
            ppl, exact = scores["ppl"], scores["exact_match"]
            if not (abs(ppl - want["ppl"]) <= 2e-4 and abs(exact - want["exact_match"]) <= 1e-4):  # NaN fails
                raise Failed(f"{method}: on {split} your merge scores val PPL {ppl:.4f} and exact match "
                             f"{exact * 100:.1f} %; the committed merge {want['ppl']:.4f} and "
                             f"{want['exact_match'] * 100:.1f} % ({LAB}/results.json)")
            shown.append(f"{method} on {split}: your val PPL {ppl:.4f} and exact match {exact * 100:.1f} %; the "
                         f"table's {want['ppl']:.4f} and {want['exact_match'] * 100:.1f} %")
    return "\n".join(shown)
