"""Every message the course's checker can print, read from its source, and which ones a catalogue lacks.

    .venv/bin/python scripts/lab_messages.py              # each catalogue: how many entries, which are missing
    .venv/bin/python scripts/lab_messages.py --missing 07  # lab 07's missing entries, as YAML to fill in

A message is a string literal, f-string, `str.format` template or `+` chain of them, outside docstrings, whose
text holds two words in a row (`"val PPL ended within 25 % of its best"`; a test corpus such as "ba ab" is
none: its words have two letters at most), or any string given to `tr(...)`
(a single word such as "hint"). Its template is the text with `{}` where a value goes, the key of its entry in
minitrain/course/es/ (minitrain/course/i18n.py). Commands and paths are no prose: a string holding `.venv/`,
`--` or `MINITRAIN_LAB_DIR` is left out. tests/course/test_course_i18n.py checks that every template has an entry.
"""

from __future__ import annotations

import ast
import re
import string
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COURSE = ROOT / "minitrain" / "course"
# The files whose messages the `common` catalogue translates: the checker's machinery and the `lab` command.
COMMON = ("checks.py", "sandbox.py", "worker.py", "remote.py", "runs.py", "labs.py", "blame.py", "starter.py")
COMMAND = ROOT / "minitrain" / "commands" / "lab.py"
_PROSE = re.compile(r"[A-Za-z']+[,;:]? [A-Za-z('{]")
_COMMANDS = (".venv/", "MINITRAIN_LAB_DIR=", "experiments/")  # a string starting so is a command line
_CODE = ("raise NotImplementedError(", "__name__", "TYPE_CHECKING")  # a string holding one of these is code
# Calls whose strings no student reads in the checker's output: programming errors, patterns, the CLI's --help.
_SILENT_CALLS = ("ValueError", "TypeError", "compile", "add_argument", "add_parser", "add_subparsers")


def sources() -> dict[str, list[Path]]:
    """{catalogue name: the source files whose messages it holds}: `common`, then `labNN` for each lab."""
    found = {"common": [COURSE / name for name in COMMON] + [COMMAND]}
    for path in sorted(COURSE.glob("lab[0-9][0-9].py")):
        found[path.stem] = [path]
    return found


def _template(node: ast.expr) -> str | None:
    """The template of a string expression (`{}` per value), or None when `node` is no string expression."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
        return "".join(text + ("{}" if field is not None else "")
                       for text, field, _, _ in string.Formatter().parse(node.func.value.value))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        if left is None and right is None:
            return None
        return (left if left is not None else "{}") + (right if right is not None else "{}")
    return None


def _fields(node: ast.expr) -> list[ast.expr]:
    """The expressions whose values fill the `{}` of a string expression's template."""
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
    if isinstance(node, ast.Call):  # "...".format(...)
        return [*node.args, *(k.value for k in node.keywords)]
    if isinstance(node, ast.BinOp):
        return [f for side in (node.left, node.right) for f in (_fields(side) if _template(side) is not None
                                                                else [side])]
    return []


def _is_prose(text: str) -> bool:
    """Two words in a row, and not a command, code, or a tiny corpus ("ba ab", "aaa AB": words of two letters)."""
    if "{}" not in text and all(len(set(word.lower())) <= 2 for word in text.split()):
        return False
    return bool(_PROSE.search(text)) and not text.lstrip().startswith(_COMMANDS) and not any(c in text for c in _CODE)


def templates(path: Path) -> list[str]:
    """The message templates of one source file, in the order they are written, each once."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    marked = {id(n.args[0]) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
              and n.func.id == "tr" and n.args}
    found: dict[str, None] = {}

    def visit(node: ast.AST) -> None:
        text = _template(node) if isinstance(node, ast.expr) and id(node) not in docstrings else None
        if text is not None and (id(node) in marked or _is_prose(text)):
            found[text] = None
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in _SILENT_CALLS:
            return
        if text is not None:  # a message: what goes into its `{}` fields may hold messages of its own
            for field in _fields(node):
                visit(field)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return list(found)


def catalogue_templates() -> dict[str, list[str]]:
    """{catalogue name: every template its sources can print}."""
    out = {}
    for name, paths in sources().items():
        out[name] = list(dict.fromkeys(t for path in paths for t in templates(path)))
    return out


def _yaml_entry(text: str) -> str:
    import json

    return f"- en: {json.dumps(text, ensure_ascii=False)}\n  es: \n"


def main(argv: list[str]) -> int:
    from minitrain.course.i18n import catalogue

    wanted = catalogue_templates()
    if argv[:1] == ["--missing"]:
        name = argv[1] if argv[1] == "common" else f"lab{argv[1].zfill(2)}"
        have = catalogue(name)
        print("".join(_yaml_entry(t) for t in wanted[name] if t not in have), end="")
        return 0
    for name, texts in wanted.items():
        have = catalogue(name)
        missing = [t for t in texts if t not in have]
        print(f"{name}: {len(texts)} messages, {len(missing)} without a Spanish entry")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
