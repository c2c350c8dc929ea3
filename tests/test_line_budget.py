"""The bloat line (scripts/line_budget.py): it counts every line of every .py file under minitrain/, fails above
the budget that docs/budget.md's ledger ends with, and keeps README's figure equal to the count."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import line_budget  # noqa: E402

HEADER = "| date | feature | lines | budget |\n| --- | --- | --- | --- |\n"


def write_checkout(root: Path, budget: int, readme_lines: int = 4) -> None:
    (root / "minitrain" / "nn").mkdir(parents=True)
    (root / "minitrain" / "__init__.py").write_text("a = 1\n\n")
    (root / "minitrain" / "nn" / "linear.py").write_text('"""y = x·W + b"""\nb = 2\n')
    (root / "minitrain" / "notes.txt").write_text("not code\n" * 50)
    (root / "docs").mkdir()
    (root / "docs" / "budget.md").write_text(
        f"# ledger\n\n{HEADER}| 2026-01-01 | the start | 10 | 10 |\n"
        f"| 2026-01-02 | less | −{10 - budget} | {budget} |\n")
    (root / "README.md").write_text(f"Size: {line_budget.readme_sentence(readme_lines, 2, budget)}\nMore.\n")


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


def test_a_ledger_row_must_move_the_budget_by_its_lines(tmp_path, capsys):
    write_checkout(tmp_path, budget=6)
    ledger = tmp_path / "docs" / "budget.md"
    ledger.write_text(ledger.read_text() + "| 2026-01-03 | a feature that says +1 and adds 5 | +1 | 11 |\n")
    assert line_budget.main(tmp_path) == 1
    assert "moves the budget 6 -> 11, not by +1" in capsys.readouterr().err
    ledger.write_text(ledger.read_text().replace("| +1 | 11 |", "| +5 | 11 |"))
    assert line_budget.main(tmp_path, write_readme=True) == 0  # the README now quotes the new budget
    ledger.write_text(ledger.read_text() + "| someday | no date |  | 3 |\n| 2026-01-04 | no budget | 3 | x |\n")
    assert line_budget.main(tmp_path) == 1
    assert "every row is" in capsys.readouterr().err


def test_readme_figure_is_generated_and_checked(tmp_path, capsys):
    write_checkout(tmp_path, budget=5, readme_lines=3)
    assert line_budget.main(tmp_path) == 1
    assert "README.md's size figure is out of date" in capsys.readouterr().err
    assert line_budget.main(tmp_path, write_readme=True) == 0
    assert (tmp_path / "README.md").read_text() == f"Size: {line_budget.readme_sentence(4, 2, 5)}\nMore.\n"
    assert line_budget.main(tmp_path) == 0


def test_the_library_is_within_its_budget_and_readme_says_its_size():
    assert line_budget.main() == 0


def test_the_budget_is_kept_in_one_place():
    assert "line-budget" not in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
