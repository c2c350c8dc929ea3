"""Check that a LoRA adapter export loads in PEFT and computes the same logits as minitrain.

    python scripts/check_peft_adapter.py [LORA_RUN] [--out DIR]

LORA_RUN is a LoRA run folder (or adapter model file) whose base it records. Without it, the script makes a
lab-size MiniGPT with large random weights and a random adapter on every linear layer (rank 4, trained biases,
bias: all) so that no number is near zero. It exports the base (`minitrain export BASE`) and the adapter
(`minitrain export LORA_RUN`: PEFT's layout), loads them with

    peft.PeftModel.from_pretrained(GPT2LMHeadModel.from_pretrained(base_export), adapter_export)

runs PEFT's model and minitrain's adapted model (the adapters unmerged, and merged) on the same batches (random
ids, then real prompts with right padding) and prints the largest absolute logit differences. A QLoRA adapter
was trained against the 4-bit base: PEFT puts it on the float base, so its logits differ by the quantization
error (printed, not checked).

Needs torch, transformers and peft, which are not minitrain dependencies: run it from a scratch environment, e.g.
    python3 -m venv /tmp/peftcheck
    /tmp/peftcheck/bin/pip install torch==2.13.0 transformers peft safetensors numpy numba pydantic pyyaml tqdm \
        matplotlib huggingface_hub jsonschema
    PYTHONPATH=. /tmp/peftcheck/bin/python scripts/check_peft_adapter.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from check_hf_export import LAB_MODEL, PROMPTS, random_source

from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.export_hf import export_model
from minitrain.hub.run_folder import read_run
from minitrain.hub.sources import adapted_model, load_model
from minitrain.lora import LoraSettings, adapter_names, add_adapters, linear_paths, merge_adapters, with_base
from minitrain.lora.adapter import adapter_state
from minitrain.models.minigpt import MiniGPT
from minitrain.nn import inference
from minitrain.runs.model_files import load_model_file, save_model_file


def random_adapter(folder: Path) -> tuple[Path, Path]:
    """A random base model file and a random adapter file on it (large values everywhere), and the vocabulary."""
    base_path, vocab = random_source(folder)
    state, _, _ = load_model_file(base_path)
    model = MiniGPT(**LAB_MODEL, rng=0)
    model.load_state_dict(state)
    settings = with_base(LoraSettings(rank=4, alpha=8.0, targets=tuple(linear_paths(model)), bias="all"),
                         str(base_path), state)
    add_adapters(model, settings, np.random.default_rng(2))
    rng = np.random.default_rng(3)
    params = dict(model.named_parameters())
    for name in adapter_names(model):
        params[name].data[...] = rng.normal(0, 0.3, params[name].shape)
    adapter = folder / "adapter.safetensors"
    save_model_file(adapter, adapter_state(model), model.config)
    return adapter, vocab


def logits_pair(ours, peft_model, ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import torch

    with inference(ours):
        mine = ours(ids, attn_pad_mask=mask)[0].data
    with torch.no_grad():
        theirs = peft_model(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask.astype(np.int64))).logits
    return mine, theirs.numpy()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", help="LoRA run folder or adapter file (default: a random adapter)")
    parser.add_argument("--vocab", help="vocab.json, if the source does not record it")
    parser.add_argument("--out", help="folder to keep the two exports in (default: a temporary one)")
    args = parser.parse_args()
    try:
        from peft import PeftModel
        from transformers import GPT2LMHeadModel
    except ImportError as e:
        print(f"needs torch, transformers and peft ({e}); see the docstring for a scratch environment",
              file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory() as tmp:
        source, vocab = (args.source, args.vocab) if args.source else random_adapter(Path(tmp))
        info = read_run(source)
        if info.adapter is None:
            print(f"{source}: not a LoRA run or adapter file", file=sys.stderr)
            return 2
        vocab = vocab or info.find(info.section("data").get("vocab_path"))  # the base's too: the same ids
        out = Path(args.out or Path(tmp) / "exports")
        base_spec = str(info.find(info.adapter.base) or info.adapter.base)
        export_model(base_spec, out / "base", vocab_path=vocab)
        export_model(source, out / "adapter", vocab_path=vocab)

        base = GPT2LMHeadModel.from_pretrained(out / "base")
        peft_model = PeftModel.from_pretrained(base, out / "adapter")
        peft_model.eval()
        ours = adapted_model(info.state, info.model_config, str(info.model_path), run_dir=info.run_dir)
        cfg = ours.config
        tokenizer = CharTokenizer.load(out / "adapter" / "vocab.json")

        ids = np.random.default_rng(0).integers(0, cfg["vocab_size"], size=(4, cfg["max_seq_len"]))
        full = np.ones(ids.shape, dtype=bool)
        lines = [[tokenizer.bos_id, *tokenizer.encode(p)] for p in PROMPTS]
        width = max(map(len, lines))
        prompts = np.array([line + [tokenizer.pad_id] * (width - len(line)) for line in lines])
        mask = np.arange(width) < np.array([len(line) for line in lines])[:, None]

        rows = []
        for what, batch, real in (("random ids", ids, full), ("padded prompts", prompts, mask)):
            mine, theirs = logits_pair(ours, peft_model, batch, real)
            rows.append((what, float(np.abs(mine[real] - theirs[real]).max()), float(np.abs(mine[real]).max())))
        merged = merge_adapters(ours)
        mine_merged, theirs = logits_pair(merged, peft_model, prompts, mask)
        merged_diff = float(np.abs(mine_merged[mask] - theirs[mask]).max())
        base_model, _ = load_model(base_spec)
        with inference(base_model):
            base_logits = base_model(prompts, attn_pad_mask=mask)[0].data
        moved = float(np.abs(base_logits[mask] - mine_merged[mask]).max())

    print(f"PEFT {type(peft_model.base_model).__name__} on transformers GPT2LMHeadModel vs minitrain's LoRA model "
          f"(rank {info.adapter.rank}, alpha {info.adapter.alpha:g}, bias {info.adapter.bias}, "
          f"{len(info.adapter.targets)} layers{', 4-bit base' if info.adapter.quantize_base else ''})")
    for what, diff, scale in rows:
        print(f"  {what:16} max |logit difference| = {diff:.3e} (largest |logit| {scale:.2f})")
    print(f"  merged model, padded prompts: max |logit difference| = {merged_diff:.3e}")
    print(f"  (the adapter moves the base's logits by up to {moved:.2f}, so the agreement is not the base's)")
    worst = max(diff for _, diff, _ in rows)
    if info.adapter.quantize_base:
        print("  QLoRA: PEFT applies the adapter to the float base; the difference is the base's 4-bit rounding")
        return 0
    return 0 if max(worst, merged_diff) < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
