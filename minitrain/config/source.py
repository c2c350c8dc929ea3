"""Where each value of a config came from: the file and line, or a `--set` override.

A key path is a tuple such as `("optimizer", "lr_max")` or `("monitoring", "alerts", 2)`; `dotted()` writes it
the way messages show it: `optimizer.lr_max`, `monitoring.alerts[2]`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

KeyPath = tuple[str | int, ...]


def dotted(path: KeyPath) -> str:
    """`("monitoring", "alerts", 2)` -> `monitoring.alerts[2]`; the empty path is `<root>`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<root>"


def value_at(data: Any, path: KeyPath) -> Any:
    """The value at `path` in nested dicts and lists; KeyError when it is not there."""
    for part in path:
        found = (isinstance(data, dict) and part in data) or (
            isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data))
        if not found:
            raise KeyError(part)
        data = data[part]
    return data


def paths_matching(data: Any, pattern: KeyPath, prefix: KeyPath = ()) -> list[KeyPath]:
    """The paths in `data` that match `pattern` ("*" for every item of a list)."""
    if not pattern:
        return [prefix]
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        items = range(len(data)) if isinstance(data, list) else ()
        return [p for i in items for p in paths_matching(data[i], rest, (*prefix, i))]
    if isinstance(data, dict) and head in data:
        return paths_matching(data[head], rest, (*prefix, head))
    return []


def walk(node: Any, path: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    """(path, value) of every mapping key and list item below `node`, in document order, each after the items
    below it (so a caller may remove what it was given)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in list(items):
        yield from walk(value, (*path, key))
        yield (*path, key), value


@dataclass
class ConfigSource:
    """The config file (None for a dict built in code), its text, the `--set` list and each key's origin.

    `lines` maps a key path to the 1-based line of that key in the file; `origins` maps a key path set on the
    command line to the override that set it (`--set training.batch_size=16`, `--seed 3`). `renamed` maps a
    minitrain key to the spec key the user wrote for it (`training.batch_size` → `data.loader.batch_size`,
    minitrain/config/spec_shape.py), and `notes` lists the keys accepted with no effect. `warnings` are what every
    command that loads the config prints (to stderr) before it goes on: a value that changes nothing, a drawn seed.
    """

    path: str | None = None
    text: str | None = None
    overrides: tuple[str, ...] = ()
    lines: dict[KeyPath, int] = field(default_factory=dict)
    origins: dict[KeyPath, str] = field(default_factory=dict)
    renamed: dict[KeyPath, KeyPath] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    drawn_seed: int | None = None  # `seed: null`'s seed, drawn at load (a sweep draws once for all its trials)

    def spelled(self, path: KeyPath) -> KeyPath:
        """`path` as the user wrote it: under a moved spec key's own name (the longest renamed prefix wins)."""
        for end in range(len(path), 0, -1):
            if path[:end] in self.renamed:
                return self.renamed[path[:end]] + path[end:]
        return path

    def spell_message(self, message: str) -> str:
        """`message` with each minitrain key the user wrote under its spec name called by that name."""
        for home, spelled in self.renamed.items():
            if home != spelled:
                name = dotted(spelled)
                pattern = r"(?<![\w.])" + re.escape(dotted(home)) + r"(?![\w\[])"
                message = re.sub(pattern, lambda _, name=name: name, message)
        return message

    def where(self, path: KeyPath) -> str:
        """`file:line`, `--set k=v`, or the file alone, for the key at `path` or its nearest located parent."""
        path = self.spelled(path)
        for end in range(len(path), -1, -1):
            prefix = path[:end]
            if prefix in self.origins:
                return self.origins[prefix]
            if prefix in self.lines:
                return f"{self.path or '<config>'}:{self.lines[prefix]}"
        return self.path or "<config>"
