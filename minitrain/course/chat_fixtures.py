"""What lab 08's checker and tests use in place of SmolLM2-135M: a tiny byte-level BPE tokenizer with SmolLM2's
chat template, learned from the held-out verb questions, and a tiny random Llama over it (a Hugging Face folder,
written in a second), so that the whole lab runs in seconds where the real model takes minutes.

    tokenizer()              a PretrainedTokenizer: <|endoftext|> (pad), <|im_start|>, <|im_end|> (EOS), the 256
                             byte symbols and merges learned by `tokenizers` from the verb questions
    tiny_model(seed)         a 2-layer Llama (d 32) over it, built in memory
    write_tiny_base(folder)  that model as a Hugging Face folder: what `run.py --base FOLDER` trains on
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from minitrain.common.paths import course_file
from minitrain.data.pretrained_tokenizer import PretrainedTokenizer, bytes_to_unicode
from minitrain.data.text_records import TextRecord, read_file
from minitrain.hub.pretrained import export_hf_folder
from minitrain.models.llama import Llama

CHAT = course_file("data/chat/verbs")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# SmolLM2-Instruct's template: ChatML, and a default system message when the conversation has none.
CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MERGES = 300


@cache
def held_out() -> tuple[TextRecord, ...]:
    """The 144 held-out verb conversations (data/chat/verbs/test.jsonl, committed)."""
    return tuple(read_file(CHAT / "test.jsonl"))


@cache
def tokenizer() -> PretrainedTokenizer:
    """The tiny tokenizer (module docstring): merges learned from the held-out and dev conversations' text."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    learner = Tokenizer(models.BPE())
    learner.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=len(SPECIALS) + 256 + MERGES, special_tokens=SPECIALS,
                                  initial_alphabet=alphabet, show_progress=False)
    texts = [m["content"] for name in ("test.jsonl", "val.jsonl") for r in read_file(CHAT / name)
             for m in r.data["messages"]] + ["system user assistant You are a helpful AI assistant named SmolLM"]
    learner.train_from_iterator(texts, trainer)
    saved = json.loads(learner.to_str())["model"]
    tokens = [t for t, _ in sorted(saved["vocab"].items(), key=lambda item: item[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in saved["merges"]]
    assert set(bytes_to_unicode().values()) <= set(tokens)  # every byte has a token: nothing is unknown
    types = [3 if t in SPECIALS else 1 for t in tokens]  # 3: control (special), 1: normal
    return PretrainedTokenizer.from_gguf_fields(tokens, merges, types, bos_id=None, eos_id=tokens.index("<|im_end|>"),
                                                pad_id=tokens.index("<|endoftext|>"), chat_template=CHATML,
                                                pre="smollm", where="lab 08's tiny tokenizer")


def model_config() -> dict:
    return {"type": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "d_model": 32, "d_ff": 64,
            "vocab_size": tokenizer().vocab_size, "max_seq_len": 128, "rope_theta": 10000.0, "rope_scaling": None,
            "rms_norm_eps": 1e-5, "tie_embeddings": True, "attention_bias": False, "head_dim": 8}


def tiny_model(seed: int = 0) -> Llama:
    """A random 2-layer Llama over `tokenizer()` (float32)."""
    config = model_config()
    return Llama(**{k: v for k, v in config.items() if k != "type"}, rng=seed)


def write_tiny_base(folder: str | Path, seed: int = 0) -> Path:
    """`tiny_model(seed)` and its tokenizer as a Hugging Face folder (config.json, model.safetensors, tokenizer
    files): a base `minitrain train` and `run.py --base` read as they read SmolLM2."""
    model = tiny_model(seed)
    state = {name: p.data for name, p in model.named_parameters()}
    return export_hf_folder(model_config(), state, tokenizer(), folder)
