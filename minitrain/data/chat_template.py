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

A template is a program, so it is also bounded (`_BoundedSandbox`): each render has TIME_LIMIT seconds (checked at
every loop step, call and operator), no string, list or number it builds may pass OUTPUT_LIMIT characters (or
items, or digits), no number handed to a function or filter may pass jinja2's MAX_RANGE, and `include`/`import`/
`extends` have no files to read; on Linux a render may not take MEMORY_LIMIT more memory. Whatever goes wrong
while compiling or rendering is one UserError naming the template's source and the reason; so is a template that
writes nothing for the conversation.

The template sees `messages`, `add_generation_prompt` and the special tokens by name (`bos_token`,
`eos_token`, `unk_token`, `pad_token`), as transformers passes them.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import lru_cache, wraps
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import MAX_RANGE, ImmutableSandboxedEnvironment

from minitrain.common.errors import UserError

TIME_LIMIT = 5.0  # seconds for one conversation
OUTPUT_LIMIT = 10_000_000  # characters (items, digits) of the text and of anything built on the way
MEMORY_LIMIT = 2 << 30  # bytes of address space one render may add (Linux), for what no bound above foresees


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    # Jinja's own tojson escapes < > & for HTML; a prompt is not HTML.
    if indent is not None and not 0 <= indent <= 16:
        raise jinja2.exceptions.TemplateError(f"tojson indent {indent} is outside 0..16")
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _size(value: Any) -> int:
    """Characters, items or decimal digits (about) of what an operator built."""
    if isinstance(value, int):
        return value.bit_length() * 3 // 10
    return len(value) if isinstance(value, str | bytes | list | tuple) else 0


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with a deadline and bounded sizes (see the module docstring)."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    deadline = float("inf")

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise jinja2.exceptions.TemplateError(f"it ran past the time limit ({TIME_LIMIT:g} s)")

    def bounded_iter(self, iterable: Any) -> Any:
        for item in iterable:
            self.tick()
            yield item

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):  # every loop step checks the deadline
            loop.iter = nodes.Call(nodes.EnvironmentAttribute("bounded_iter"), [loop.iter], [], None, None)
        return tree

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self.tick()
        if operator == "%" and isinstance(left, str):
            _bounded_format(left)
        if operator == "*" and isinstance(left, int) and not isinstance(left, bool):
            left, right = right, left
        big = ((operator == "*" and isinstance(right, int) and _size(left) * max(right, 1) > OUTPUT_LIMIT)
               or (operator == "**" and isinstance(left, int) and isinstance(right, int)
               and abs(left) > 1 and right * max(left.bit_length(), 1) > OUTPUT_LIMIT * 3))
        if big:
            raise jinja2.exceptions.TemplateError(f"'{operator}' would build more than {OUTPUT_LIMIT:,} characters")
        result = super().call_binop(context, operator, left, right)
        if _size(result) > OUTPUT_LIMIT:
            raise jinja2.exceptions.TemplateError(f"'{operator}' built more than {OUTPUT_LIMIT:,} characters")
        return result

    def wrap_str_format(self, value: Any) -> Any:
        if isinstance(getattr(value, "__self__", None), str) and value.__name__ in ("format", "format_map"):
            _bounded_format(value.__self__)
        return super().wrap_str_format(value)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        __self.tick()
        _bounded_numbers(args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)


def _bounded_numbers(args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and abs(value) > MAX_RANGE:
            raise jinja2.exceptions.TemplateError(f"the number {value} is larger than {MAX_RANGE:,}")


def _bounded_format(text: str) -> None:
    """A '%' or '{}' format string whose width or precision would write millions of characters is refused."""
    if re.search(r"[%:.][^\s\d]{0,3}\d{7}", text):
        raise jinja2.exceptions.TemplateError(f"the format {text[:40]!r} asks for a width beyond {OUTPUT_LIMIT:,}")


def _bounded_filter(env: _BoundedSandbox, function: Any) -> Any:
    skip = 2 if getattr(function, "jinja_pass_arg", None) else 1  # the context and the value filtered

    @wraps(function)  # keeps jinja_pass_arg
    def bounded(*args: Any, **kwargs: Any) -> Any:
        env.tick()
        _bounded_numbers(args[skip:], kwargs)
        if function.__name__ == "do_format" and isinstance(args[skip - 1], str):
            _bounded_format(args[skip - 1])
        return function(*args, **kwargs)
    return bounded


@contextmanager
def _memory_cap() -> Iterator[None]:
    """The process' address space capped at its present size + MEMORY_LIMIT (RLIMIT_AS), where Linux allows."""
    try:
        import resource
        pages = int(Path("/proc/self/statm").read_text(encoding="ascii").split()[0])
    except (ImportError, OSError):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = pages * os.sysconf("SC_PAGE_SIZE") + MEMORY_LIMIT
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    tighter = soft != resource.RLIM_INFINITY and soft <= cap
    if not tighter:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        if not tighter:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@lru_cache(maxsize=8)
def compile_template(source: str, where: str = "chat template") -> jinja2.Template:
    """The template compiled in the sandbox (cached: a data set renders one template thousands of times)."""
    env = _BoundedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.filters = {name: _bounded_filter(env, f) for name, f in env.filters.items()}
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise UserError(f"{where}: not valid Jinja (line {e.lineno}: {e.message})", 2) from None
    except Exception as e:
        raise UserError(f"{where}: the chat template cannot be compiled ({type(e).__name__}: {e})", 2) from None


def render_chat(source: str, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = False,
                special_tokens: Mapping[str, str | None] | None = None, where: str = "chat template") -> str:
    """The conversation `messages` ([{"role", "content"}, ...]) as the text the template writes.

    `special_tokens` maps `bos_token`, `eos_token`, ... to their strings; `where` names the template's source.
    A template that refuses the conversation (`raise_exception`), fails, runs past its limits or writes nothing
    gives a UserError with the reason.
    """
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise UserError(f"chat messages[{i}]: a message is an object with role and content, got {message!r}")
    template = compile_template(source, where)
    env = template.environment
    env.deadline = time.monotonic() + TIME_LIMIT  # type: ignore[attr-defined]
    try:
        with _memory_cap():
            text = template.render(messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt,
                                   **dict(special_tokens or {}))
    except Exception as e:
        reason = (str(e) if isinstance(e, jinja2.exceptions.TemplateError) else f"{type(e).__name__}: {e}"
                  if not isinstance(e, MemoryError) else f"it needs more than {MEMORY_LIMIT >> 30} GiB more memory")
        raise UserError(f"{where}: the chat template cannot render this conversation ({reason})", 2) from None
    finally:
        env.deadline = float("inf")  # type: ignore[attr-defined]
    if len(text) > OUTPUT_LIMIT:
        raise UserError(f"{where}: the chat template wrote more than {OUTPUT_LIMIT:,} characters", 2)
    if not text:
        raise UserError(f"{where}: the chat template writes nothing for this conversation", 2)
    return text
