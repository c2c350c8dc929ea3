"""Chat templates: the Jinja program a model ships to turn a conversation into the one string it was trained on.

A chat model does not see `[{"role": "user", "content": "hola"}]`; it sees text such as

    <|im_start|>user
    hola<|im_end|>
    <|im_start|>assistant

and the template (`tokenizer_config.json`'s `chat_template`, or a GGUF's `tokenizer.chat_template`) is what
writes it. Templates come from strangers on the Hub, so they run in Jinja's *immutable sandbox*: no attribute
of Python's internals, no mutation of the messages. The environment is set up exactly as `transformers` sets
up its own (`utils/chat_template_utils.py`), so the same template gives the same string here and there:

    trim_blocks, lstrip_blocks     a `{% ... %}` line leaves no newline or indent behind
    loopcontrols                   `{% break %}` and `{% continue %}`
    raise_exception(msg)           a template's own error ("Conversation roles must alternate...")
    tojson                         json.dumps without HTML escaping, non-ASCII kept
    strftime_now(fmt)              today's date, for templates that print it

The template sees `messages`, `add_generation_prompt` and the special tokens by name (`bos_token`,
`eos_token`, `unk_token`, `pad_token`), as transformers passes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from minitrain.common.errors import UserError


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    # Jinja's own tojson escapes < > & for HTML; a prompt is not HTML.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@lru_cache(maxsize=8)
def compile_template(source: str) -> jinja2.Template:
    """The template compiled in the sandbox (cached: a data set renders one template thousands of times)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise UserError(f"chat template: not valid Jinja (line {e.lineno}: {e.message})", 2) from None


def render_chat(source: str, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = False,
                special_tokens: Mapping[str, str | None] | None = None) -> str:
    """The conversation `messages` ([{"role", "content"}, ...]) as the text the template writes.

    `special_tokens` maps `bos_token`, `eos_token`, ... to their strings. A template that refuses the
    conversation (`raise_exception`) or fails gives a UserError with its message.
    """
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise UserError(f"chat messages[{i}]: a message is an object with role and content, got {message!r}")
    template = compile_template(source)
    try:
        return template.render(messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt,
                               **dict(special_tokens or {}))
    except jinja2.exceptions.TemplateError as e:
        raise UserError(f"chat template: {e}", 2) from None
