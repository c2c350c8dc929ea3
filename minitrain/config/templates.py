"""Templates in config strings: `{{ EXPRESSION }}`, rendered before the schema sees the config.

    name: "verbs-{{ env.USER }}"
    output: {dir: "runs/{{ name }}/{{ date }}-seed{{ seed }}"}
    training: {val_every: "{{ training.total_steps // 10 }}"}
    optimizer: {lr_max: "{{ 1e-3 if model.n_layer <= 2 else 3e-4 }}"}

An expression (minitrain/config/expressions.py) may use

- any key of the config by its dotted path (`model.n_layer`), as written in the file or after `--set`; a key
  left out has its default, and a key of the spec's shape and its minitrain name are the same key
  (`data.loader.batch_size` is `training.batch_size`);
- `name`, `version` and `seed` (root keys; `seed` is training.rng_seed when the root has none);
- `timestamp` (UTC, `20250304T050607Z`), `date` (`2025-03-04`) and `env.VAR` (an environment variable).

A value that is exactly one template takes the expression's value: `"{{ training.batch_size * 2 }}"` is the
integer 16, and a text result (`"{{ env.LR }}"`) is read as a YAML scalar, so `LR=1e-3` fills a number. Inside
other text each value is written as YAML would (`true`, `null`, `0.001`).

Errors, each reported at the key whose template fails: an unknown key (with a suggestion), a reference cycle
(`a: "{{ b }}"`, `b: "{{ a }}"`), an unset environment variable, an environment variable whose name looks like a
secret (`*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*KEY*`: its value would be copied into config.resolved.yaml and
manifest.json) or whose value looks like an access token whatever its name (`hf_...`, minitrain/config/tokens.py),
a result that is not a YAML scalar, and any expression error. Templates are rendered once, in
dependency order; nothing is ever passed to Python's eval.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from typing import Any

from minitrain.config.expressions import ExpressionError, evaluate, parse
from minitrain.config.problems import did_you_mean
from minitrain.config.source import KeyPath, dotted, value_at, walk
from minitrain.config.tokens import looks_like_token, mask_tokens
from minitrain.config.yaml_lines import YamlSyntaxError, parse_scalar

_TEMPLATE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_WHOLE = re.compile(r"^\s*\{\{((?:(?!\}\}).)*)\}\}\s*$", re.DOTALL)
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|KEY|CREDENTIAL", re.IGNORECASE)
BUILTINS = ("name", "version", "seed", "timestamp", "date", "env.VAR")


class TemplateError(ValueError):
    """A template that cannot be rendered; the message says which part and why."""


def has_template(text: str) -> bool:
    return "{{" in text or "}}" in text


def render_text(text: str, value_of: Callable[[str], Any]) -> Any:
    """`text` with each `{{ inside }}` replaced by `value_of(inside)`; a text that is one whole template becomes
    that value itself (a string value read as a YAML scalar)."""
    whole = _WHOLE.match(text)
    if whole:
        value = value_of(whole.group(1))
        if not isinstance(value, str):
            return value
        try:
            return parse_scalar(value)
        except YamlSyntaxError as exc:
            raise TemplateError(f"its value {value[:60]!r} is not a YAML scalar ({exc})") from None
    pieces, last = [], 0
    for match in _TEMPLATE.finditer(text):
        pieces += [_literal(text[last : match.start()]), _as_text(value_of(match.group(1)))]
        last = match.end()
    pieces.append(_literal(text[last:]))
    return "".join(pieces)


def _literal(part: str) -> str:
    if "{{" in part or "}}" in part:
        raise TemplateError("unbalanced '{{' or '}}' (write a template as '{{ name }}')")
    return part


def _as_text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, str | int | float):
        return str(value)
    raise TemplateError(f"a {type(value).__name__} cannot be written inside text; use one key's value")


class Renderer:
    """Renders every template of a config document in place, each once, following references between them.

    `aliases(path)` lists the other names of one key (the spec's and minitrain's); `default(path)` gives the
    value of a key the document holds under none of them, or raises KeyError(message) when it has none.
    """

    def __init__(self, data: dict, env: Mapping[str, str], now: dt.datetime,
                 aliases: Callable[[KeyPath], list[KeyPath]], default: Callable[[KeyPath], Any]) -> None:
        self.data, self.env, self.aliases, self.default = data, env, aliases, default
        self.builtins = {"timestamp": now.strftime("%Y%m%dT%H%M%SZ"), "date": now.strftime("%Y-%m-%d")}
        self.done: set[KeyPath] = set()  # rendered (or failed) keys
        self.failed: dict[KeyPath, str] = {}
        self.stack: list[KeyPath] = []  # keys being rendered, outermost first: a repeat is a cycle

    def render_all(self) -> dict[KeyPath, str]:
        """Render every template; {key path: message} for those that failed."""
        for path in [p for p, value in walk(self.data) if isinstance(value, str) and has_template(value)]:
            self.render_at(path)
        return self.failed

    def render_at(self, path: KeyPath) -> None:
        if path in self.done:
            return
        self.stack.append(path)
        try:
            parent = value_at(self.data, path[:-1])
            parent[path[-1]] = render_text(parent[path[-1]], self.value_of)
        except (TemplateError, ExpressionError) as exc:
            self.failed[path] = str(exc)
        finally:
            self.stack.pop()
            self.done.add(path)

    def value_of(self, inside: str) -> Any:
        """The value of one template's inside (`data.loader.batch_size * 2`)."""
        try:
            return evaluate(parse(inside), self.lookup)
        except ExpressionError as exc:
            raise TemplateError(f"in '{{{{{inside}}}}}': {exc}") from None

    def lookup(self, ref: tuple[str, ...]) -> Any:
        """The value of a reference: a built-in, an environment variable, or a key of the config."""
        if ref[0] == "env":
            return self._env(ref)
        if len(ref) == 1 and ref[0] in self.builtins:
            return self.builtins[ref[0]]
        if ref == ("seed",) and "seed" not in self.data:
            ref = ("training", "rng_seed")
        if ref in (("name",), ("version",)) and self.data.get(ref[0]) is None:
            raise ExpressionError(f"{{{{ {ref[0]} }}}} is used but the config sets no {ref[0]}")
        value = self._key(ref)
        if isinstance(value, dict | list):
            raise ExpressionError(f"{dotted(ref)} is a {'section' if isinstance(value, dict) else 'list'}; "
                                  "name one value in it")
        return value

    def _env(self, ref: tuple[str, ...]) -> str:
        if len(ref) != 2:
            raise ExpressionError("write an environment variable as env.NAME")
        name = ref[1]
        if SECRET_NAME.search(name):
            raise ExpressionError(f"env.{name} looks like a secret, and a config's values are written to "
                                  "config.resolved.yaml and manifest.json; minitrain reads tokens itself "
                                  "(HF_TOKEN for the Hub), never through the config")
        if name not in self.env:
            raise ExpressionError(f"environment variable {name} is not set")
        if looks_like_token(self.env[name]):
            raise ExpressionError(f"env.{name} holds what looks like an access token "
                                  f"({mask_tokens(self.env[name])[:40]}), and a config's values are written to "
                                  "config.resolved.yaml and manifest.json; minitrain reads tokens itself "
                                  "(HF_TOKEN for the Hub), never through the config")
        return self.env[name]

    def _key(self, ref: tuple[str, ...]) -> Any:
        """The value of a config key: as written (under either of its names, its template rendered first), else
        its default."""
        spellings = [ref, *self.aliases(ref)]
        for spelled in spellings:
            try:
                node = value_at(self.data, spelled)
            except KeyError:
                continue
            return self._rendered(spelled, node)
        try:
            return self.default(ref)
        except KeyError as exc:
            if len(ref) == 1 and (hint := did_you_mean(ref[0], [*BUILTINS[:-1], "env"])):
                raise ExpressionError(f"unknown name '{ref[0]}'{hint}") from None
            raise ExpressionError(exc.args[0]) from None

    def _rendered(self, ref: KeyPath, node: Any) -> Any:
        if isinstance(node, str) and has_template(node) and ref not in self.done:
            if self.stack and ref == self.stack[-1]:
                raise ExpressionError(f"{dotted(ref)} refers to itself")
            if ref in self.stack:
                cycle = " → ".join(dotted(p) for p in self.stack[self.stack.index(ref):])
                raise ExpressionError(f"a cycle of references: {cycle} → {dotted(ref)}")
            self.render_at(ref)
        if ref in self.failed:
            raise ExpressionError(f"uses {dotted(ref)}, whose own template fails")
        return value_at(self.data, ref)

