"""minitrain's Q4_0 / Q5_K / Q4_K_M GGUFs against llama.cpp's own (docs/gguf.md, "In llama.cpp: the K-quants").

    FOLDER holds smol-{f16,q8_0,q4_0,q5_k,q4_k_m}.gguf (minitrain's exports of SmolLM2),
    fromf16-{q4_0,q5_k,q4_k_m}.gguf (minitrain's exports of smol-f16.gguf),
    and ids.json (minitrain's ids of scripts/fixtures/eval-text.txt, EOS last).

    LLAMA_PYTHON scripts/check_gguf_quants_llama_cpp.py llama FOLDER    llama-quantize smol-f16.gguf to
        llama-{q4_0,q5_k,q4_k_m}.gguf, then for each file the perplexity of ids[1:] (one window, KV cache f32) and a
        greedy completion of "The capital of France is"
    python scripts/check_gguf_quants_llama_cpp.py compare FOLDER       (minitrain's venv) each fromf16 file against
        llama.cpp's: tensor types, byte-identical tensors and blocks, the largest value difference

llama-cpp-python is no minitrain dependency and this is no test: build it in a scratch environment with
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" pip install llama-cpp-python.
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np

FILE_TYPES = {"q4_0": 2, "q4_k_m": 15, "q5_k": 16}  # llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_0, _Q4_K_M, _Q5_K_S


def llama(folder: str) -> None:
    import llama_cpp

    for name, ftype in FILE_TYPES.items():
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype, params.nthread = ftype, 2
        assert llama_cpp.llama_model_quantize(f"{folder}/smol-f16.gguf".encode(),
                                              f"{folder}/llama-{name}.gguf".encode(), params) == 0
    with open(f"{folder}/ids.json") as f:
        ids = json.load(f)
    files = [f"smol-{d}" for d in ("f16", "q8_0", "q4_k_m", "q5_k", "q4_0")] + [f"llama-{d}" for d in FILE_TYPES]
    for name in files:
        llm = llama_cpp.Llama(model_path=f"{folder}/{name}.gguf", n_ctx=1024, logits_all=True, verbose=False,
                              n_threads=2, seed=0, type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32,
                              flash_attn=False)
        llm.eval(ids)
        logits = np.array(llm.scores[:len(ids)], dtype=np.float64)
        top = logits.max(-1)
        nll = (np.log(np.exp(logits - top[:, None]).sum(-1)) + top)[:-1] - logits[np.arange(len(ids) - 1), ids[1:]]
        llm.reset()
        text = llm.create_completion("The capital of France is", max_tokens=8, temperature=0.0)["choices"][0]["text"]
        print(f"{name:14} {len(ids) - 1} tokens  loss {nll.mean():.4f}  ppl {math.exp(nll.mean()):.2f}  {text!r}")


def compare(folder: str) -> None:
    import gguf
    from gguf.quants import dequantize

    for name in FILE_TYPES:
        ours, theirs = gguf.GGUFReader(f"{folder}/fromf16-{name}.gguf"), gguf.GGUFReader(f"{folder}/llama-{name}.gguf")
        by_name = {t.name: t for t in theirs.tensors}
        other_type, same, blocks, worst = [], 0, {}, 0.0
        for t in ours.tensors:
            u = by_name[t.name]
            if t.tensor_type != u.tensor_type:
                other_type.append(f"{t.name} {t.tensor_type.name} vs {u.tensor_type.name}")
                continue
            a, b = np.asarray(t.data), np.asarray(u.data)
            same += a.tobytes() == b.tobytes()
            if t.tensor_type.name not in ("F32", "F16"):
                size = gguf.GGML_QUANT_SIZES[t.tensor_type][1]
                blocks.setdefault(t.tensor_type.name, []).append((a.reshape(-1, size) == b.reshape(-1, size)).all(-1))
                va, vb = dequantize(a, t.tensor_type), dequantize(b, u.tensor_type)
                worst = max(worst, float(np.abs(va - vb).max() / np.abs(vb).max()))
        share = {kind: f"{np.concatenate(v).mean():.2%}" for kind, v in blocks.items()}
        print(f"{name}: {len(ours.tensors)} tensors, {len(other_type)} of another type {other_type[:3]}, {same} "
              f"byte-identical; blocks identical {share}; max |Δvalue| {worst:.3g} of the tensor's max |value|")


if __name__ == "__main__":
    {"llama": llama, "compare": compare}[sys.argv[1]](sys.argv[2])
