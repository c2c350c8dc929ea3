"""Lower layers never import higher ones: the CLI and its commands are the top floor, configuration is pure
configuration, and the core (tensor, functional, kernels) knows nothing of models, runs or the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "minitrain"


def imported_modules(path: Path) -> set[str]:
    """Every `minitrain...` module a file imports, at any depth (lazy imports inside functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.startswith("minitrain")}


def is_within(module: str, packages: tuple[str, ...]) -> bool:
    """`module` is one of `packages` or inside one (minitrain.clip is not inside minitrain.cli)."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def module_files(under: str = "") -> list[Path]:
    return sorted((PACKAGE / under).rglob("*.py"))


def test_nothing_below_the_cli_imports_the_commands_or_the_cli():
    for path in module_files():
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "commands" or relative.name == "cli.py":
            continue
        bad = {m for m in imported_modules(path) if is_within(m, ("minitrain.commands", "minitrain.cli"))}
        assert not bad, f"{relative} imports {sorted(bad)} from the top floor"


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [
        ("config", ("minitrain.run", "minitrain.loop", "minitrain.hub")),
        ("kernels", ("minitrain.model", "minitrain.run", "minitrain.nn", "minitrain.config")),
    ],
)
def test_a_layer_does_not_reach_up(layer, forbidden):
    for path in module_files(layer):
        bad = {m for m in imported_modules(path) if is_within(m, forbidden)}
        assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"
