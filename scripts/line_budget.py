"""The size of the library, tinygrad-style: `make test` prints it and fails above the budget.

    .venv/bin/python scripts/line_budget.py
    minitrain/: 24,812 lines in 214 files (budget 25,000: 188 to spare); config/ 4,310, training/ 3,952, ...

The budget is `[tool.minitrain] line-budget` in pyproject.toml, the one place it is kept. It counts every line of
every .py file under minitrain/ (docstrings and blank lines too: they are read as well). A feature that needs more
either simplifies something else or raises the budget in the same commit, where a reviewer sees it.
"""

from __future__ import annotations

import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def count(package: Path) -> tuple[int, int, Counter]:
    """(lines, files, lines per top-level entry of the package) over its .py files."""
    lines, files, by_wing = 0, 0, Counter()
    for path in sorted(package.rglob("*.py")):
        n = len(path.read_bytes().splitlines())
        lines, files = lines + n, files + 1
        by_wing[path.relative_to(package).parts[0]] += n
    return lines, files, by_wing


def main(root: Path = ROOT) -> int:
    """Print the bloat line of `root`/minitrain; 1 (and an error line) when it is over the budget."""
    budget = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["minitrain"]["line-budget"]
    lines, files, by_wing = count(root / "minitrain")
    wings = ", ".join(f"{name.removesuffix('.py')}{'/' if not name.endswith('.py') else ''} {n:,}"
                      for name, n in by_wing.most_common(6))
    if lines > budget:
        print(f"error: minitrain/ has {lines:,} lines in {files} files, over its budget of {budget:,} "
              f"(pyproject.toml [tool.minitrain] line-budget); largest: {wings}", file=sys.stderr)
        return 1
    print(f"minitrain/: {lines:,} lines in {files} files (budget {budget:,}: {budget - lines:,} to spare); {wings}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
