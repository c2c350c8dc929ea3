"""The dtypes a GGUF is written in (`export --dtype`, `GGUF_DTYPES`), and the GGML type each tensor gets in one.

    f32     every tensor F32
    f16     every matrix F16
    q8_0    every matrix Q8_0 (F16 where its rows are not a multiple of 32 long)
    q4_0    llama.cpp's Q4_0: every matrix Q4_0, and llama.cpp's mixture below
    q5_k    llama.cpp's Q5_K_S: every matrix Q5_K, and the mixture
    q4_k_m  llama.cpp's Q4_K_M: every matrix Q4_K, and the mixture, with Q6_K for attn_v (attn_qkv) and ffn_down
            in the layers `use_more_bits` picks

Vectors (norms, biases) stay F32 in all, as llama.cpp keeps them. The mixture is llama.cpp's llama_tensor_get_type
(src/llama-quant.cpp, read at commit 007dbbf) for a file type without an importance matrix: the output matrix
(`output.weight`, or `token_embd.weight` when the head is tied to it) in Q6_K, or Q8_0 where its rows are not a
whole number of the file's blocks; `position_embd` not quantized (F16 here); and each type falling back, as
llama.cpp's do, to one whose blocks fit a row (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16:
formats/gguf_quants.py). SmolLM2's rows of 576 are no whole number of 256, so most of its Q4_K_M is Q5_0, as
llama.cpp writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from minitrain.common.registry import Registry
from minitrain.formats.gguf_quants import TENSOR_TYPES


@dataclass(frozen=True)
class GGUFDtype:
    """One `--dtype`: llama.cpp's `general.file_type` (its LlamaFileType), the GGML type of its matrices, whether
    llama.cpp's mixture applies (module docstring), and the type of Q4_K_M's more-bits layers (None: none)."""

    name: str
    file_type: int
    matrix: str
    mixed: bool = False
    more_bits: str | None = None


GGUF_DTYPES: Registry[GGUFDtype] = Registry("GGUF dtype", [
    GGUFDtype("f32", 0, "F32"),
    GGUFDtype("f16", 1, "F16"),
    GGUFDtype("q8_0", 7, "Q8_0"),
    GGUFDtype("q4_0", 2, "Q4_0", mixed=True),
    GGUFDtype("q5_k", 16, "Q5_K", mixed=True),
    GGUFDtype("q4_k_m", 15, "Q4_K", mixed=True, more_bits="Q6_K"),
])
MORE_BITS_TENSORS = (".attn_v.weight", ".attn_qkv.weight", ".ffn_down.weight")


def use_more_bits(layer: int, n_layer: int) -> bool:
    """llama.cpp's rule for Q4_K_M's Q6_K layers: the first and last eighth of the layers and every third between."""
    return layer < n_layer // 8 or layer >= 7 * n_layer // 8 or (layer - n_layer // 8) % 3 == 2


def tensor_type(dtype: GGUFDtype, name: str, shape: tuple[int, ...], n_layer: int, tied: bool) -> str:
    """The GGML type (formats/gguf_quants.py's TENSOR_TYPES name, before the fallback for its row length) of the
    tensor `name` of NumPy `shape` in a file of `dtype`; `tied`: token_embd is the output matrix (no output.weight,
    or GPT-2's copy of it)."""
    if len(shape) == 1 or dtype.name == "f32":
        return "F32"
    if not dtype.mixed:
        return dtype.matrix
    if name == "position_embd.weight":
        return "F16"
    if name == "output.weight" or (tied and name == "token_embd.weight"):
        return "Q8_0" if shape[-1] % TENSOR_TYPES[dtype.matrix].block else "Q6_K"
    if dtype.more_bits and name.endswith(MORE_BITS_TENSORS) and use_more_bits(int(name.split(".")[1]), n_layer):
        return dtype.more_bits
    return dtype.matrix
