"""A Qwen2.5-0.5B-shaped base with random weights, as a Hugging Face folder: config.json (model_type qwen2, the
real model's numbers) and model.safetensors (float32, normal(0, 0.02) matrices, unit norms, small q/k/v biases),
plus the tokenizer files of another folder (a chat template is what `init --base` needs for chat records).

    python benchmarks/qwen05b_shape.py OUT --tokenizer-from RUN/tokenizer

The shape is the publish spec's 0.5B model: hidden 896, 24 layers, 14 query / 2 key-value heads of 64, SwiGLU
4864, vocabulary 151,936, tied embeddings, biases on q/k/v, RoPE θ 10⁶, RMSNorm ε 10⁻⁶: 494M parameters, 1.98 GB
as float32. The weights are random: what it measures is memory and time, never quality.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import safetensors.numpy

CONFIG = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24,
    "num_attention_heads": 14, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 4864,
    "vocab_size": 151936, "tie_word_embeddings": True, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
    "max_position_embeddings": 32768, "hidden_act": "silu", "torch_dtype": "float32", "bos_token_id": 151643,
    "eos_token_id": 151645, "sliding_window": None, "use_sliding_window": False, "attention_dropout": 0.0,
}


def weights(config: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """HF Qwen2 names -> float32 arrays ((out, in) matrices, as torch.nn.Linear holds them)."""
    rng = np.random.default_rng(seed)
    d, ff, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    q, kv = config["num_attention_heads"] * config["head_dim"], config["num_key_value_heads"] * config["head_dim"]

    def normal(*shape, std=0.02):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    state = {"model.embed_tokens.weight": normal(v, d), "model.norm.weight": np.ones(d, np.float32)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        state.update({
            p + "input_layernorm.weight": np.ones(d, np.float32),
            p + "post_attention_layernorm.weight": np.ones(d, np.float32),
            p + "self_attn.q_proj.weight": normal(q, d), p + "self_attn.q_proj.bias": normal(q, std=0.01),
            p + "self_attn.k_proj.weight": normal(kv, d), p + "self_attn.k_proj.bias": normal(kv, std=0.01),
            p + "self_attn.v_proj.weight": normal(kv, d), p + "self_attn.v_proj.bias": normal(kv, std=0.01),
            p + "self_attn.o_proj.weight": normal(d, q),
            p + "mlp.gate_proj.weight": normal(ff, d), p + "mlp.up_proj.weight": normal(ff, d),
            p + "mlp.down_proj.weight": normal(d, ff),
        })
    return state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--tokenizer-from", type=Path, required=True, help="a folder with tokenizer.json")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    state = weights(CONFIG)
    print(f"{sum(a.size for a in state.values()):,} parameters")
    safetensors.numpy.save_file(state, str(args.out / "model.safetensors"), metadata={"format": "pt"})
    (args.out / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    for file in args.tokenizer_from.iterdir():
        if file.name != "config.json" and file.is_file():
            shutil.copy(file, args.out / file.name)


if __name__ == "__main__":
    main()
