"""YAML with line numbers: PyYAML's safe loader, plus a map from every key path to its line.

Two fixes over plain `yaml.safe_load`, both about silent surprises in configs:
- `3e-4` is a float (YAML 1.2 and every user agree; PyYAML's YAML 1.1 rules read it as the string "3e-4"),
- a key given twice in one mapping is reported (PyYAML silently keeps the last one).
Only safe tags are constructed: no Python objects, ever.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from minitrain.config.source import KeyPath


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads YAML 1.2 floats such as 1e-8 or 3E+2."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


@dataclass
class ParsedYaml:
    """The document (`data`), the 1-based line of each key (`lines`) and keys given twice (`duplicates`)."""

    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)
    duplicates: list[tuple[KeyPath, int, int]] = field(default_factory=list)  # (path, first line, second)


class YamlSyntaxError(ValueError):
    """The text is not YAML; `line` is 1-based (0 when unknown)."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def parse_yaml(text: str) -> ParsedYaml:
    """Parse one YAML document safely, recording where every mapping key and list item sits."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        raise YamlSyntaxError(f"{exc.problem or exc.context or 'bad YAML'}", line) from None
    except yaml.YAMLError as exc:  # e.g. an unknown tag such as !!python/object
        raise YamlSyntaxError(str(exc).splitlines()[0], 0) from None
    finally:
        loader.dispose()
    parsed = ParsedYaml(data)
    if node is not None:
        _walk(node, (), parsed)
    return parsed


def parse_scalar(text: str) -> Any:
    """A `--set` value read the way the same text in the file would be (`1e-3` float, `true` bool, `x` str)."""
    return parse_yaml(text).data if text.strip() else None


def _walk(node: yaml.Node, path: KeyPath, parsed: ParsedYaml) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                parsed.duplicates.append(((*path, key), seen[key], line))
            seen[key] = line
            parsed.lines[(*path, key)] = line
            _walk(value_node, (*path, key), parsed)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            parsed.lines[(*path, index)] = item.start_mark.line + 1
            _walk(item, (*path, index), parsed)
