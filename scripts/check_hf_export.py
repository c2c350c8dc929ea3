"""Check that an export loads in `transformers` and computes the same logits as minitrain.

    python scripts/check_hf_export.py [SOURCE] [--family minigpt|llama|gemma3|gemma2] [--vocab PATH] [--out DIR]

SOURCE is a run folder or a model file (default: a randomly initialised model of `--family`, lab 01's size, over the
verb corpus's vocabulary data/processed/vocab.json, with its weights scaled up so the logits are far from zero).
The script exports it, loads the folder with `AutoModelForCausalLM.from_pretrained` (GPT2LMHeadModel for a MiniGPT,
LlamaForCausalLM, Gemma3ForCausalLM, Gemma2ForCausalLM for one trained from scratch) and
`AutoTokenizer.from_pretrained`, runs both models on the same batch (random ids, then real prompts with right
padding), prints the largest absolute logit difference, and checks that the tokenizer gives the character model's ids
([BOS] + characters) on every record of the verb corpus (data/processed/*.jsonl) when the vocabulary covers it.

A LoRA run exports an adapter instead; scripts/check_peft_adapter.py checks that one with PEFT.

Needs torch and transformers, which are not minitrain dependencies: run it from a scratch environment, e.g.
    python3 -m venv /tmp/hfcheck
    /tmp/hfcheck/bin/pip install torch transformers numba pydantic pyyaml tqdm matplotlib
    PYTHONPATH=. /tmp/hfcheck/bin/python scripts/check_hf_export.py runs/lab01
(or a torch environment without numba, beside minitrain's own: PYTHONPATH=.:.venv/lib/python3.11/site-packages
NUMBA_DISABLE_JIT=1 /tmp/tv/bin/python scripts/check_hf_export.py --family gemma3)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from minitrain.autograd.tensor import no_grad
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.export_hf import export_model
from minitrain.hub.sources import load_model
from minitrain.models.registry import build_model
from minitrain.runs.model_files import save_model_file

CORPUS = Path(__file__).resolve().parents[1] / "data" / "processed"
LAB_MODEL = {"n_layer": 2, "n_head": 4, "d_model": 64, "d_ff": 256, "max_seq_len": 32}
FAMILIES = {"minigpt": {}, "llama": {"type": "llama", "n_kv_head": 2},
            "gemma3": {"type": "gemma", "n_kv_head": 1, "head_dim": 32, "sliding_window": 8, "rope_local_theta": 100.0,
                       "layer_types": ["sliding_attention", "full_attention"]},
            "gemma2": {"type": "gemma", "n_kv_head": 2, "qk_norm": False, "attn_logit_softcapping": 50.0,
                       "final_logit_softcapping": 30.0, "sliding_window": 8,
                       "layer_types": ["sliding_attention", "full_attention"]}}
PROMPTS = ["comer|R1|comí", "caminar|P1|camino", "vivir|S6|vivan", "ser|I3|era"]


def random_source(folder: Path, family: str) -> tuple[Path, Path]:
    """A model file of `family` with large random weights over the verb corpus's vocabulary."""
    vocab = CORPUS / "vocab.json"
    config = {**LAB_MODEL, **FAMILIES[family], "vocab_size": CharTokenizer.load(vocab).vocab_size}
    model = build_model(config, rng=0)
    rng = np.random.default_rng(1)
    model.load_state_dict({n: a + rng.normal(0, 0.3, a.shape).astype(np.float32)
                           for n, a in model.state_dict().items()})
    path = folder / "model.safetensors"
    save_model_file(path, model.state_dict(), model.config)
    return path, vocab


