"""Check that a LoRA run on a pretrained base exports to what PEFT and transformers load with minitrain's logits.

    python scripts/check_run_export.py RUN BASE_FOLDER [--torch-python PATH]

RUN is a finished LoRA run on a Hugging Face folder base (experiment 28's on Gemma 3 270M, 22's on SmolLM2 after
`minitrain export` of its GGUF to a folder); BASE_FOLDER is that base. This process (minitrain's environment)
exports the run twice with the `minitrain` command, the adapter (the default) and the merged model
(`--merge-adapters`), and scores a fixed chat prompt with the run itself (`load_text_model`). The other process,
run with `--torch-python` (torch + transformers + peft; never minitrain dependencies), loads
`PeftModel.from_pretrained(AutoModelForCausalLM(BASE_FOLDER), adapter)` and `AutoModelForCausalLM(merged)`, and
prints the largest logit difference of each against minitrain's, beside the difference the adapter makes (PEFT's
adapted logits against the bare base: far larger, or the check would be empty). Exit 1 when either exceeds 1e-3.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

PROMPT = [{"role": "user", "content": "Conjuga «vender» en condicional, primera persona del plural."}]
TOLERANCE = 1e-3


def torch_side(base: str, folder: str) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    found = np.load(Path(folder, "minitrain.npz"))
    ids, ours = torch.tensor(found["ids"][None]), found["logits"]
    with torch.no_grad():
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        bare = model(ids).logits[0].numpy()
        adapted = PeftModel.from_pretrained(model, str(Path(folder, "adapter")))(ids).logits[0].numpy()
        merged = AutoModelForCausalLM.from_pretrained(str(Path(folder, "merged")), dtype=torch.float32)
        merged_logits = merged(ids).logits[0].numpy()
    print(f"{type(merged).__name__}: {ids.shape[1]} positions")
    print(f"  PEFT adapter on the base vs minitrain   max |Δlogit| {np.abs(adapted - ours).max():.3g}")
    print(f"  merged folder vs minitrain              max |Δlogit| {np.abs(merged_logits - ours).max():.3g}")
    print(f"  the adapter's effect (PEFT vs the base) max |Δlogit| {np.abs(adapted - bare).max():.3g}")
    sys.exit(int(max(np.abs(adapted - ours).max(), np.abs(merged_logits - ours).max()) > TOLERANCE))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("base")
    parser.add_argument("--torch-python", default="/tmp/tv/bin/python")
    parser.add_argument("--torch-side", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_side:
        torch_side(args.base, args.torch_side)
        return 0

    from minitrain.hub.text_models import load_text_model
    from minitrain.nn import inference

    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in (("adapter", []), ("merged", ["--merge-adapters"])):
            subprocess.run([sys.executable, "-m", "minitrain.cli", "export", args.run, str(Path(tmp, name)), *extra],
                           check=True, stdout=subprocess.DEVNULL)
        loaded = load_text_model(args.run)
        tok = loaded.tokenizer
        ids = tok.encode(tok.apply_chat_template(PROMPT, add_generation_prompt=True) + "venderíamos")
        with inference(loaded.model):
            logits = loaded.model(np.array([ids]))[0].data[0]
        np.savez(Path(tmp, "minitrain.npz"), ids=np.array(ids), logits=logits)
        return subprocess.run([args.torch_python, __file__, args.run, args.base, "--torch-side", tmp]).returncode


if __name__ == "__main__":
    sys.exit(main())
