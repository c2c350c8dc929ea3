"""YAML with line numbers and bounds: PyYAML's safe loader, a map from every key path to its line, and limits
that keep a hostile file from eating the machine.

Fixes over plain `yaml.safe_load`, all about surprises in configs:
- `3e-4` is a float (YAML 1.2 and every user agree; PyYAML's YAML 1.1 rules read it as the string "3e-4"),
- a key given twice in one mapping is reported (PyYAML silently keeps the last one),
- every way a text can fail to be a config is one `YamlSyntaxError` with a line, never another exception:
  control characters, a tag such as `!!python/object`, nesting deeper than `MAX_DEPTH`, an alias that contains
  itself (`a: &x [*x]`), aliases that expand to more than `MAX_NODES` nodes or `MAX_CHARS` characters (the
  "billion laughs": nine levels of nine aliases are 400 bytes of text and 387 million nodes), an integer of more
  than `MAX_INT_DIGITS` digits, a text longer than `MAX_CHARS`.

The bounds are checked on the composed node graph, where an alias is one shared node, before anything is
constructed: the check costs one visit per distinct node, however much the aliases would expand.
Only safe tags are constructed: no Python objects, ever.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from minitrain.common.errors import UserError
from minitrain.common.io import read_text
from minitrain.config.source import KeyPath

MAX_CHARS = 1 << 20  # a config is a few kB; a lock file adds a line per data file
MAX_DEPTH = 32  # the deepest key of a config is 4 levels down
MAX_NODES = 20_000  # after expanding aliases
MAX_INT_DIGITS = 30  # 2**63 has 19 digits; more is a typo or an attack (Python refuses ints over 4300 digits)

_INT_TAG = "tag:yaml.org,2002:int"


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads YAML 1.2 floats such as 1e-8 or 3E+2, and stops scanning at MAX_DEPTH levels.

    The depth is counted while scanning because PyYAML's scanner slows down quadratically with it (3,000
    nested `[` take it 16 s) and its composer recurses once per level.
    """

    def fetch_flow_collection_start(self, TokenClass: type) -> None:  # `[` or `{`
        self._check_depth(self.flow_level)
        super().fetch_flow_collection_start(TokenClass)

    def add_indent(self, column: int) -> bool:  # a block mapping or sequence one level deeper
        self._check_depth(len(self.indents))
        return super().add_indent(column)

    def _check_depth(self, depth: int) -> None:
        if depth >= MAX_DEPTH:
            raise yaml.scanner.ScannerError(None, None, f"nested more than {MAX_DEPTH} levels deep", self.get_mark())


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
    """The text is not YAML a config can be made of; `line` is 1-based (0 when unknown)."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def parse_yaml(text: str) -> ParsedYaml:
    """Parse one YAML document safely and within the bounds, recording where every key and list item sits."""
    if len(text) > MAX_CHARS:
        raise YamlSyntaxError(f"{len(text)} characters is more than a config may have ({MAX_CHARS})", 0)
    try:
        loader = _Loader(text)  # checks for control characters straight away
        try:
            node = loader.get_single_node()
            if node is not None:
                _check_bounds(node, 1, {}, set())
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, text) from None
    parsed = ParsedYaml(data)
    if node is not None:
        _walk(node, (), parsed)
    return parsed


def read_yaml_text(path: str | os.PathLike, what: str = "config file") -> str:
    """The text of the YAML file at `path`: a regular file of at most MAX_CHARS bytes of UTF-8 (`io.read_text`).

    Anything else is one UserError (exit code 2) saying what the path is: missing, a dangling link, a link loop,
    a folder, a FIFO or device (opened without blocking, so `/dev/zero` or a pipe nobody writes to cannot hang or
    fill the memory), too large, or not UTF-8 text.
    """
    return read_text(path, what, MAX_CHARS)


def load_yaml_file(path: str | os.PathLike, what: str = "config file") -> Any:
    """The data of the YAML file at `path` (read by `read_yaml_text`, parsed by `parse_yaml`); one UserError
    (exit code 2), `PATH:LINE: not valid YAML (...)`, for a text that is not YAML within the bounds."""
    text = read_yaml_text(path, what)
    try:
        return parse_yaml(text).data
    except YamlSyntaxError as exc:
        where = f"{path}:{exc.line}" if exc.line else str(path)
        raise UserError(f"{where}: not valid YAML ({exc})", 2) from None


def parse_scalar(text: str) -> Any:
    """A `--set` value read the way the same text in the file would be (`1e-3` float, `true` bool, `x` str)."""
    return parse_yaml(text).data if text.strip() else None


def _syntax_error(exc: yaml.YAMLError, text: str) -> YamlSyntaxError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        return YamlSyntaxError(exc.problem or exc.context or "bad YAML", mark.line + 1 if mark else 0)
    if isinstance(exc, yaml.reader.ReaderError):  # a control character; `position` counts characters
        line = text.count("\n", 0, exc.position) + 1 if isinstance(exc.position, int) else 0
        return YamlSyntaxError(f"character #x{exc.character:04x} is not allowed in YAML (a binary file?)", line)
    return YamlSyntaxError(str(exc).splitlines()[0], 0)


def _check_bounds(node: yaml.Node, depth: int, seen: dict[int, tuple[int, int, int]], path: set[int]) -> tuple:
    """(nodes, characters, height) of `node` with its aliases expanded; YamlSyntaxError past a bound.

    `seen` memoises shared (aliased) nodes, so each distinct node is visited once; `path` holds the nodes on the
    way down, and meeting one of them again means an alias inside its own anchor.
    """
    line = node.start_mark.line + 1
    key = id(node)
    if key in path:
        raise YamlSyntaxError("an alias refers to a node that contains it (a structure without end)", line)
    if key not in seen:
        if isinstance(node, yaml.ScalarNode):
            if node.tag == _INT_TAG and len(node.value) > MAX_INT_DIGITS:
                raise YamlSyntaxError(f"an integer of {len(node.value)} digits (at most {MAX_INT_DIGITS})", line)
            seen[key] = (1, len(node.value), 0)
        else:
            if depth > MAX_DEPTH:
                raise YamlSyntaxError(f"nested more than {MAX_DEPTH} levels deep", line)
            path.add(key)
            children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
            sizes = [_check_bounds(child, depth + 1, seen, path) for child in children]
            path.discard(key)
            seen[key] = (1 + sum(s[0] for s in sizes), sum(s[1] for s in sizes), 1 + max((s[2] for s in sizes),
                                                                                            default=0))
    nodes, chars, height = seen[key]
    if depth + height > MAX_DEPTH + 1:
        raise YamlSyntaxError(f"nested more than {MAX_DEPTH} levels deep", line)
    if nodes > MAX_NODES or chars > MAX_CHARS:
        raise YamlSyntaxError(f"aliases expand this to {nodes} values and {chars} characters (at most {MAX_NODES} "
                              f"and {MAX_CHARS})", line)
    return seen[key]


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
