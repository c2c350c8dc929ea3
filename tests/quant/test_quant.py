"""Quantization (minitrain/quant/): packing, the NF4/FP4 code books, the error bound each scheme guarantees by
construction, the 4-bit linear op and fake quantization (gradients by central differences in float64), and the
quantized model file."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from minitrain import gradcheck
from minitrain.autograd.tensor import Tensor
from minitrain.models.minigpt import MiniGPT
from minitrain.nn import Linear, inference
from minitrain.nn.quantized import Linear4Bit
from minitrain.pruning.scores import calibration_grams
from minitrain.quant import affine, blockwise, grid
from minitrain.quant.bit_packing import pack_bits, unpack_bits
from minitrain.quant.qfile import KIND, quantized_tensors
from minitrain.quant.scheme import BITS, GRANULARITIES, SCHEMES, Scheme
from minitrain.quant.tape_ops import fake_quantize, linear_4bit
from minitrain.runs.model_files import load_model_file, save_model_file
from minitrain.training.ptq import quantizable_paths, quantize_weights
from minitrain.training.qat import attach_fake_quantizers

# bitsandbytes' NF4 table (bitsandbytes/functional.py, get_4bit_type("nf4")), as published with QLoRA.
BNB_NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
           -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
           0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023,
           1.0]  # fmt: skip


def weights(shape=(64, 96), seed=0, std=0.02) -> np.ndarray:
    w = np.random.default_rng(seed).normal(0, std, shape).astype(np.float32)
    w[3, 5] = 8 * std  # an outlier, as real weights have
    return w


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_packing_round_trips_and_takes_bits_per_value(bits):
    codes = np.random.default_rng(bits).integers(0, 2**bits, 1001).astype(np.uint8)
    packed = pack_bits(codes, bits)
    assert packed.dtype == np.uint8 and packed.size == -(-1001 * bits // 8)
    assert np.array_equal(unpack_bits(packed, bits, 1001), codes)
    if bits == 4:
        assert pack_bits(np.array([0xA, 0x3]), 4).tolist() == [0xA3]  # the first code in the high nibble
    with pytest.raises(ValueError, match="outside the"):
        pack_bits(np.array([2**bits]), bits)


def test_nf4_code_book_is_the_qlora_construction_and_bitsandbytes_table():
    book = blockwise.nf4_code_book()
    np.testing.assert_allclose(book, BNB_NF4, atol=2e-7)
    # Recomputed here from normal quantiles: 8 positive, 7 negative, an exact zero, scaled to [-1, 1].
    ppf, delta = NormalDist().inv_cdf, blockwise.NF4_OFFSET
    positive = [ppf(delta - i * (delta - 0.5) / 8) for i in range(8)]
    negative = [-ppf(delta - i * (delta - 0.5) / 7) for i in range(7)]
    expected = np.sort([*positive, 0.0, *negative]) / max(positive)
    np.testing.assert_allclose(book, expected, atol=1e-7)
    assert book[7] == 0.0 and book[0] == -1.0 and book[-1] == 1.0 and len(np.unique(book)) == 16


def test_fp4_code_book_is_e2m1_scaled_to_one():
    book = blockwise.fp4_code_book()
    assert sorted(set((book * 6).tolist())) == [-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert len(book) == 16


@pytest.mark.parametrize("quant_type", blockwise.QUANT_TYPES)
@pytest.mark.parametrize("double_quantize", [False, True])
def test_4bit_blocks_stay_within_half_a_code_gap(quant_type, double_quantize):
    w = weights((64, 100))  # 6400 values: 100 blocks, the last one padded
    q = blockwise.quantize_4bit(w, quant_type, double_quantize)
    restored = q.dequantize()
    assert restored.shape == w.shape and restored.dtype == np.float32
    book = blockwise.CODE_BOOKS[quant_type]
    gap = np.diff(book).max()
    padded = np.zeros(q.block_absmax().size * 64, dtype=np.float32)
    padded[: w.size] = w.reshape(-1)
    true_absmax = np.abs(padded.reshape(-1, 64)).max(axis=1)
    stored = q.block_absmax()
    bound = stored * gap / 2 + np.abs(true_absmax - stored)  # a value may exceed a double-quantized absmax
    error = np.abs(padded - np.pad(restored.reshape(-1), (0, padded.size - w.size))).reshape(-1, 64)
    assert (error <= bound[:, None] * (1 + 1e-6) + 1e-12).all()
    if not double_quantize:
        np.testing.assert_array_equal(stored, true_absmax)
        assert q.nbytes == w.size // 2 + 4 * 100
    else:
        assert np.abs(true_absmax - stored).max() <= (np.abs(true_absmax - true_absmax.mean()).max() / 127) / 2 + 1e-9
        assert q.nbytes == w.size // 2 + 100 + 4 + 4  # int8 absmax codes, one float32 scale, the mean


def test_an_all_zero_block_stays_zero():
    w = np.zeros((64, 2), dtype=np.float32)
    w[:, 1] = 0.5
    np.testing.assert_array_equal(blockwise.quantize_4bit(w).dequantize(), w)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_minmax_quantization_is_off_by_at_most_half_a_step(bits, scheme, granularity):
    s = Scheme(bits, scheme, granularity, group_size=16)
    w = weights()
    q = affine.quantize(w, s)
    assert q.codes.dtype == np.uint8 and q.codes.max() <= s.qmax - s.qmin
    restored = affine.dequantize(q, s, w.shape)
    error = s.units(np.abs(w - restored))
    assert (error <= q.scale[:, None, :] / 2 * (1 + 1e-6)).all()
    expected_units = {"per_tensor": (1, 1), "per_channel": (1, 96), "per_group": (4, 96)}[granularity]
    assert q.scale.shape == expected_units
    if scheme == "symmetric":
        assert (q.zero_point == 0).all()
        np.testing.assert_array_equal(affine.dequantize(affine.quantize(-w, s), s, w.shape), -restored)


def test_zero_is_exact_and_finer_units_err_less():
    w = weights()
    w[10, :] = 0.0
    errors = {}
    for granularity in GRANULARITIES:
        s = Scheme(4, "asymmetric", granularity, group_size=16)
        restored = affine.dequantize(affine.quantize(w, s), s, w.shape)
        assert (restored[10] == 0).all()
        errors[granularity] = float(np.square(w - restored).mean())
    assert errors["per_group"] < errors["per_channel"] < errors["per_tensor"]


def test_clipping_methods_trade_outliers_for_a_finer_grid():
    w = weights(std=0.02)
    minmax, mse = (Scheme(4, "symmetric", "per_tensor", method=m) for m in ("minmax", "mse"))
    err = {s.method: float(np.square(w - affine.dequantize(affine.quantize(w, s), s, w.shape)).mean())
           for s in (minmax, mse)}
    assert err["mse"] < err["minmax"]
    lo, hi = affine.unit_ranges(minmax.units(w), Scheme(4, "symmetric", "per_tensor", method="percentile",
                                                        percentile=99.0))
    assert hi.item() < w.max() and lo.item() > w.min()


def test_mse_with_calibration_inputs_minimises_the_output_error():
    rng = np.random.default_rng(4)
    w = weights((32, 8))
    x = rng.normal(0, 1, (400, 32)) * np.linspace(0.1, 3, 32)  # inputs of very unequal sizes
    gram = x.T @ x
    s = Scheme(2, "symmetric", "per_channel", method="mse")
    plain = affine.dequantize(affine.quantize(w, s), s, w.shape)
    weighted = affine.dequantize(affine.quantize(w, s, gram), s, w.shape)
    assert np.square(x @ (w - weighted)).sum() <= np.square(x @ (w - plain)).sum()


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_fake_quantize_forward_is_quantize_dequantize_and_backward_is_the_clamps_gradient(granularity):
    s = Scheme(4, "asymmetric", granularity, group_size=4, method="percentile", percentile=90.0)
    w = Tensor(weights((8, 6), std=1.0).astype(np.float64), requires_grad=True, dtype=np.float64)
    y = fake_quantize(w, s)
    units = s.units(w.data)
    scale, zero = grid.scale_and_zero(*affine.unit_ranges(units, s), s)
    expected = grid.dequantize_units(grid.quantize_units(units, scale, zero, s), scale, zero, s)
    np.testing.assert_allclose(y.data, expected.reshape(w.shape), rtol=1e-6)
    # The straight-through estimator is the exact gradient of clamp(w, lo, hi): central differences of the clamp,
    # at a point nudged off the range's ends, agree with fake_quantize's backward.
    lo = ((s.qmin - zero) * scale)[:, None, :] * np.ones_like(units)
    hi = ((s.qmax - zero) * scale)[:, None, :] * np.ones_like(units)
    lo, hi = lo.reshape(w.shape), hi.reshape(w.shape)
    assert np.minimum(np.abs(w.data - lo), np.abs(w.data - hi)).min() > 1e-4
    g = np.random.default_rng(1).standard_normal(w.shape)
    (fake_quantize(w, s) * Tensor(g, dtype=np.float64)).sum().backward()
    h = 1e-6
    numeric = g * (np.clip(w.data + h, lo, hi) - np.clip(w.data - h, lo, hi)) / (2 * h)
    np.testing.assert_allclose(w.grad, numeric, rtol=1e-6, atol=1e-9)
    assert (w.grad == 0).any() and (w.grad != 0).any()  # some values were clipped, most pass through


@pytest.mark.parametrize("bias", [True, False])
def test_linear_4bit_gradcheck_and_agreement_with_the_dequantized_weight(bias):
    base = Linear(64, 5, bias=bias, rng=np.random.default_rng(0), dtype=np.float64)
    if bias:
        base.bias.data[...] = np.random.default_rng(1).normal(0, 0.5, 5)
    layer = Linear4Bit(base, "nf4", double_quantize=True)
    x = Tensor(np.random.default_rng(2).standard_normal((2, 3, 64)), requires_grad=True, dtype=np.float64)
    inputs = [x] + ([layer.bias] if bias else [])
    assert gradcheck(lambda *_: linear_4bit(x, layer.weight, layer.bias), inputs)
    expected = x.data @ layer.weight.dequantize() + (layer.bias.data if bias else 0)
    np.testing.assert_allclose(layer(x).data, expected, rtol=1e-12)
    assert not any(p is layer.weight for p in layer.parameters())  # the 4-bit weight is no parameter


def test_a_quantized_model_file_loads_back_as_its_dequantized_weights(tmp_path):
    model = MiniGPT(2, 4, 64, 256, 64, 32, rng=0)
    paths, unmatched = quantizable_paths(model, exclude=["mlp.c_proj", "lm_head"])
    assert unmatched == ["lm_head"] and len(paths) == 6 and not any(p.endswith("mlp.c_proj") for p in paths)
    s = Scheme(4, "asymmetric", "per_group", group_size=32)
    quantized = quantize_weights(model, s, paths)
    tensors, shapes = quantized_tensors(model.state_dict(), quantized, s)
    assert tensors["transformer.h.0.attn.c_attn.weight.codes"].nbytes == 64 * 192 // 2
    assert tensors["transformer.h.0.attn.c_attn.weight.scale"].shape == (2, 192)
    assert tensors["transformer.h.0.attn.c_attn.weight.zero_point"].dtype == np.uint8
    path = tmp_path / "q.safetensors"
    save_model_file(path, tensors, model.config, {"quantization": {"bits": 4, "scheme": "asymmetric",
                    "granularity": "per_group", "group_size": 32}, "quantized": shapes}, kind=KIND)  # fmt: skip
    state, config, meta = load_model_file(path)
    assert meta["kind"] == KIND and config == model.config and set(state) == set(model.state_dict())
    for p in paths:
        np.testing.assert_array_equal(state[f"{p}.weight"], affine.dequantize(quantized[p], s, shapes[f"{p}.weight"]))
    np.testing.assert_array_equal(state["transformer.h.0.mlp.c_proj.weight"],
                                  model.state_dict()["transformer.h.0.mlp.c_proj.weight"])


def test_calibration_grams_are_the_inputs_gram_matrices_and_qat_computes_with_rounded_weights():
    model = MiniGPT(1, 2, 8, 16, 10, 6, rng=0)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 10, (3, 6))
    mask = np.ones((3, 6), dtype=bool)
    mask[0, 4:] = False
    batch = type("Batch", (), {"input": idx, "attn_pad_mask": mask})
    grams = calibration_grams(model, [batch], ["transformer.h.0.attn.c_attn"])
    block = model.transformer.h[0]
    with inference(model):
        x = model.transformer.wte(idx) + model.transformer.wpe(np.arange(6))
        rows = block.ln_1(x).data[mask].astype(np.float64)
    np.testing.assert_allclose(grams["transformer.h.0.attn.c_attn"], rows.T @ rows, rtol=1e-6)
    assert "forward" not in block.attn.c_attn.__dict__  # the hook is gone
    s = Scheme(2, "symmetric", "per_channel")
    attach_fake_quantizers(model, s, ["transformer.h.0.mlp.c_proj"])
    layer = model.transformer.h[0].mlp.c_proj
    h = Tensor(rng.standard_normal((2, 16)), dtype=np.float32)
    rounded = affine.dequantize(affine.quantize(layer.weight.data, s), s, layer.weight.shape)
    np.testing.assert_allclose(layer(h).data, h.data @ rounded + layer.bias.data, rtol=1e-5, atol=1e-7)
