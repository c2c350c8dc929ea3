"""The size of the library, tinygrad-style: `make test` prints it and fails above the budget.

    .venv/bin/python scripts/line_budget.py            # check: the count, the budget, README's figure
    .venv/bin/python scripts/line_budget.py --readme   # write README's figure from the count
    minitrain/: 33,990 lines in 318 files (budget 34,000: 10 to spare); config/ 4,310, training/ 3,952, ...

It counts every line of every .py file under minitrain/ (docstrings and blank lines too: they are read as well).
The budget is the last row of docs/budget.md's ledger, the one place it is kept: each row is a change to the
budget with its date, the feature that paid for it and the lines it moved. A feature that needs more either
simplifies something else or adds its row in the same commit, where a reviewer sees it. README's sentence about
the size is written by `--readme`, never by hand; the check fails when it is out of date.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEDGER = "docs/budget.md"
# A ledger row: | 2026-12-06 | feature | −2,369 | 34,000 |  (date, what paid, lines moved, the budget after it)
ROW = re.compile(r"^\| (\d{4}-\d{2}-\d{2}) \| ([^|]*\S[^|]*) \| ([+−-]?[\d,]+) \| ([\d,]+) \|$")
README_SENTENCE = re.compile(r"today `minitrain/` is [\d,]+ lines in \d+ files, against a budget of [\d,]+\.")


def count(package: Path) -> tuple[int, int, Counter]:
    """(lines, files, lines per top-level entry of the package) over its .py files."""
    lines, files, by_wing = 0, 0, Counter()
    for path in sorted(package.rglob("*.py")):
        n = len(path.read_bytes().splitlines())
        lines, files = lines + n, files + 1
        by_wing[path.relative_to(package).parts[0]] += n
    return lines, files, by_wing


def budget(root: Path) -> int:
    """The budget: the last row of the ledger. ValueError when the ledger has no rows, or a row raises the budget
    without naming what paid for it (a row's `lines` must be the difference from the row before)."""
    rows = [ROW.match(line) for line in (root / LEDGER).read_text(encoding="utf-8").splitlines()
            if line.startswith("| 2")]
    if not rows or not all(rows):
        raise ValueError(f"{LEDGER}: every row is `| YYYY-MM-DD | feature | lines | budget |`")
    previous = None
    for row in rows:
        lines, after = (int(row[i].replace(",", "").replace("−", "-")) for i in (3, 4))
        if previous is not None and after - previous != lines:
            raise ValueError(f"{LEDGER}: the row of {row[1]} moves the budget {previous:,} -> {after:,}, "
                             f"not by {lines:+,}")
        previous = after
    return previous


def readme_sentence(lines: int, files: int, limit: int) -> str:
    return f"today `minitrain/` is {lines:,} lines in {files} files, against a budget of {limit:,}."


def main(root: Path = ROOT, write_readme: bool = False) -> int:
    """Print the bloat line of `root`/minitrain; 1 (and an error line) when it is over the budget, the ledger is
    malformed or README's figure is not the count (`write_readme` writes it instead)."""
    try:
        limit = budget(root)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    lines, files, by_wing = count(root / "minitrain")
    wings = ", ".join(f"{name.removesuffix('.py')}{'/' if not name.endswith('.py') else ''} {n:,}"
                      for name, n in by_wing.most_common(6))
    if lines > limit:
        print(f"error: minitrain/ has {lines:,} lines in {files} files, over its budget of {limit:,} "
              f"({LEDGER}); largest: {wings}", file=sys.stderr)
        return 1
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    wanted = readme_sentence(lines, files, limit)
    if write_readme:
        readme.write_text(README_SENTENCE.sub(wanted, text, count=1), encoding="utf-8")
    elif wanted not in text:
        print(f"error: README.md's size figure is out of date (it should say {wanted!r}): run "
              f"`python scripts/line_budget.py --readme`", file=sys.stderr)
        return 1
    print(f"minitrain/: {lines:,} lines in {files} files (budget {limit:,}: {limit - lines:,} to spare); {wings}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] not in ([], ["--readme"]):
        print(f"error: unknown arguments {' '.join(sys.argv[1:])!r} (usage: line_budget.py [--readme])",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(main(write_readme=sys.argv[1:] == ["--readme"]))
