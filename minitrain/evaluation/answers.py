"""How a chat model is scored on held-out questions (lab 08, experiment 22): the answer's loss and perplexity,
per token and per character, and greedy exact match of the answer.

    answer_loss         = −(1/N) Σ log p(token | everything before it)    over the N tokens the answer mask counts:
                          each assistant answer and its end token, in all the records together (loss_on:
                          completion); a record of 2 tokens weighs 2, one of 9 weighs 9
    answer_ppl          = exp(answer_loss)                                 never the mean of per-record PPLs
    answer_loss_per_char = answer_loss · N / C                             C = Σ (characters of the answer + 1):
    answer_ppl_per_char = exp(answer_loss_per_char)                        MiniGPT's unit, the +1 its EOS
    exact_match         = (1/R) Σ [greedy answer, special tokens dropped and whitespace stripped, == the answer]

Perplexities in BPE tokens and in characters are different units: a 49,152-token model and a character model are
compared per character (the same total −log p over the same text).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from minitrain.data.packing import pack, pad_id_of
from minitrain.data.text_examples import encode_records
from minitrain.data.text_records import TextRecord
from minitrain.evaluation.text_loss import token_loss
from minitrain.nn import inference


def answer_scores(model: Any, tokenizer: Any, records: Sequence[TextRecord], width: int = 128) -> dict[str, float]:
    """{"answer_loss", "answer_ppl", "answer_tokens", "answer_loss_per_char", "answer_ppl_per_char"} of `model` on
    chat `records` (module docstring), each record in a row of at most `width` positions; the answer is each
    record's last message, an assistant turn."""
    examples = encode_records(records, tokenizer, "completion")
    scores = token_loss(model, pack(examples, width, "pad", pad_id_of(tokenizer)), model.config["vocab_size"])
    characters = sum(len(r.data["messages"][-1]["content"]) + 1 for r in records)
    per_char = scores["loss"] * scores["tokens"] / characters  # the same total −log p, over characters
    return {"answer_loss": scores["loss"], "answer_ppl": scores["ppl"], "answer_tokens": scores["tokens"],
            "answer_loss_per_char": per_char, "answer_ppl_per_char": math.exp(per_char)}


def exact_match(model: Any, tokenizer: Any, records: Sequence[TextRecord], max_new_tokens: int = 8,
                batch: int = 24) -> dict[str, Any]:
    """{"exact_match": the share of `records` whose greedy answer is the last message's content, "answers": each
    greedy answer}: the prompt is the messages before the answer with the chat template's generation prompt; up
    to `max_new_tokens` new tokens (SmolLM2's longest verb form is 7 tokens, then EOS), decoded without special
    tokens and stripped of surrounding whitespace; `batch` prompts at a time."""
    prompts = [tokenizer.encode(tokenizer.apply_chat_template(r.data["messages"][:-1], add_generation_prompt=True))
               for r in records]
    end = tokenizer.turn_end_id()  # where the template ends an answer: EOS, or Gemma's <end_of_turn>
    end = tokenizer.eos_id if end is None else end
    answers: list[str] = []
    with inference(model):
        for start in range(0, len(prompts), batch):
            new = model.generate(prompts[start : start + batch], max_new_tokens, eos_id=end,
                                 vocab_limit=tokenizer.vocab_size)
            answers += [tokenizer.decode(ids, skip_special_tokens=True).strip() for ids in new]
    right = [a == r.data["messages"][-1]["content"] for a, r in zip(answers, records, strict=True)]
    return {"exact_match": sum(right) / len(right) if right else 0.0, "answers": answers}
