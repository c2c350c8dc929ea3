"""The shapes a text record comes in, each read into one of three kinds: text, prompt_completion or chat.

A record's shape is told by its keys (the `marks` of a `Shape`); what a shape reads becomes a record of its kind,
which is all that tokenizing (`text_examples.py`) sees:

    shape                   a record holds                                  read as
    text                    text (a non-empty string)                       text {"text"}
    prompt_completion       prompt (a string), completion (non-empty)       prompt_completion {"prompt", "completion"}
    chat                    messages: a non-empty list of {role, content},  chat {"messages"}: the loss learns each
                            role system (first message only), user or       assistant message
                            assistant, content a string
    sharegpt                conversations: a non-empty list of {from,       chat: from human → user, gpt → assistant,
                            value}, from human, gpt or system (user and     system → system (TRL's and axolotl's
                            assistant kept as they are)                     mapping), value → content
    alpaca                  instruction, output (non-empty strings),        chat: user = instruction, then a blank
                            input (a string, optional)                      line and input when input is not blank;
                                                                            assistant = output
    chat_prompt_completion  prompt, completion: lists of {role, content}    chat {"messages": prompt + completion,
                            (TRL's conversational prompt/completion), the   "completion_from": len(prompt)}: the
                            completion's all assistant messages             loss learns the completion as one span
    preference              chosen and rejected (with or without prompt)    refused: no preference training yet
    unpaired_preference     prompt, completion and a true/false label      refused: no preference training yet

Alpaca's layout: the Stanford Alpaca prompt puts the input after the instruction, a blank line between them; the
same order and separation are kept, without its "### Instruction:" / "### Response:" headers, since the base's chat
template frames the turn (so Alpaca data, like the other chat shapes, needs a base with a chat template).

Other keys (an id, a source, a score) are ignored; the keys of two shapes in one record (`text` and `messages`) are
an error rather than a guess, and a row with `chosen`/`rejected` is refused whatever else it holds. A shape is a
record of `SHAPES` (tests/test_registries.py reads each one's `example`); no key name is compared elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from minitrain.common.io import json_type
from minitrain.common.registry import Registry

ROLES = ("system", "user", "assistant")
SHAREGPT_ROLES = {"human": "user", "gpt": "assistant", "system": "system", "user": "user", "assistant": "assistant"}
PREFERENCE = ("no preference training yet (DPO, ORPO, KTO): minitrain fine-tunes on one answer per prompt; keep "
              "the chosen answer as a completion or an assistant message to train on it")


class Malformed(Exception):
    """Why a parsed record is not a record (the caller adds where it is)."""


class Shape(NamedTuple):
    """One record shape: its `name`, the `marks` (keys) that tell it and must all be present, the `kind` it is read
    as (None: refused, `read` raising why), `read(obj, tabular)` → the kind's data, `claims(obj)` for shapes that
    share marks (a string prompt or a list of messages), and an `example` (docs, tests)."""

    name: str
    marks: tuple[str, ...]
    kind: str | None
    read: Callable[[dict[str, Any], bool], dict[str, Any]]
    example: dict[str, Any]
    claims: Callable[[dict[str, Any]], bool] = lambda obj: True


def check_string(value: Any, what: str, empty: bool = True) -> str:
    """`value` when it is text (non-blank unless `empty`); Malformed naming `what` otherwise."""
    if not isinstance(value, str):
        raise Malformed(f"{what} must be a string, got {json_type(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:  # JSON's "\ud800" escape decodes to a lone surrogate, which is no text
        raise Malformed(f"{what} holds a lone surrogate {value[e.start]!r}, which is not text") from None
    if not empty and not value.strip():
        raise Malformed(f"{what} is empty")
    return value


def messages_of(turns: Any, key: str, tabular: bool, names: tuple[str, str] = ("role", "content"),
                roles: dict[str, str] | None = None, start: int = 0) -> list[dict[str, str]]:
    """[{role, content}] of the list `turns` under `key`, each turn an object of exactly the keys `names` (role,
    content; ShareGPT's from, value), its role one of `roles` (a mapping to ROLES; default ROLES themselves), a
    system message only first (at position `start` of the whole conversation); Malformed naming `key[i]`."""
    role_key, content_key = names
    roles = roles or {role: role for role in ROLES}
    if not isinstance(turns, list) or not turns:
        raise Malformed(f"{key!r} must be a non-empty list of {{{role_key}, {content_key}}} objects, got "
                        f"{json_type(turns) if turns != [] else 'an empty list'}")
    checked = []
    for i, turn in enumerate(turns):
        where = f"{key}[{i}]"
        if not isinstance(turn, dict):
            raise Malformed(f"{where} must be an object {{{role_key}, {content_key}}}, got {json_type(turn)}")
        if tabular:
            turn = {name: value for name, value in turn.items() if value is not None}
        if set(turn) != {role_key, content_key}:
            raise Malformed(f"{where} must have exactly the keys {role_key} and {content_key}, got {sorted(turn)}")
        role = turn[role_key]
        if not isinstance(role, str) or role not in roles:
            raise Malformed(f"{where}: {role_key} {role!r} is not one of {', '.join(roles)}")
        if roles[role] == "system" and start + i > 0:
            raise Malformed(f"{where}: a system message may only come first")
        checked.append({"role": roles[role], "content": check_string(turn[content_key], f"{where}: {content_key}")})
    return checked


def _text(obj: dict[str, Any], tabular: bool) -> dict[str, Any]:
    return {"text": check_string(obj["text"], "'text'", empty=False)}


def _prompt_completion(obj: dict[str, Any], tabular: bool) -> dict[str, Any]:
    return {"prompt": check_string(obj["prompt"], "'prompt'"),
            "completion": check_string(obj["completion"], "'completion'", empty=False)}


def _chat(obj: dict[str, Any], tabular: bool) -> dict[str, Any]:
    return {"messages": messages_of(obj["messages"], "messages", tabular)}


def _sharegpt(obj: dict[str, Any], tabular: bool) -> dict[str, Any]:
    return {"messages": messages_of(obj["conversations"], "conversations", tabular, ("from", "value"),
                                    SHAREGPT_ROLES)}


def _alpaca(obj: dict[str, Any], tabular: bool) -> dict[str, Any]:
    instruction = check_string(obj["instruction"], "'instruction'", empty=False)
    extra = check_string(obj.get("input", ""), "'input'")
    user = f"{instruction}\n\n{extra}" if extra.strip() else instruction
    return {"messages": [{"role": "user", "content": user},
                         {"role": "assistant", "content": check_string(obj["output"], "'output'", empty=False)}]}


def _chat_prompt_completion(obj: dict[str, Any], tabular: bool) -> dict[str, Any]:
    prompt = messages_of(obj["prompt"], "prompt", tabular)
    completion = messages_of(obj["completion"], "completion", tabular, start=len(prompt))
    spoken = next((i for i, message in enumerate(completion) if message["role"] != "assistant"), None)
    if spoken is not None:
        raise Malformed(f"completion[{spoken}]: role {completion[spoken]['role']!r}: a completion is the "
                        "assistant's messages (the prompt holds the others)")
    return {"messages": prompt + completion, "completion_from": len(prompt)}


def _refused(obj: dict[str, Any], tabular: bool) -> dict[str, Any]:
    keys = ", ".join(sorted(key for key in ("prompt", "chosen", "rejected", "completion", "label") if key in obj))
    raise Malformed(f"a preference record ({keys}): {PREFERENCE}")


def _listed(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("prompt"), list) or isinstance(obj.get("completion"), list)


_USER = {"role": "user", "content": "Conjuga «vender»."}
_ANSWER = {"role": "assistant", "content": "vendo"}
SHAPES: Registry[Shape] = Registry("record shape", [
    Shape("preference", ("chosen", "rejected"), None, _refused, {"prompt": "2 + 2 =", "chosen": " 4",
                                                                  "rejected": " 5"}),
    Shape("unpaired_preference", ("prompt", "completion", "label"), None, _refused,
          {"prompt": "2 + 2 =", "completion": " 5", "label": False},
          lambda obj: isinstance(obj.get("label"), bool) and "completion" in obj),
    Shape("text", ("text",), "text", _text, {"text": "Érase una vez..."}),
    Shape("prompt_completion", ("prompt", "completion"), "prompt_completion", _prompt_completion,
          {"prompt": "2 + 2 =", "completion": " 4"}, lambda obj: not _listed(obj)),
    Shape("chat_prompt_completion", ("prompt", "completion"), "chat", _chat_prompt_completion,
          {"prompt": [_USER], "completion": [_ANSWER]}, _listed),
    Shape("chat", ("messages",), "chat", _chat, {"messages": [_USER, _ANSWER]}),
    Shape("sharegpt", ("conversations",), "chat", _sharegpt,
          {"conversations": [{"from": "human", "value": "Conjuga «vender»."}, {"from": "gpt", "value": "vendo"}]}),
    Shape("alpaca", ("instruction", "output"), "chat", _alpaca,
          {"instruction": "Conjuga el verbo.", "input": "vender", "output": "vendo"}),
])


def parse_record(obj: Any, tabular: bool = False) -> tuple[Shape, dict[str, Any]]:
    """(shape, its kind's data) of one parsed record; `Malformed` saying what is wrong (module docstring).
    `tabular`: a null is an absent key (a table has every column in every row)."""
    if not isinstance(obj, dict):
        raise Malformed(f"expected a JSON object, got {json_type(obj)}")
    if tabular:
        obj = {key: value for key, value in obj.items() if value is not None}
    found = [shape for shape in SHAPES.values() if any(key in obj for key in shape.marks) and shape.claims(obj)]
    for refused in (shape for shape in found if shape.kind is None):
        refused.read(obj, tabular)  # raises why
    if not found:
        known = dict.fromkeys(" + ".join(shape.marks) for shape in SHAPES.values() if shape.kind is not None)
        raise Malformed(f"holds none of the keys {', '.join(known)} (its keys: {sorted(obj)})")
    if len(found) > 1:
        keys = sorted({key for shape in found for key in shape.marks if key in obj})
        raise Malformed(f"holds keys of two shapes of record ({', '.join(keys)}): keep the keys of one of "
                        f"{', '.join(shape.name for shape in found)}")
    shape = found[0]
    missing = [key for key in shape.marks if key not in obj]
    if missing:
        present = next(key for key in shape.marks if key in obj)
        raise Malformed(f"has {present!r} but no {missing[0]!r}")
    return shape, shape.read(obj, tabular)
