"""A lab's starter file, made from the library's own file: the contract stays, the code goes.

    stub_module(source_of("minitrain/loop.py"), ("train_step", "evaluate"), "01", "lab/01-train-mini.md")

keeps the module docstring, the imports (an `if TYPE_CHECKING:` block's too), the `if __name__ == "__main__":`
block, and every listed function or class with its signature and docstring; each body becomes
`raise NotImplementedError(...)`. A listed class keeps its public methods and `__init__`/`__iter__`/`__next__`/
`__len__`, stubbed the same way. Everything else (the library's private helpers) is left out: how to write the
lab is the student's to decide. Made from the reference, a starter can never drift from the contract the
checker grades. In another language, `docs` {"<module>" | name | "Class.method": (en_hash, translation)} replaces
each docstring whose sha256 (12 hex digits, of its `inspect.cleandoc` text) is en_hash; a changed one stays English.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
from collections.abc import Callable, Mapping, Sequence

_KEPT_DUNDERS = ("__init__", "__iter__", "__next__", "__len__")
Docs = Mapping[str, tuple[str, str]]  # {name: (en_hash, the translation of its docstring)}


def stub_module(source: str, names: Sequence[str], lab: str, lab_text: str,
                tr: Callable[[str], str] = str, docs: Docs | None = None) -> str:
    """The starter text of the module `source` for the lab's listed `names` (see the module docstring); its
    header and TODO lines through `tr` (minitrain/course/i18n.py; `str`: English), its docstrings from `docs`."""
    lines = source.splitlines()
    tree = ast.parse(source)
    missing = set(names) - {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    if missing:
        raise ValueError(f"the reference defines no {sorted(missing)}")
    header = tr(f"Lab {lab} starter: write every function marked TODO. Each docstring is the contract the checker "
                f"grades; the lab's text is {lab_text}. Check with `.venv/bin/minitrain lab check {lab} <this "
                "folder>`.")
    out = [*(f"# {line}" for line in textwrap.wrap(header, 110, break_on_hyphens=False)), ""]
    imports = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    docs = docs or {}
    if _is_docstring(tree.body[0]):
        out += [*lines[: tree.body[0].lineno - 1], *_docstring(lines, tree.body[0], docs.get("<module>")), ""]
    if imports:  # the import block as written, blank lines between groups included
        out += lines[imports[0].lineno - 1 : imports[-1].end_lineno]
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":  # imports for annotations
            out += ["", *lines[node.lineno - 1 : node.end_lineno]]
        elif isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            out += ["", "", *lines[node.lineno - 1 : node.end_lineno]]
        elif isinstance(node, ast.FunctionDef) and node.name in names:
            out += ["", "", *_stub_function(lines, node, lab, tr, docs)]
        elif isinstance(node, ast.ClassDef) and node.name in names:
            out += ["", "", *_stub_class(lines, node, lab, tr, docs)]
    return "\n".join(out).rstrip() + "\n"


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _docstring(lines: list[str], node: ast.Expr, translation: tuple[str, str] | None) -> list[str]:
    """The docstring `node` as written; or, when `translation` is of its very English, the translation laid out
    as it is: the same indentation, the closing quotes on a line of their own when its are."""
    written = lines[node.lineno - 1 : node.end_lineno]
    english = hashlib.sha256(inspect.cleandoc(node.value.value).encode("utf-8")).hexdigest()[:12]
    if translation is None or translation[0] != english:
        return written
    text = f'"""{translation[1].strip()}' + ("\n" if written[-1].strip() == '"""' else "") + '"""'
    return [" " * node.col_offset + line if line else "" for line in text.split("\n")]


def _head(lines: list[str], node: ast.FunctionDef | ast.ClassDef, docs: Docs, name: str) -> list[str]:
    """Decorators, signature and docstring of a definition, as written (the docstring from `docs[name]`)."""
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    head, first = lines[start - 1 : node.body[0].lineno - 1], node.body[0]
    return [*head, *_docstring(lines, first, docs.get(name))] if _is_docstring(first) else head


def _stub_function(lines: list[str], node: ast.FunctionDef, lab: str, tr: Callable[[str], str], docs: Docs,
                   owner: str = "") -> list[str]:
    indent = " " * (node.col_offset + 4)
    what = f"{owner}.{node.name}" if owner else node.name
    return [*_head(lines, node, docs, what),
            f'{indent}raise NotImplementedError("{tr(f"TODO lab {lab}: write {what}")}")']


def _stub_class(lines: list[str], node: ast.ClassDef, lab: str, tr: Callable[[str], str], docs: Docs) -> list[str]:
    out = _head(lines, node, docs, node.name)
    methods = [m for m in node.body if isinstance(m, ast.FunctionDef)
               and (not m.name.startswith("_") or m.name in _KEPT_DUNDERS)]
    for method in methods:
        out += ["", *_stub_function(lines, method, lab, tr, docs, owner=node.name)]
    return out
