"""Check that a LoRA run on a pretrained Llama base leaves an adapter PEFT loads, with the same logits.

    python scripts/check_llama_peft_adapter.py [--torch-python PATH]

It writes a tiny random Llama base as a Hugging Face folder (`export_hf_folder`: config.json, model.safetensors,
a byte-level BPE tokenizer with a ChatML template), trains a LoRA run on it from YAML through `run_training`
(chat records, packed, loss on the assistant turns, adapters on all seven projections, 4 steps at a high learning
rate so no factor is near zero), then compares on a batch of random ids (one row right-padded):

    minitrain   `run_model(RUN)`: the base rebuilt from model.init_from and the adapters put in
    PEFT        PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(BASE), RUN/adapter)
    PEFT        AutoPeftModelForCausalLM.from_pretrained(ADAPTER), from a folder of its own: the base found by the
                name adapter_config.json records, for RUN/adapter and for `export_text_model(RUN)`'s folder

The run is trained from its folder with the base and data named relatively (`init_from: base`) and exported
from another folder, so the adapters must name the base so that PEFT finds it from anywhere.

and prints the largest absolute logit difference on real positions (target ≤ 1e-4), beside the difference the
adapter makes (PEFT's adapted logits against the bare base: it must be far larger, or the check would be empty).
Exits 1 on a miss.

torch, transformers and peft are not minitrain dependencies: the PEFT side runs in its own interpreter
(`--torch-python`, default /work/scratch-torch/bin/python) as `--peft-side DIR`, handing arrays over in .npz files.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve()  # before the run changes folders
TINY = {"type": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "d_model": 32, "d_ff": 48, "max_seq_len": 64,
        "rope_theta": 10000.0, "rope_scaling": None, "rms_norm_eps": 1e-6, "tie_embeddings": True,
        "attention_bias": False, "head_dim": 8}
TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
            "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
CHATS = [("hola", "hola hola"), ("como", "como hola"), ("hola como", "como"), ("como como", "hola")]


def peft_side(folder: Path) -> None:
    """In the torch interpreter: the base and the adapter through transformers and PEFT; logits to peft.npz."""
    import torch
    from peft import AutoPeftModelForCausalLM, PeftModel
    from transformers import LlamaForCausalLM

    batch = np.load(folder / "batch.npz")
    idx, mask = torch.from_numpy(batch["idx"]), torch.from_numpy(batch["mask"].astype(np.int64))
    base = LlamaForCausalLM.from_pretrained(folder / "base", torch_dtype=torch.float32).eval()
    with torch.no_grad():
        bare = base(input_ids=idx, attention_mask=mask).logits.numpy()
        model = PeftModel.from_pretrained(base, folder / "run" / "adapter").eval()
        adapted = model(input_ids=idx, attention_mask=mask).logits.numpy()
        auto = [AutoPeftModelForCausalLM.from_pretrained(adapter, torch_dtype=torch.float32).eval()(
            input_ids=idx, attention_mask=mask).logits.numpy() for adapter in (folder / "run" / "adapter",
                                                                               folder / "elsewhere" / "export")]
    np.savez(folder / "peft.npz", bare=bare, adapted=adapted, auto_run=auto[0], auto_export=auto[1])


def write_base(folder: Path) -> None:
    from minitrain.data.pretrained_tokenizer import PretrainedTokenizer, bytes_to_unicode
    from minitrain.hub.pretrained import export_hf_folder
    from minitrain.models.llama import parameter_shapes

    merges = ["h o", "l a", "ho la", "Ġ hola", "c o", "m o", "co mo"]
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *bytes_to_unicode().values(),
              *(m.replace(" ", "") for m in merges)]
    tokenizer = PretrainedTokenizer.from_gguf_fields(
        tokens=tokens, merges=merges, token_types=[3, 3, 3] + [1] * (len(tokens) - 3), bos_id=1, eos_id=2,
        pad_id=2, chat_template=TEMPLATE, unk_id=0)
    config = {**TINY, "vocab_size": len(tokens)}
    rng = np.random.default_rng(0)
    state = {name: (rng.normal(0, 0.3, shape) + (1.0 if name.endswith("norm.weight") else 0.0)).astype(np.float32)
             for name, shape in parameter_shapes(config)}
    export_hf_folder(config, state, tokenizer, folder)


def train_run(folder: Path) -> Path:
    """The LoRA run, trained from `folder` with every path relative, then exported from folder/elsewhere."""
    import os

    from minitrain.config import load_config
    from minitrain.hub.export_text import export_text_model
    from minitrain.training.run import run_training

    os.chdir(folder)
    for split, pairs in (("train", CHATS * 3), ("val", CHATS[:2])):
        lines = [json.dumps({"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]})
                 for q, a in pairs]
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    path = folder / "run.yaml"
    path.write_text(
        "model: {type: llama, init_from: base, max_seq_len: 48}\n"
        "data: {train_path: train.jsonl, val_path: val.jsonl, loss_on: completion}\n"
        "optimizer: {lr_max: 0.05}\ntraining: {batch_size: 2, total_steps: 4, val_every: 4}\n"
        "output: {models_dir: models}\n"
        "lora: {enabled: true, rank: 4, alpha: 8, dropout: 0.0, "
        "target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}\n", encoding="utf-8")
    run_training(load_config(path), Path("run"), progress=False, config_path=path)
    (folder / "elsewhere").mkdir()
    os.chdir(folder / "elsewhere")
    export_text_model(folder / "run", "export")
    return folder / "run"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-python", default="/work/scratch-torch/bin/python")
    parser.add_argument("--peft-side", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peft_side is not None:
        peft_side(args.peft_side)
        return 0
    from minitrain.hub.pretrained_runs import run_model
    from minitrain.nn import inference

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_base(folder / "base")
        run_dir = train_run(folder)
        model, tokenizer = run_model(run_dir)
        rng = np.random.default_rng(1)
        idx = rng.integers(0, tokenizer.vocab_size, (2, 12))
        mask = np.ones(idx.shape, dtype=bool)
        mask[1, 8:] = False  # right padding
        np.savez(folder / "batch.npz", idx=idx, mask=mask)
        with inference(model):
            ours = model(idx, attn_pad_mask=mask)[0].data
        (folder / "peft-side").mkdir()  # a folder of its own: the adapters' base is found by the name they record
        subprocess.run([args.torch_python, str(SCRIPT), "--peft-side", str(folder)], check=True,
                       cwd=folder / "peft-side", env={"PYTHONPATH": str(SCRIPT.parents[1]), "PATH": "/usr/bin:/bin"})
        theirs = np.load(folder / "peft.npz")
    diff = float(np.abs(ours - theirs["adapted"])[mask].max())
    effect = float(np.abs(theirs["adapted"] - theirs["bare"])[mask].max())
    auto = max(float(np.abs(ours - theirs[key])[mask].max()) for key in ("auto_run", "auto_export"))
    ok = diff <= 1e-4 and auto <= 1e-4 and effect > 100 * max(diff, 1e-6)
    print(f"PEFT adapter on LlamaForCausalLM vs minitrain run_model: max |Δlogit| {diff:.2e} (target ≤ 1e-4); "
          f"AutoPeftModelForCausalLM from another folder (RUN/adapter, the export): {auto:.2e}; the adapter moves "
          f"the logits by up to {effect:.3f}: {'ok' if ok else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
