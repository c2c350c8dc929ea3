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


def test_the_library_uses_only_the_names_each_lab_lists():
    """A student's lab file stands in for the library's (minitrain/seam.py), so the rest of minitrain may import
    from it only the names the lab text lists, and only as `from minitrain.x import name`."""
    from minitrain.seam import LAB_PIECES, REPLACEABLE, module_name

    listed = {module_name(path): set(names) for pieces in LAB_PIECES.values() for path, names in pieces.items()}
    assert listed.keys() - {None} == REPLACEABLE.keys()
    for path in module_files():
        relative = "minitrain/" + path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                whole = {alias.name for alias in node.names} & listed.keys()
                assert not whole, f"{relative} imports the lab module {sorted(whole)} whole; import listed names"
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module in listed and REPLACEABLE[node.module] != relative:
                    extra = {alias.name for alias in node.names} - listed[node.module]
                    assert not extra, f"{relative} imports {sorted(extra)} from {node.module}; its lab lists only those"
                as_modules = {f"{node.module}.{alias.name}" for alias in node.names} & listed.keys()
                assert not as_modules, f"{relative} imports the lab module {sorted(as_modules)} whole"


def test_every_lab_module_has_a_reference_with_the_listed_names():
    from minitrain.seam import LAB_PIECES

    root = PACKAGE.parent
    for lab, pieces in LAB_PIECES.items():
        for path, names in pieces.items():
            tree = ast.parse((root / path).read_text(encoding="utf-8"))
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
            assert set(names) <= defined, f"lab {lab}: {path} does not define {sorted(set(names) - defined)}"
