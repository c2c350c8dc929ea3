"""Check minitrain's Gemma past its sliding window on a real GGUF: per-token log-probs against transformers.

    PYTHONPATH=. .venv/bin/python scripts/check_gemma_window.py [GGUF] [--torch-python PATH] [--tokens N]

GGUF defaults to the Gemma 3 270M Q4_K_M file, whose local layers see 512 positions: N (default 640) fixed ids
take the sequence past it, so the local layers' window decides the last positions. Both sides score the last 64
positions only (the head over 262,144 tokens is big): minitrain reads the file with `load_pretrained_base`; the
other process (torch + transformers + gguf, never a minitrain dependency) loads it with
`AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)`. Prints the largest |difference| (target 1e-4) and
exits 1 above it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

DEFAULT_GGUF = "/tmp/gemma/gemma-3-270m-q4_k_m.gguf"
LAST = 64


def ids_of(count: int, vocab: int) -> np.ndarray:
    ids = np.random.default_rng(0).integers(3, min(vocab, 20000), count)
    ids[0] = 2  # BOS
    return ids


def last_logprobs(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """log p(ids[t+1] | ..t) for the LAST positions whose logits (LAST + 1, V) are given."""
    z = logits.astype(np.float64)
    z -= z.max(-1, keepdims=True)
    z -= np.log(np.exp(z).sum(-1, keepdims=True))
    return z[np.arange(LAST), ids[-LAST:]]


def transformers_side(path: str, count: int, out: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    gguf = Path(path)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
    ids = ids_of(count, model.config.vocab_size)
    with torch.no_grad():
        hidden = model.model(torch.tensor(ids[None])).last_hidden_state[:, -LAST - 1 : -1]
        logits = model.lm_head(hidden)
        cap = model.config.final_logit_softcapping
        logits = torch.tanh(logits / cap) * cap if cap else logits
    np.save(out, last_logprobs(logits[0].numpy(), ids))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gguf", nargs="?", default=DEFAULT_GGUF)
    parser.add_argument("--torch-python", default="/tmp/tv/bin/python")
    parser.add_argument("--tokens", type=int, default=640)
    args = parser.parse_args()
    from minitrain.autograd import functional as F
    from minitrain.autograd.tensor import no_grad
    from minitrain.hub.pretrained import load_pretrained_base
    from minitrain.models.registry import build_model
    from minitrain.nn.rotary import rope_positions

    config, state, _, _ = load_pretrained_base(args.gguf)
    model = build_model(config)
    model.load_state_dict(state)
    del state
    ids = ids_of(args.tokens, config["vocab_size"])
    with no_grad():
        hidden = model.decode(ids[None], rope_positions(1, len(ids)), F.attention_mask(len(ids), len(ids)))
        ours = last_logprobs(model.head(hidden[:, -LAST - 1 : -1]).data[0], ids)
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "theirs.npy")
        subprocess.run([args.torch_python, __file__, "--transformers-side", args.gguf, str(args.tokens), out],
                       check=True)
        theirs = np.load(out)
    gap = float(np.abs(ours - theirs).max())
    print(f"{args.tokens} tokens (window {config.get('sliding_window')}, layers {config.get('layer_types')[:6]}...): "
          f"last {LAST} log-probs, max |difference| {gap:.3g}; mean log-prob {ours.mean():.4f} vs {theirs.mean():.4f}")
    sys.exit(0 if gap < 1e-4 else 1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--transformers-side"]:
        transformers_side(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        main()
