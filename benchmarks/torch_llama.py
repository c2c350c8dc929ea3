"""One case of the 135M benchmark measured by PyTorch eager, as a PyTorch user would run it: transformers'
`LlamaForCausalLM` (sdpa attention), PEFT's LoRA, torch's AdamW, `model.generate`. Run by benchmarks/bench_llama.py
with a Python that has torch, transformers and peft (a scratch venv: never a dependency of minitrain).

    python benchmarks/torch_llama.py CASE --layers N --steps K --threads T --weights FILE

Same cases, batch, prompt, optimizer settings and JSON line as benchmarks/llama_setup.py (whose constants are
repeated here: this file imports neither minitrain nor its dependencies). FILE holds minitrain's initial weights
(`Llama.state_dict()`: Hugging Face names, linear weights stored [in, out], so they are transposed here); the first
loss and the greedy tokens are then comparable with minitrain's. `qlora` is not run (PyTorch's NF4 is
bitsandbytes, a CUDA library).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F

SMOLLM2 = dict(num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, hidden_size=576,
               intermediate_size=1536, vocab_size=49152, max_position_embeddings=2048, rope_theta=100000.0,
               rms_norm_eps=1e-5, tie_word_embeddings=True, hidden_act="silu")  # fmt: skip
BATCH, SEQ, PROMPT, NEW_TOKENS = 4, 256, 32, 64
ADAMW = dict(lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)


def peak_rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def build(layers: int, weights: str | None):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{**SMOLLM2, "num_hidden_layers": layers}, attn_implementation="sdpa")
    model = LlamaForCausalLM(config).float()
    if weights:
        from safetensors.numpy import load_file

        state = {name: torch.from_numpy(np.ascontiguousarray(a.T if name.endswith(("_proj.weight", "lm_head.weight"))
                                                             else a))
                 for name, a in load_file(weights).items()}  # fmt: skip
        missing, unexpected = model.load_state_dict(state, strict=False)
        if unexpected or set(missing) - {"lm_head.weight"}:
            raise SystemExit(f"weights do not fit: missing {missing}, unexpected {unexpected}")
        model.tie_weights()
    return model


def run(case: str, layers: int, steps: int, threads: int, weights: str | None, fused: bool) -> dict:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build(layers, weights)
    result: dict = {"impl": "torch", "case": case, "layers": layers, "threads": threads, "torch": torch.__version__}
    vocab = SMOLLM2["vocab_size"]
    if case == "generate":
        model.eval()
        model.generation_config.eos_token_id = None
        prompt = torch.tensor([np.random.default_rng(1).integers(0, vocab, size=PROMPT).tolist()])
        generate = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
        times, tokens = [], []
        with torch.inference_mode():
            model.generate(prompt, max_new_tokens=4, min_new_tokens=4, **generate)
            for _ in range(steps):
                start = time.perf_counter()
                out = model.generate(prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, **generate)
                times.append(time.perf_counter() - start)
                tokens = out[0, PROMPT:].tolist()
        result.update(times=times, tokens=tokens, new_tokens=len(tokens))
    else:
        if case == "lora":
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0,
                                                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
        elif case != "full":
            raise SystemExit(f"torch_llama.py: case {case} is not run with PyTorch")
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, **ADAMW, fused=fused)
        ids = torch.from_numpy(np.random.default_rng(0).integers(0, vocab, size=(BATCH, SEQ + 1)))
        inputs, targets = ids[:, :-1], ids[:, 1:]

        def step() -> float:
            optimizer.zero_grad(set_to_none=True)
            logits = model(input_ids=inputs).logits
            loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
            loss.backward()
            optimizer.step()
            return float(loss.item())

        result["first_loss"] = step()
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        result.update(times=times, trainable=sum(p.numel() for p in params), fused_adamw=fused)
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=("lora", "full", "generate"))
    parser.add_argument("--layers", type=int, default=SMOLLM2["num_hidden_layers"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--weights", default=None)
    parser.add_argument("--no-fused", action="store_true", help="torch's default AdamW instead of fused=True")
    args = parser.parse_args()
    print(json.dumps(run(args.case, args.layers, args.steps, args.threads, args.weights, not args.no_fused)))


if __name__ == "__main__":
    main()
