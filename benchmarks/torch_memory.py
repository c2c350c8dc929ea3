"""Peak RSS and seconds per step of a PyTorch fine-tuning run, the reference for docs/performance.md's memory round:
transformers' AutoModelForCausalLM from a Hugging Face folder or a GGUF file (dequantized to float32 by
transformers), PEFT LoRA or every weight, torch.optim.AdamW, random token rows (loss on every position).

    python benchmarks/torch_memory.py BASE --method lora|full [--rank 64] [--batch 4] [--row 64] [--steps 3]

Run by a Python with torch, transformers and peft (a scratch venv: never a dependency of minitrain). Prints one
JSON line: load seconds, peak RSS after loading and at the end (VmHWM, MB), the median seconds of the steps after
the first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch


def peak_rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("--method", choices=("lora", "full"), required=True)
    parser.add_argument("--rank", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--row", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--checkpointing", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    from transformers import AutoModelForCausalLM

    start = time.perf_counter()
    where = dict(pretrained_model_name_or_path=args.base.parent, gguf_file=args.base.name) \
        if args.base.suffix == ".gguf" else dict(pretrained_model_name_or_path=args.base)
    model = AutoModelForCausalLM.from_pretrained(**where, torch_dtype=torch.float32, attn_implementation="sdpa")
    if args.method == "lora":
        from peft import LoraConfig, get_peft_model

        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        model = get_peft_model(model, LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.05,
                                                 target_modules=targets))
    if args.checkpointing:
        model.gradient_checkpointing_enable()
        if args.method == "lora":
            model.enable_input_require_grads()
    model.train()
    load_s, load_mb = time.perf_counter() - start, peak_rss_mb()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=2e-4, weight_decay=0.0)
    ids = torch.randint(0, 49152, (args.batch, args.row + 1), generator=torch.Generator().manual_seed(0))
    times, losses = [], []
    for _ in range(args.steps):
        t = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids=ids[:, :-1], labels=ids[:, :-1]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        times.append(time.perf_counter() - t)
        losses.append(round(loss.item(), 4))
    print(json.dumps({"method": args.method, "batch": args.batch, "row": args.row, "steps": args.steps,
                      "load_s": round(load_s, 1), "peak_after_load_mb": round(load_mb),
                      "peak_mb": round(peak_rss_mb()), "s_per_step": round(statistics.median(times[1:] or times), 2),
                      "step_s": [round(x, 2) for x in times], "losses": losses}))


if __name__ == "__main__":
    main()
