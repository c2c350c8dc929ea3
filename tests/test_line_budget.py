"""The bloat line (scripts/line_budget.py): it counts every line of every .py file under minitrain/ and fails
above the budget pyproject.toml keeps."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import line_budget  # noqa: E402


def write_checkout(root: Path, budget: int) -> None:
    (root / "minitrain" / "nn").mkdir(parents=True)
    (root / "minitrain" / "__init__.py").write_text("a = 1\n\n")
    (root / "minitrain" / "nn" / "linear.py").write_text('"""y = x·W + b"""\nb = 2\n')
    (root / "minitrain" / "notes.txt").write_text("not code\n" * 50)
    (root / "pyproject.toml").write_text(f"[tool.minitrain]\nline-budget = {budget}\n")


def test_it_counts_every_python_line_and_passes_within_the_budget(tmp_path, capsys):
    write_checkout(tmp_path, budget=4)
    assert line_budget.count(tmp_path / "minitrain")[:2] == (4, 2)
    assert line_budget.main(tmp_path) == 0
    assert capsys.readouterr().out.startswith("minitrain/: 4 lines in 2 files (budget 4: 0 to spare); ")


def test_it_fails_above_the_budget_with_one_error_line(tmp_path, capsys):
    write_checkout(tmp_path, budget=3)
    assert line_budget.main(tmp_path) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: minitrain/ has 4 lines in 2 files, over its budget of 3") and err.count("\n") == 1


def test_the_library_is_within_its_budget():
    assert line_budget.main() == 0


def test_readme_quotes_the_budget():
    budget = line_budget.tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["minitrain"]["line-budget"]
    assert f"against a budget of {budget:,}" in (ROOT / "README.md").read_text(encoding="utf-8")
