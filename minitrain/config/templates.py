"""Templates in config strings: `{{ name }}`, `{{ version }}`, `{{ timestamp }}`, `{{ date }}`, `{{ seed }}`,
`{{ env.VAR }}`.

The grammar is deliberately tiny, and nothing is ever evaluated:

    template   := "{{" space* variable space* "}}"
    variable   := identifier | "env." identifier          identifier := [A-Za-z_][A-Za-z0-9_]*

A regular expression finds each `{{ ... }}`; its inside must match `variable` or it is an error, as are an
unknown variable, an unset environment variable, and a stray `{{` or `}}`. A value that is exactly one template
(`lr_max: "{{ env.LR }}"`) is read back as a YAML scalar, so it can fill a number field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from minitrain.config.problems import suggest
from minitrain.config.yaml_lines import parse_scalar

_TEMPLATE = re.compile(r"\{\{(.*?)\}\}")
_VARIABLE = re.compile(r"^\s*(?:(env)\.)?([A-Za-z_][A-Za-z0-9_]*)\s*$")
_WHOLE = re.compile(r"^\s*\{\{[^{}]*\}\}\s*$")

VARIABLES = ("name", "version", "timestamp", "date", "seed")


class TemplateError(ValueError):
    """A template that cannot be rendered; the message says which part and why."""


def has_template(text: str) -> bool:
    return "{{" in text or "}}" in text


def render(text: str, variables: Mapping[str, str | None], env: Mapping[str, str]) -> str:
    """Replace every `{{ ... }}` in `text`. `variables` maps the names in VARIABLES to values (None: unset)."""
    pieces: list[str] = []
    last = 0
    for match in _TEMPLATE.finditer(text):
        pieces.append(_literal(text[last : match.start()]))
        pieces.append(_value(match.group(1), variables, env))
        last = match.end()
    pieces.append(_literal(text[last:]))
    return "".join(pieces)


def render_value(text: str, variables: Mapping[str, str | None], env: Mapping[str, str]) -> Any:
    """`render`, then a value that was one whole template is read as a YAML scalar (`"{{ seed }}"` -> 42)."""
    rendered = render(text, variables, env)
    return parse_scalar(rendered) if _WHOLE.match(text) else rendered


def _literal(part: str) -> str:
    if "{{" in part or "}}" in part:
        raise TemplateError("unbalanced '{{' or '}}' (write a template as '{{ name }}')")
    return part


def _value(inside: str, variables: Mapping[str, str | None], env: Mapping[str, str]) -> str:
    match = _VARIABLE.match(inside)
    if match is None:
        raise TemplateError(
            f"'{{{{{inside}}}}}' is not a template variable; only {', '.join(VARIABLES)} and env.VAR exist"
            " (no expressions)"
        )
    namespace, name = match.groups()
    if namespace == "env":
        if name not in env:
            raise TemplateError(f"environment variable {name} is not set (used as {{{{ env.{name} }}}})")
        return env[name]
    if name in VARIABLES and name not in variables:
        raise TemplateError(
            f"{{{{ {name} }}}} cannot be used in name, version or training.rng_seed (they are rendered first)"
        )
    if name not in variables:
        close = suggest(name, list(variables))
        hint = f" — did you mean '{close}'?" if close else f"; known: {', '.join(VARIABLES)}, env.VAR"
        raise TemplateError(f"unknown template variable '{name}'{hint}")
    value = variables[name]
    if value is None:
        raise TemplateError(f"{{{{ {name} }}}} is used but the config sets no {name}")
    return value