def corpus_ids_agree(hf_tok, ours: CharTokenizer) -> tuple[int, int]:
    """(records whose ids agree, records) over the verb corpus; (0, 0) when the vocabulary does not cover it."""
    texts = [json.loads(line)["text"] for path in sorted(CORPUS.glob("*.jsonl"))
             for line in path.read_text("utf-8").splitlines() if line.strip()]
    if not set("".join(texts)) <= set(ours.chars):
        return 0, 0
    got = hf_tok(texts).input_ids
    return sum(g == [ours.bos_id, *ours.encode(t)] for g, t in zip(got, texts, strict=True)), len(texts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", help="run folder or model file (default: random lab-size model)")
    parser.add_argument("--family", choices=FAMILIES, default="minigpt", help="the random model's family")
    parser.add_argument("--vocab", help="vocab.json, if the source does not record it")
    parser.add_argument("--out", help="export folder to keep (default: a temporary one)")
    args = parser.parse_args()
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        print(f"needs torch and transformers ({e}); see the docstring for a scratch environment", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory() as tmp:
        source, vocab = (args.source, args.vocab) if args.source else random_source(Path(tmp), args.family)
        out = Path(args.out or Path(tmp) / "export")
        export_model(source, out, vocab_path=vocab)

        hf, loading = AutoModelForCausalLM.from_pretrained(out, output_loading_info=True, dtype=torch.float32)
        hf.eval()
        untouched = {k: v for k, v in loading.items() if v and k != "error_msgs"}
        assert not untouched and not loading.get("error_msgs"), f"from_pretrained reported {loading}"
        tied = hf.get_output_embeddings().weight.data_ptr() == hf.get_input_embeddings().weight.data_ptr()
        assert tied == hf.config.tie_word_embeddings, "lm_head tying differs from the config"
        hf_tok = AutoTokenizer.from_pretrained(out)
        ours_tok = CharTokenizer.load(out / "vocab.json")
        model, _ = load_model(str(source))  # the source itself, as minitrain computes it
        model.eval()
        cfg = model.config

        rng = np.random.default_rng(0)
        idx = rng.integers(0, cfg["vocab_size"], size=(4, cfg["max_seq_len"]))
        with no_grad():
            ours = model(idx)[0].data
        with torch.no_grad():
            theirs = hf(torch.from_numpy(idx)).logits.numpy()
        diff_random = float(np.abs(ours - theirs).max())

        # Real prompts, right-padded, through both tokenizers: the same ids, the same logits on real tokens.
        lines = [hf_tok(p).input_ids for p in PROMPTS]
        assert all(line == [ours_tok.bos_id, *ours_tok.encode(p)] for line, p in zip(lines, PROMPTS, strict=True))
        width = max(map(len, lines))
        ids = np.array([line + [ours_tok.pad_id] * (width - len(line)) for line in lines])
        mask = np.array([[1] * len(line) + [0] * (width - len(line)) for line in lines])
        with no_grad():  # right padding: the real tokens see only real tokens, with or without the mask
            ours = model(ids, attn_pad_mask=mask.astype(bool))[0].data
        with torch.no_grad():
            theirs = hf(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).logits.numpy()
        real = mask.astype(bool)
        diff_prompts = float(np.abs(ours[real] - theirs[real]).max())
        scale = float(np.abs(ours[real]).max())
        agree, records = corpus_ids_agree(hf_tok, ours_tok)

    print(f"transformers {type(hf).__name__} vs minitrain {type(model).__name__} ({model.num_parameters():,} "
          f"parameters, config {cfg})")
    print(f"  random ids {idx.shape}:            max |logit difference| = {diff_random:.3e}")
    print(f"  padded prompts, real tokens:     max |logit difference| = {diff_prompts:.3e} "
          f"(largest |logit| {scale:.2f})")
    print(f"  tokenizers agree on the prompts: yes; on the verb corpus: {agree:,} of {records:,} records; "
          f"from_pretrained: no missing/unexpected keys, lm_head tied: {tied}")
    return 0 if max(diff_random, diff_prompts) < 1e-3 and agree == records else 1


if __name__ == "__main__":
    sys.exit(main())
