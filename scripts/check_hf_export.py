"""Check that an export loads in `transformers` and computes the same logits as minitrain.

    python scripts/check_hf_export.py [SOURCE] [--vocab PATH] [--out DIR]

SOURCE is a run folder or a model file (default: a randomly initialised MiniGPT of the lab 01 size, with its
weights scaled up so the logits are far from zero). The script exports it, loads the folder with
`GPT2LMHeadModel.from_pretrained` and `AutoTokenizer.from_pretrained`, runs both models on the same batch
(random ids, then real prompts with right padding) and prints the largest absolute logit difference.

A LoRA run exports an adapter instead; scripts/check_peft_adapter.py checks that one with PEFT.

Needs torch and transformers, which are not minitrain dependencies: run it from a scratch environment, e.g.
    python3 -m venv /tmp/hfcheck
    /tmp/hfcheck/bin/pip install torch transformers numba pydantic pyyaml tqdm matplotlib
    PYTHONPATH=. /tmp/hfcheck/bin/python scripts/check_hf_export.py runs/lab01
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from minitrain.autograd.tensor import no_grad
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.export_hf import export_model
from minitrain.hub.sources import load_model
from minitrain.models.minigpt import MiniGPT
from minitrain.runs.model_files import save_model_file

LAB_MODEL = {"n_layer": 2, "n_head": 4, "d_model": 64, "d_ff": 256, "vocab_size": 64, "max_seq_len": 32}
PROMPTS = ["comer|R1|comí", "caminar|P1|camino", "vivir|S6|vivan", "ser|I3|era"]


def random_source(folder: Path) -> tuple[Path, Path]:
    """A model file with large random weights and a vocabulary for the prompts."""
    model = MiniGPT(**LAB_MODEL, rng=0)
    rng = np.random.default_rng(1)
    model.load_state_dict({n: a + rng.normal(0, 0.3, a.shape).astype(np.float32)
                           for n, a in model.state_dict().items()})
    path = folder / "model.safetensors"
    save_model_file(path, model.state_dict(), model.config)
    vocab = folder / "vocab.json"
    CharTokenizer.from_texts(PROMPTS).save(vocab)
    return path, vocab


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", help="run folder or model file (default: random lab-size model)")
    parser.add_argument("--vocab", help="vocab.json, if the source does not record it")
    parser.add_argument("--out", help="export folder to keep (default: a temporary one)")
    args = parser.parse_args()
    try:
        import torch
        from transformers import AutoTokenizer, GPT2LMHeadModel
    except ImportError as e:
        print(f"needs torch and transformers ({e}); see the docstring for a scratch environment", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory() as tmp:
        source, vocab = (args.source, args.vocab) if args.source else random_source(Path(tmp))
        out = Path(args.out or Path(tmp) / "export")
        export_model(source, out, vocab_path=vocab)

        hf, loading = GPT2LMHeadModel.from_pretrained(out, output_loading_info=True)
        hf.eval()
        untouched = {k: v for k, v in loading.items() if v and k != "error_msgs"}
        assert not untouched and not loading.get("error_msgs"), f"from_pretrained reported {loading}"
        assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr(), "lm_head is not tied"
        hf_tok = AutoTokenizer.from_pretrained(out)
        ours_tok = CharTokenizer.load(out / "vocab.json")
        model, _ = load_model(str(out))
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
        with no_grad():
            ours = model(ids, attn_pad_mask=mask.astype(bool))[0].data
        with torch.no_grad():
            theirs = hf(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).logits.numpy()
        real = mask.astype(bool)
        diff_prompts = float(np.abs(ours[real] - theirs[real]).max())
        scale = float(np.abs(ours[real]).max())

    print(f"transformers GPT2LMHeadModel vs minitrain MiniGPT ({model.num_parameters():,} "
          f"parameters, config {cfg})")
    print(f"  random ids {idx.shape}:            max |logit difference| = {diff_random:.3e}")
    print(f"  padded prompts, real tokens:     max |logit difference| = {diff_prompts:.3e} "
          f"(largest |logit| {scale:.2f})")
    print("  tokenizers agree on the prompts: yes; from_pretrained: no missing/unexpected keys, lm_head tied")
    return 0 if max(diff_random, diff_prompts) < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
