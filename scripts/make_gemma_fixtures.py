"""Write the tiny random Gemma 2 and Gemma 3 Hugging Face folders tests/models/test_gemma.py reads, with
transformers' own per-token log-probabilities on fixed ids. Run with an environment that has torch and
transformers (not minitrain's dependencies):

    python scripts/make_gemma_fixtures.py [OUT]         (OUT: tests/data/gemma)

Each folder (OUT/gemma2, OUT/gemma3) holds config.json and model.safetensors as transformers saves them (float32),
a word-level tokenizer.json over the vocabulary (minitrain's folder loader wants one), and expected.json: the ids
(2 rows of 16) and log p(ids[t+1] | ids[..t]) per row and position, with transformers' greedy continuation of a
prompt. The configs are chosen so that every piece of the family shows: 4 / 6 layers with both local and global
layers, a window of 4 positions (shorter than the 16), head_dim 12 ≠ hidden 32 / 4 heads, 2 key/value heads,
query_pre_attn_scalar ≠ head_dim, soft-capping tight enough to bend the scores (Gemma 2), a local RoPE base and a
linear scaling on the global one (Gemma 3); every weight, norms too, drawn N(0, 0.2²) from seed 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from transformers import Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig

VOCAB = 48
SHAPE = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=40, num_attention_heads=4, num_key_value_heads=2,
             head_dim=12, max_position_embeddings=64, rms_norm_eps=1e-6, sliding_window=4, query_pre_attn_scalar=10,
             bos_token_id=2, eos_token_id=1, pad_token_id=0, attn_implementation="eager")
CONFIGS = {
    "gemma2": (Gemma2ForCausalLM, Gemma2Config(**SHAPE, num_hidden_layers=4, rope_theta=100.0,
                                               attn_logit_softcapping=3.0, final_logit_softcapping=2.5)),
    "gemma3": (Gemma3ForCausalLM, Gemma3TextConfig(
        **SHAPE, num_hidden_layers=6, rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 30.0}})),
}


def main(out: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, VOCAB, (2, 16), generator=generator)
    ids[:, 0] = 2  # BOS
    for name, (model_class, config) in CONFIGS.items():
        torch.manual_seed(0)
        model = model_class(config).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) * 0.2)
            logits = model(ids).logits.double()
            logprobs = torch.log_softmax(logits, -1)[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
            prompt = ids[:1, :6]
            greedy = model.generate(prompt, max_new_tokens=10, do_sample=False, eos_token_id=None)[0, 6:]
        folder = out / name
        model.save_pretrained(folder, safe_serialization=True)
        vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, **{f"w{i}": i for i in range(3, VOCAB)}}
        tokenizer = Tokenizer(WordLevel(vocab, unk_token="<pad>"))
        tokenizer.pre_tokenizer = WhitespaceSplit()
        tokenizer.save(str(folder / "tokenizer.json"))
        (folder / "tokenizer_config.json").write_text(json.dumps(
            {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"}) + "\n")
        expected = {"ids": ids.tolist(), "logprobs": logprobs.tolist(), "prompt": prompt[0].tolist(),
                    "greedy": greedy.tolist(), "layer_types": model.config.layer_types}
        (folder / "expected.json").write_text(json.dumps(expected) + "\n")
        print(name, "layer_types", model.config.layer_types, "files", sorted(p.name for p in folder.iterdir()))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "tests/data/gemma")
