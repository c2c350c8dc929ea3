"""Where each value of a config came from: the file and line, or a `--set` override.

A key path is a tuple such as `("optimizer", "lr_max")` or `("monitoring", "alerts", 2)`; `dotted()` writes it
the way messages show it: `optimizer.lr_max`, `monitoring.alerts[2]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KeyPath = tuple[str | int, ...]


def dotted(path: KeyPath) -> str:
    """`("monitoring", "alerts", 2)` -> `monitoring.alerts[2]`; the empty path is `<root>`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<root>"


@dataclass
class ConfigSource:
    """The config file (None for a dict built in code), its text, the `--set` list and each key's origin.

    `lines` maps a key path to the 1-based line of that key in the file; `origins` maps a key path set on the
    command line to the override that set it (`--set training.batch_size=16`, `--seed 3`).
    """

    path: str | None = None
    text: str | None = None
    overrides: tuple[str, ...] = ()
    lines: dict[KeyPath, int] = field(default_factory=dict)
    origins: dict[KeyPath, str] = field(default_factory=dict)

    def where(self, path: KeyPath) -> str:
        """`file:line`, `--set k=v`, or the file alone, for the key at `path` or its nearest located parent."""
        for end in range(len(path), -1, -1):
            prefix = path[:end]
            if prefix in self.origins:
                return self.origins[prefix]
            if prefix in self.lines:
                return f"{self.path or '<config>'}:{self.lines[prefix]}"
        return self.path or "<config>"
