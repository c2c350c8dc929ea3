"""Check minitrain's Llama against transformers: tiny random Llama, Qwen2 and Mistral models, the same numbers.

    python scripts/check_llama_parity.py [--torch-python PATH]

For each case transformers builds a tiny random model (Llama with GQA and an untied head; Llama with Llama 3's
rope_scaling over positions past original_max_position_embeddings; Qwen2 with q/k/v biases and GQA; Mistral
without a sliding window), runs it on a batch (one row left-padded), and generates 32 greedy tokens. This script
converts the state dict into minitrain's `Llama` (the *_proj and lm_head weights transposed: minitrain stores
[in, out]) and compares the per-token log-probabilities of the real tokens (target ≤ 1e-4 abs), the greedy tokens
(identical), and minitrain's KV-cache generation against its own full recomputation. Prints one line per case
and exits 1 on a miss.

torch and transformers are not minitrain dependencies, and minitrain needs numba, which the torch environment
may lack; so the transformers side runs in its own interpreter (`--torch-python`, default
/work/scratch-torch/bin/python), as `--hf-side DIR`, and hands its arrays over in .npz files. The conversion here
is deliberately minimal (hub/ holds the real loaders).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

BASE = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-6, initializer_range=0.3)
CASES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(tie_word_embeddings=False, rope_theta=10000.0)),
    "llama3-rope-scaling": ("LlamaConfig", "LlamaForCausalLM", dict(
        tie_word_embeddings=True, rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                   "original_max_position_embeddings": 16})),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(tie_word_embeddings=True, rope_theta=1000000.0)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(tie_word_embeddings=False, sliding_window=None,
                                                            head_dim=12, rope_theta=10000.0)),
}
T, PAD, NEW = 40, 5, 32  # sequence length, left padding of row 1, greedy tokens


# ------------------------------------------------------------------------------------- the transformers side
def hf_side(out: Path) -> None:
    import torch
    import transformers

    torch.manual_seed(0)
    ids = np.random.default_rng(0).integers(0, BASE["vocab_size"], (2, T))
    mask = np.ones((2, T), dtype=np.int64)
    mask[1, :PAD] = 0
    for name, (config_class, model_class, extra) in CASES.items():
        config = getattr(transformers, config_class)(**BASE, **extra)
        model = getattr(transformers, model_class)(config).eval()
        with torch.no_grad():
            logits = model(torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.double()
            log_probs = torch.log_softmax(logits, -1)[:, :-1].gather(-1, torch.tensor(ids[:, 1:, None]))[..., 0]
            greedy = model.generate(torch.tensor(ids[:1, :8]), max_new_tokens=NEW, do_sample=False,
                                    min_new_tokens=NEW, pad_token_id=0)[0, 8:]
        state = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
        np.savez(out / f"{name}-weights.npz", **state)
        np.savez(out / f"{name}-out.npz", ids=ids, mask=mask, log_probs=log_probs.numpy(), greedy=greedy.numpy())
        (out / f"{name}-config.json").write_text(json.dumps(config.to_dict(), default=str))


# ------------------------------------------------------------------------------------- the minitrain side
def llama_keys(config: dict) -> dict:
    """transformers' config -> minitrain's Llama keys (llama, qwen2, mistral)."""
    rope = config.get("rope_parameters") or {}
    scaling = rope if rope.get("rope_type") == "llama3" else None
    if config.get("sliding_window") is not None:
        raise SystemExit("a sliding window is not implemented")
    return dict(n_layer=config["num_hidden_layers"], n_head=config["num_attention_heads"],
                n_kv_head=config["num_key_value_heads"], d_model=config["hidden_size"],
                d_ff=config["intermediate_size"], vocab_size=config["vocab_size"],
                max_seq_len=config["max_position_embeddings"],
                rope_theta=float(rope.get("rope_theta", config.get("rope_theta", 10000.0))),
                rope_scaling=None if scaling is None else {k: v for k, v in scaling.items() if k != "rope_theta"},
                rms_norm_eps=config["rms_norm_eps"], tie_embeddings=config["tie_word_embeddings"],
                attention_bias=config.get("attention_bias", config["model_type"] == "qwen2"),
                head_dim=config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])


def converted(weights: dict, tied: bool) -> dict:
    """HF's [out, in] linear weights -> minitrain's [in, out]; a tied head is the embedding (not stored)."""
    state = {}
    for name, array in weights.items():
        if name == "lm_head.weight" and tied:
            continue
        state[name] = array.T.copy() if name.endswith("_proj.weight") or name == "lm_head.weight" else array
    return state


def check(folder: Path, name: str) -> list[str]:
    from minitrain.models.llama import Llama
    from minitrain.nn import inference

    keys = llama_keys(json.loads((folder / f"{name}-config.json").read_text()))
    model = Llama(**keys, rng=0)
    model.load_state_dict(converted(dict(np.load(folder / f"{name}-weights.npz")), keys["tie_embeddings"]))
    out = np.load(folder / f"{name}-out.npz")
    ids, mask = out["ids"], out["mask"].astype(bool)
    with inference(model):
        logits, _ = model(ids, attn_pad_mask=mask)
    z = logits.data.astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    log_probs = (z - np.log(np.exp(z).sum(-1, keepdims=True)))[:, :-1]
    log_probs = np.take_along_axis(log_probs, ids[:, 1:, None], -1)[..., 0]
    real = mask[:, :-1] & mask[:, 1:]  # scored positions: a real token predicting a real token
    worst = float(np.abs(log_probs - out["log_probs"])[real].max())
    greedy = model.generate(ids[0, :8].tolist(), NEW)[0]
    same_greedy = greedy == out["greedy"].tolist()
    sequence, full = ids[0, :8].tolist(), []
    with inference(model):  # the cache against minitrain's own full recomputation
        for _ in range(NEW):
            full.append(int(np.argmax(model(np.array([sequence]))[0].data[0, -1])))
            sequence.append(full[-1])
    print(f"{name:20s} max |Δ log p| {worst:.2e} over {int(real.sum())} tokens; greedy {NEW} tokens identical: "
          f"{same_greedy}; KV cache = full recomputation: {greedy == full}")
    problems = [] if worst <= 1e-4 else [f"{name}: log-probs differ by {worst:.2e}"]
    return problems + ([] if same_greedy and greedy == full else [f"{name}: greedy tokens differ"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch-python", default="/work/scratch-torch/bin/python")
    parser.add_argument("--hf-side", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hf_side:
        hf_side(Path(args.hf_side))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([args.torch_python, __file__, "--hf-side", tmp], check=True)
        problems = [p for name in CASES for p in check(Path(tmp), name)]
    for problem in problems:
        print("MISMATCH:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
