"""Text records (`text_records.py`) to token examples: ids and a loss mask, with the base model's own tokenizer.

Each record becomes an `Example(ids, loss_mask, where)`: `loss_mask[i]` is True when predicting `ids[i]` from
`ids[:i]` counts in the loss (so `loss_mask[0]` is always False: nothing predicts the first token). `packing.pack`
turns examples into (N, T) arrays with input = ids[:-1], target = ids[1:], loss mask = loss_mask[1:].

    kind                ids                                                       loss_on: completion counts
    text                encode(text, add_special_tokens=True) + [EOS]             (refused: there is no completion)
    prompt_completion   encode(prompt, add_special_tokens=True)                   the completion's tokens and EOS
                        + encode(completion) + [EOS]
    chat                encode(apply_chat_template(messages))                     each assistant turn: its content
                                                                                  and its end token

`add_special_tokens=True` lets the tokenizer put its own BOS where its model expects one (Llama: yes, GPT-2 and
SmolLM2: no); an EOS it already appends is not doubled. The prompt and the completion are tokenized separately, so
the boundary between them is exact. With `loss_on: all` every token but the first counts.

Chat: the assistant turns are found by rendering the conversation prefix by prefix, as TRL and torchtune do. For
an assistant message i, `before` = the tokens of messages[:i] with the generation prompt, `after` = those of
messages[:i+1]; both must be a prefix of the whole conversation's tokens, and the turn is tokens len(before) ..
len(after), cut after its last EOS when it holds one (ChatML's `<|im_end|>` then `\\n`: the newline after the end
token is the template's, not the answer's). A template for which the prefix property fails (one that rewrites
earlier turns, as those that drop past reasoning do) is refused with the record's place: the masks would be wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from minitrain.common.errors import BAD_INPUT, UserError
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
        return Example(ids, [False] + [True] * (len(ids) - 1), record.where)
    prompt = _without_final(tokenizer.encode(record.data["prompt"], add_special_tokens=True), eos)
    answer = [*tokenizer.encode(record.data["completion"]), eos]
    ids = prompt + answer
    if loss_on == "all":
        return Example(ids, [False] + [True] * (len(ids) - 1), record.where)
    mask = [False] * len(prompt) + [True] * len(answer)
    mask[0] = False  # a completion with no prompt tokens before it: its first token is still predicted by nothing
    return Example(ids, mask, record.where)


def _eos(tokenizer: TextTokenizer, where: str) -> int:
    if tokenizer.eos_id is None:
        raise UserError(f"{where}: the tokenizer has no EOS token, so a model trained on this data would never learn "
                        "to stop; give the tokenizer one (tokenizer_config.json eos_token)", BAD_INPUT)
    return tokenizer.eos_id


def _without_final(ids: list[int], token: int) -> list[int]:
    return ids[:-1] if ids and ids[-1] == token else ids


def _render(tokenizer: TextTokenizer, messages: list[dict], generation_prompt: bool, where: str) -> list[int]:
    """The tokens of `messages` rendered by the chat template (the template writes its own special tokens)."""
    try:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt)
    except UserError as e:
        raise UserError(f"{where}: {e}", BAD_INPUT) from None
    except Exception as e:  # jinja2's errors, and any template's `raise_exception(...)`, are the template's message
        raise UserError(f"{where}: the chat template cannot render this conversation ({type(e).__name__}: {e})",
                        BAD_INPUT) from None
    return tokenizer.encode(text)


def _chat(record: TextRecord, tokenizer: TextTokenizer, loss_on: str) -> Example:
    if tokenizer.chat_template is None:
        raise UserError(f"{record.where}: a chat record, but the tokenizer has no chat template "
                        "(tokenizer_config.json chat_template)", BAD_INPUT)
    messages = record.data["messages"]
    ids = _render(tokenizer, messages, False, record.where)
    if loss_on == "all":
        return Example(ids, [False] + [True] * (len(ids) - 1), record.where)
    mask = [False] * len(ids)
    for start, end in assistant_spans(messages, ids, tokenizer, record.where):
        mask[start:end] = [True] * (end - start)
    mask[0] = False
    if not any(mask):
        raise UserError(f"{record.where}: loss_on: completion, but the conversation has no assistant turn to learn",
                        BAD_INPUT)
    return Example(ids, mask, record.where)


def assistant_spans(
    messages: list[dict[str, Any]], ids: list[int], tokenizer: TextTokenizer, where: str
) -> list[tuple[int, int]]:
    """[(start, end)] token spans of the assistant turns in `ids` (the whole conversation's tokens), each its content
    and end token, found prefix by prefix (module docstring); UserError when the template breaks the prefix
    property or renders an assistant turn as nothing."""
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = _render(tokenizer, messages[:i], True, where)
        after = _render(tokenizer, messages[: i + 1], False, where)
        for prefix, what in ((before, "the messages before it with the generation prompt"),
                             (after, "the conversation up to it")):
            if ids[: len(prefix)] != prefix:
                raise UserError(
                    f"{where}: cannot find assistant message {i}'s tokens: the chat template renders {what} as tokens "
                    "that do not begin the whole conversation's tokens (it rewrites earlier turns); loss_on: "
                    "completion needs a template that renders a conversation prefix by prefix (or use loss_on: all)",
                    BAD_INPUT)
        start, end = len(before), len(after)
        turn = ids[start:end]
        if tokenizer.eos_id is not None and tokenizer.eos_id in turn:
            end = start + len(turn) - turn[::-1].index(tokenizer.eos_id)
        if end <= start:
            raise UserError(f"{where}: the chat template renders assistant message {i} as no tokens", BAD_INPUT)
        spans.append((start, end))
    return spans
