"""Text records (`text_records.py`) to token examples: ids and a loss mask, with the base model's own tokenizer.

Each record becomes an `Example(ids, loss_mask, where)`: `loss_mask[i]` is True when predicting `ids[i]` from
`ids[:i]` counts in the loss (so `loss_mask[0]` is always False: nothing predicts the first token). `packing.pack`
turns examples into (N, T) arrays with input = ids[:-1], target = ids[1:], loss mask = loss_mask[1:].

    kind                ids                                                       loss_on: completion counts
    text                encode(text, add_special_tokens=True) + [EOS]             (refused: there is no completion)
    prompt_completion   encode(prompt, add_special_tokens=True)                   the completion's tokens and EOS
                        + encode(completion) + [EOS]
    chat                encode(apply_chat_template(messages)), for loss_on:       each assistant turn: its content
                        completion piece by piece (below)                         and its end token

`add_special_tokens=True` lets the tokenizer put its own BOS where its model expects one (Llama: yes, GPT-2 and
SmolLM2: no); an EOS it already appends is not doubled. The prompt and the completion are tokenized separately, so
the boundary between them is exact. With `loss_on: all` every token but the first counts. Which tokens count is
`answer_mask.answer_mask`'s (lab 08 writes it): this module cuts a record into context and answer pieces, that
function marks them.

Chat: the assistant turns are found by rendering the conversation prefix by prefix, as TRL and torchtune do.
For an assistant message i, `before` = the text of messages[:i] with the generation prompt and `after` = that of
messages[:i+1]; each must begin the whole conversation's text (and `before` must not reach back into an earlier
turn). The text is then cut at those points, context | turn | context | turn ..., and each piece is tokenized on
its own. So the tokens before an answer end as those of `apply_chat_template(messages[:i], add_generation_prompt=
True)`, the prompt the model is given when it answers, and a tokenizer that would merge across a cut (byte-level
BPE joins "\n" with the spaces after it) cannot blur a mask. A turn's tokens count up to its last EOS when it holds
one (ChatML's `<|im_end|>` then "\n": the newline after the end token is the template's, not the answer's). A
template that breaks the prefix property (one that rewrites earlier turns, as those that drop past reasoning do)
is refused with the record's place: its masks would be wrong. With `loss_on: all`, a conversation is simply
`encode(apply_chat_template(messages))`. A conversational prompt/completion record (TRL's, `record_shapes.py`)
has one turn, its whole completion: `before` = the prompt with the generation prompt, `after` = the conversation
(TRL counts the completion's text in the same way, and also what the template writes after its last end token).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.data.answer_mask import answer_mask
from minitrain.data.text_records import TextRecord

TEXT_LOSS_ON = ("all", "completion")


class TextTokenizer(Protocol):
    """What encoding needs of a tokenizer (`pretrained_tokenizer.PretrainedTokenizer` is one)."""

    bos_id: int | None
    eos_id: int | None
    pad_id: int | None
    chat_template: str | None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]: ...

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = False) -> str: ...


class Example(NamedTuple):
    """One tokenized record: `ids`, `loss_mask` (same length; True where predicting ids[i] counts), `where`."""

    ids: list[int]
    loss_mask: list[bool]
    where: str


def encode_records(records: Sequence[TextRecord], tokenizer: TextTokenizer, loss_on: str = "all") -> list[Example]:
    """Every record as an Example (see the module docstring); UserError naming the record for one that cannot be
    encoded, for `loss_on: completion` on text records, and for an unknown `loss_on`."""
    if loss_on not in TEXT_LOSS_ON:
        raise UserError(f"data.loss_on must be one of {list(TEXT_LOSS_ON)}, got {loss_on!r}", BAD_INPUT)
    return [encode_record(record, tokenizer, loss_on) for record in records]


def encode_record(record: TextRecord, tokenizer: TextTokenizer, loss_on: str = "all") -> Example:
    """One record as an Example (see `encode_records`)."""
    if record.kind == "chat":
        return _chat(record, tokenizer, loss_on)
    eos = _eos(tokenizer, record.where)
    if record.kind == "text":
        if loss_on == "completion":
            raise UserError(f"{record.where}: loss_on: completion needs prompt/completion or chat records; this is a "
                            "text record (use loss_on: all)", BAD_INPUT)
        ids = [*_without_final(tokenizer.encode(record.data["text"], add_special_tokens=True), eos), eos]
        return Example(ids, answer_mask([ids], eos, "all"), record.where)
    prompt = _without_final(tokenizer.encode(record.data["prompt"], add_special_tokens=True), eos)
    answer = [*tokenizer.encode(record.data["completion"]), eos]
    return Example(prompt + answer, answer_mask([prompt, answer], eos, loss_on), record.where)


def _eos(tokenizer: TextTokenizer, where: str) -> int:
    if tokenizer.eos_id is None:
        raise UserError(f"{where}: the tokenizer has no EOS token, so a model trained on this data would never learn "
                        "to stop; give the tokenizer one (tokenizer_config.json eos_token)", BAD_INPUT)
    return tokenizer.eos_id


def _without_final(ids: list[int], token: int) -> list[int]:
    return ids[:-1] if ids and ids[-1] == token else ids


def _render(tokenizer: TextTokenizer, messages: list[dict], generation_prompt: bool, where: str) -> str:
    """`messages` rendered by the chat template (the template writes its own special tokens)."""
    try:
        return tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt)
    except UserError as e:  # every error of the template (chat_template.py), with the record it failed on
        raise UserError(f"{where}: {e}", BAD_INPUT) from None


def _chat(record: TextRecord, tokenizer: TextTokenizer, loss_on: str) -> Example:
    if tokenizer.chat_template is None:
        raise UserError(f"{record.where}: a chat record, but the tokenizer has no chat template (a folder's "
                        "tokenizer_config.json chat_template or chat_template.jinja, a GGUF's tokenizer.chat_template, "
                        "which some GGUFs lack): use the model's Hugging Face folder, or prompt/completion records",
                        BAD_INPUT)
    messages = record.data["messages"]
    text = _render(tokenizer, messages, False, record.where)
    if loss_on == "all":
        ids = tokenizer.encode(text)
        return Example(ids, answer_mask([ids], tokenizer.eos_id, "all"), record.where)
    pieces = chat_pieces(messages, text, tokenizer, record.where, record.data.get("completion_from"))
    mask = answer_mask(pieces, tokenizer.eos_id, "completion")  # each assistant turn: up to and with its last EOS
    if not any(mask[1:]):
        raise UserError(f"{record.where}: loss_on: completion, but the conversation has no assistant turn to learn",
                        BAD_INPUT)
    return Example([i for piece in pieces for i in piece], mask, record.where)


def chat_pieces(messages: list[dict[str, Any]], text: str, tokenizer: TextTokenizer, where: str,
                completion_from: int | None = None) -> list[list[int]]:
    """The conversation's tokens as [context, turn, context, turn, ..., context]: `text` (the whole conversation
    rendered) cut at `assistant_cuts`, each piece tokenized on its own (module docstring)."""
    cuts = [0, *assistant_cuts(messages, text, tokenizer, where, completion_from), len(text)]
    return [tokenizer.encode(text[start:end]) for start, end in itertools.pairwise(cuts)]


def assistant_cuts(messages: list[dict[str, Any]], text: str, tokenizer: TextTokenizer, where: str,
                   completion_from: int | None = None) -> list[int]:
    """[before_1, after_1, before_2, after_2, ...]: where each assistant turn starts and ends in `text` (the whole
    conversation rendered), found prefix by prefix (module docstring); with `completion_from` (a conversational
    prompt/completion record) one turn, messages[completion_from:] together. UserError when the template breaks
    the prefix property."""
    cuts: list[int] = []
    turns = ([(completion_from, len(messages))] if completion_from is not None else
             [(i, i + 1) for i, message in enumerate(messages) if message["role"] == "assistant"])
    for i, end in turns:
        before = _render(tokenizer, messages[:i], True, where)
        after = _render(tokenizer, messages[:end], False, where)
        for prefix, what in ((before, "the messages before it with the generation prompt"),
                             (after, "the conversation up to it")):
            if not text.startswith(prefix):
                raise UserError(
                    f"{where}: cannot find assistant message {i} in the conversation: the chat template renders "
                    f"{what} as text that does not begin the whole conversation's (it rewrites earlier turns); "
                    "loss_on: completion needs a template that renders a conversation prefix by prefix (or use "
                    "loss_on: all)", BAD_INPUT)
        if len(before) < (cuts[-1] if cuts else 0) or len(after) < len(before):
            raise UserError(f"{where}: the chat template renders assistant message {i} before the end of the turn "
                            "ahead of it: its tokens cannot be told apart", BAD_INPUT)
        cuts += [len(before), len(after)]
    return cuts
