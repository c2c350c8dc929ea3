"""Check that a minitrain Gemma 2 / Gemma 3 exported as a Hugging Face folder loads in transformers with equal logits.

    PYTHONPATH=. .venv/bin/python scripts/check_gemma_export.py export DIR     (minitrain's environment)
    /path/to/torch-env/bin/python scripts/check_gemma_export.py compare DIR    (one with torch and transformers)

`export` builds two Gemmas from scratch (random weights, norms too, scaled so the logits are far from zero): a
Gemma 2 with both soft-caps and a Gemma 3 with q/k norms, a local RoPE base and linear scaling on its global layers,
both with a window of 3 over 12 tokens, and writes each with `export_hf_folder` (config.json, model.safetensors,
the tokenizer of tests/data/gemma) into DIR/<kind>, with minitrain's logits on fixed ids (DIR/<kind>/minitrain.npz).
`compare` loads each folder with AutoModelForCausalLM and prints the largest absolute logit difference.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KEYS = dict(type="gemma", n_layer=4, n_head=4, n_kv_head=2, d_model=32, d_ff=40, vocab_size=48, max_seq_len=64,
            head_dim=12, sliding_window=3, query_pre_attn_scalar=10.0,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"])
VARIANTS = {"gemma2": dict(qk_norm=False, attn_logit_softcapping=3.0, final_logit_softcapping=2.5),
            "gemma3": dict(rope_theta=1000.0, rope_local_theta=30.0, rope_scaling={"rope_type": "linear",
                                                                                   "factor": 2.0})}
IDS = np.random.default_rng(0).integers(3, 48, (2, 12))


def export(out: Path) -> None:
    from minitrain.autograd.tensor import no_grad
    from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
    from minitrain.hub.pretrained import export_hf_folder
    from minitrain.models.registry import build_model

    tokenizer = PretrainedTokenizer.from_folder(ROOT / "tests/data/gemma/gemma3")
    for kind, keys in VARIANTS.items():
        model = build_model({**KEYS, **keys}, rng=1)
        rng = np.random.default_rng(2)
        model.load_state_dict({n: rng.normal(0, 0.3, p.shape).astype(np.float32)
                               for n, p in model.state_dict().items()})
        with no_grad():
            logits = model(IDS)[0].data
        folder = export_hf_folder(model.config, model.state_dict(), tokenizer, out / kind)
        np.savez(folder / "minitrain.npz", ids=IDS, logits=logits)
        print(kind, "exported to", folder)


def compare(out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    for kind in VARIANTS:
        saved = np.load(out / kind / "minitrain.npz")
        model = AutoModelForCausalLM.from_pretrained(out / kind, attn_implementation="eager").eval()
        with torch.no_grad():
            logits = model(torch.tensor(saved["ids"])).logits.numpy()
        print(f"{kind}: {type(model).__name__}, max |logit difference| {np.abs(logits - saved['logits']).max():.3g} "
              f"(logits up to {np.abs(logits).max():.3g})")


if __name__ == "__main__":
    {"export": export, "compare": compare}[sys.argv[1]](Path(sys.argv[2]))
