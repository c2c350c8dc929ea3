"""The floors of minitrain (docs/architecture.md): a module imports only from its own floor or lower ones, and no
import cycle joins two files. The table of floors is read from the docs, so the docs and the rule cannot drift."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "minitrain"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def floors() -> dict[str, int]:
    """{"minitrain.nn": 3, ...}: each package or module of the table in docs/architecture.md, with its floor."""
    table = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        if match := re.match(r"\| (\d+) \w+ \| (.+?) \|", line):
            for name in re.findall(r"`(minitrain[\w.]*)`", match.group(2)):
                table[name] = int(match.group(1))
    return table


def module_name(path: Path) -> str:
    parts = ["minitrain", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """Every minitrain module a file imports, at any depth (lazy imports inside functions and TYPE_CHECKING blocks
    included); `from minitrain.x import y` counts as importing `minitrain.x.y` when that is a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else node.module)
    return {name for name in found if name == "minitrain" or name.startswith("minitrain.")}


def floor_of(module: str, table: dict[str, int]) -> int:
    """The floor of the longest table entry that is `module` or a package holding it."""
    # The bare package `minitrain` (its __init__.py) owns only itself: an unlisted module has no floor.
    owners = [name for name in table if module == name or (name != "minitrain" and module.startswith(name + "."))]
    assert owners, f"{module} has no floor in docs/architecture.md"
    return table[max(owners, key=len)]


def test_every_module_has_a_floor_and_every_entry_exists():
    table = floors()
    assert len(set(table.values())) >= 10, "docs/architecture.md's table of floors was not read"
    for module in MODULES:
        floor_of(module, table)
    missing = set(table) - set(MODULES)
    assert not missing, f"docs/architecture.md names modules that do not exist: {sorted(missing)}"


def test_no_module_imports_from_a_higher_floor():
    table = floors()
    upward = []
    for module, path in MODULES.items():
        here = floor_of(module, table)
        upward += [f"{module} (floor {here}) imports {target} (floor {floor_of(target, table)})"
                   for target in sorted(imported_modules(path)) if floor_of(target, table) > here]
    assert not upward, "imports that run up a floor:\n" + "\n".join(upward)


def test_no_import_cycle_joins_two_files():
    graph = {module: {t for t in imported_modules(path) if t in MODULES and t != module}
             for module, path in MODULES.items()}
    # Tarjan's strongly connected components: any component of more than one module is a cycle.
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def room_of(module: str) -> str:
    """The top-level entry of minitrain/ that holds `module` ("minitrain.nn.linear" -> "nn")."""
    return module.split(".")[1] if "." in module else module


def test_no_two_rooms_import_each_other():
    """A room (a package or module at the top of minitrain/) may import another, or be imported by it, not both:
    two rooms that need each other are one room's job split in two."""
    edges: dict[tuple[str, str], str] = {}
    for module, path in MODULES.items():
        for target in sorted(imported_modules(path)):
            pair = (room_of(module), room_of(target))
            if pair[0] != pair[1]:
                edges.setdefault(pair, f"{module} imports {target}")
    mutual = [f"{a} <-> {b}: {edges[a, b]}; {edges[b, a]}" for a, b in sorted(edges) if a < b and (b, a) in edges]
    assert not mutual, "rooms that import each other:\n" + "\n".join(mutual)


def test_the_library_uses_only_the_names_each_lab_lists():
    """A student's lab file stands in for the library's (minitrain/seam.py), so the rest of minitrain may import
    from it only the names the lab text lists, and only as `from minitrain.x import name`."""
    from minitrain.seam import LAB_PIECES, REPLACEABLE, module_name

    listed = {module_name(path): set(names) for pieces in LAB_PIECES.values() for path, names in pieces.items()}
    assert listed.keys() - {None} == REPLACEABLE.keys()
    for path in MODULES.values():
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
