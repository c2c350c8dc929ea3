"""formats/gguf_quants.py's block quantizers and formats/gguf_dtypes.py's choice of types, against what does not
come from them: the `gguf` package's own Q4_0 quantizer (the same bytes), its dequantizers (tests/test_registries.py
reads every type back), the error of a uniform grid, and llama.cpp's Q4_K_M rule worked by hand for SmolLM2's 30
layers."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf.quants import dequantize, quantize

from minitrain.formats.gguf_dtypes import GGUF_DTYPES, tensor_type, use_more_bits
from minitrain.formats.gguf_quants import TENSOR_TYPES, fitting


def gaussian(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a, dtype=np.float64))))


def test_q4_0_writes_the_gguf_package_s_bytes():
    w = np.concatenate([gaussian((6, 64)), np.zeros((1, 64), np.float32), np.full((1, 64), -3, np.float32)])
    data, _ = TENSOR_TYPES["Q4_0"].encode(w)
    assert np.array_equal(data, quantize(w, gguf.GGMLQuantizationType.Q4_0))


def test_k_quants_beat_their_legacy_peers_on_a_gaussian_and_more_bits_err_less():
    """Q4_K's fitted affine grids (and 6-bit sub-block scales) against Q4_0's one symmetric scale per 32 values."""
    w = gaussian((16, 512), seed=1)
    error = {name: rms(w - TENSOR_TYPES[name].encode(w)[1]) for name in ("Q4_0", "Q4_K", "Q5_0", "Q5_K", "Q6_K")}
    assert error["Q4_K"] < 0.9 * error["Q4_0"] and error["Q5_K"] < error["Q5_0"]
    assert error["Q6_K"] < error["Q5_K"] < error["Q4_K"]


@pytest.mark.parametrize("name", ["Q4_0", "Q4_K", "Q5_K", "Q6_K"])
def test_zero_and_constant_blocks_come_back_exactly(name):
    w = np.zeros((3, 256), np.float32)
    w[1], w[2, :128] = 0.5, -2.0  # a constant row; half a row constant, the rest zero
    data, values = TENSOR_TYPES[name].encode(w)
    back = dequantize(data, gguf.GGMLQuantizationType[name]).reshape(w.shape)
    assert np.array_equal(back, values) and not values[0].any()
    assert float(np.abs(values - w).max()) <= 1e-3  # a K-quant's f16 d rounds 0.5/(15·63): 2⁻¹¹ of 2 at most


def test_a_row_its_blocks_do_not_fit_falls_back_as_llama_cpp_does():
    assert [fitting("Q4_K", n).name for n in (512, 576, 48)] == ["Q4_K", "Q5_0", "F16"]
    assert [fitting("Q6_K", n).name for n in (1536, 576)] == ["Q6_K", "Q8_0"]
    assert fitting("Q5_K", 576).name == "Q5_1" and fitting("Q4_0", 40).name == "F16"


def test_use_more_bits_is_llama_cpp_s_rule_for_30_layers():
    # i < 30/8 = 3, i >= 7*30/8 = 26, or (i - 3) % 3 == 2, worked by hand.
    assert [i for i in range(30) if use_more_bits(i, 30)] == [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]


def smollm2_types(dtype: str) -> dict[str, str]:
    """The stored type of each of SmolLM2-135M's tensors (30 layers, d 576, d_ff 1536, tied head) in `dtype`."""
    shapes = {"token_embd.weight": (49152, 576), "output_norm.weight": (576,)}
    for i in range(30):
        shapes |= {f"blk.{i}.attn_norm.weight": (576,), f"blk.{i}.ffn_norm.weight": (576,),
                   f"blk.{i}.attn_q.weight": (576, 576), f"blk.{i}.attn_k.weight": (192, 576),
                   f"blk.{i}.attn_v.weight": (192, 576),
                   f"blk.{i}.attn_output.weight": (576, 576), f"blk.{i}.ffn_gate.weight": (1536, 576),
                   f"blk.{i}.ffn_up.weight": (1536, 576), f"blk.{i}.ffn_down.weight": (576, 1536)}
    return {n: fitting(tensor_type(GGUF_DTYPES[dtype], n, s, 30, tied=True), s[-1]).name for n, s in shapes.items()}


def test_smollm2_in_q4_k_m_is_llama_cpp_s_mixture():
    """Rows of 576 are no whole number of 256: Q4_K falls back to Q5_0, Q6_K to Q8_0; the tied embedding is the
    output matrix (Q8_0, its rows not a multiple of 256); ffn_down's rows of 1536 keep Q4_K / Q6_K."""
    types = smollm2_types("q4_k_m")
    more = [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]
    assert types["token_embd.weight"] == "Q8_0" and types["output_norm.weight"] == "F32"
    assert all(types[f"blk.{i}.ffn_down.weight"] == ("Q6_K" if i in more else "Q4_K") for i in range(30))
    assert all(types[f"blk.{i}.attn_v.weight"] == ("Q8_0" if i in more else "Q5_0") for i in range(30))
    assert {types[f"blk.{i}.{t}.weight"] for i in range(30) for t in ("attn_q", "attn_k", "ffn_up")} == {"Q5_0"}
    counts = {kind: list(types.values()).count(kind) for kind in set(types.values())}
    assert counts == {"F32": 61, "Q8_0": 15, "Q5_0": 166, "Q4_K": 16, "Q6_K": 14}


def test_q4_0_and_q5_k_keep_the_output_matrix_in_more_bits():
    assert smollm2_types("q4_0")["token_embd.weight"] == "Q8_0"  # Q6_K, which 576 falls back from
    types = smollm2_types("q5_k")
    assert types["blk.0.ffn_down.weight"] == "Q5_K" and types["blk.0.attn_q.weight"] == "Q5_1"
    assert tensor_type(GGUF_DTYPES["q4_0"], "output.weight", (64, 512), 2, tied=False) == "Q6_K"
    assert tensor_type(GGUF_DTYPES["q4_k_m"], "token_embd.weight", (64, 512), 2, tied=False) == "Q4_K"
    assert tensor_type(GGUF_DTYPES["q4_k_m"], "position_embd.weight", (64, 512), 2, tied=False) == "F16"
    assert tensor_type(GGUF_DTYPES["q8_0"], "output.weight", (64, 512), 2, tied=False) == "Q8_0"
