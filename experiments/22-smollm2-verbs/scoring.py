"""How experiment 22 scores a model on the held-out verbs: the answer's loss and perplexity (per BPE token and per
character, the unit MiniGPT and the n-gram are scored in), and greedy exact match of the conjugated form."""

from __future__ import annotations

import math
from typing import Any

from minitrain.data.packing import pack, pad_id_of
from minitrain.data.text_examples import encode_records
from minitrain.data.text_records import TextRecord
from minitrain.evaluation.text_loss import token_loss
from minitrain.nn import inference

MAX_ANSWER_TOKENS = 8  # the longest form of the corpus is 7 tokens with SmolLM2's tokenizer (acompañaríamos); then EOS


def answer(record: TextRecord) -> str:
    return record.data["messages"][-1]["content"]


def answer_scores(model: Any, tokenizer: Any, records: list[TextRecord]) -> dict[str, float]:
    """Loss over the assistant answer's tokens and its end token (loss_on: completion), and the same total NLL per
    character of the answer + 1 for its end (MiniGPT counts the form's characters and EOS)."""
    rows = pack(encode_records(records, tokenizer, "completion"), 128, "pad", pad_id_of(tokenizer))
    scores = token_loss(model, rows, model.config["vocab_size"])
    characters = sum(len(answer(r)) + 1 for r in records)
    per_char = scores["loss"] * scores["tokens"] / characters
    return {"answer_loss": scores["loss"], "answer_ppl": scores["ppl"], "answer_tokens": scores["tokens"],
            "answer_loss_per_char": per_char, "answer_ppl_per_char": math.exp(per_char)}


def exact_match(model: Any, tokenizer: Any, records: list[TextRecord], batch: int = 24) -> dict[str, Any]:
    """Greedy answers to each question (the chat template's generation prompt), compared with the form."""
    prompts = [tokenizer.encode(tokenizer.apply_chat_template(r.data["messages"][:-1], add_generation_prompt=True))
               for r in records]
    answers = []
    with inference(model):
        for start in range(0, len(prompts), batch):
            new = model.generate(prompts[start : start + batch], MAX_ANSWER_TOKENS, eos_id=tokenizer.eos_id,
                                 vocab_limit=tokenizer.vocab_size)
            answers += [tokenizer.decode(ids, skip_special_tokens=True).strip() for ids in new]
    right = [a == answer(r) for a, r in zip(answers, records, strict=True)]
    return {"exact_match": sum(right) / len(right), "answers": answers}
