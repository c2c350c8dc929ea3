"""Lab 09's text quotes the committed numbers (issue 49: every number a text quotes is checked against the
committed files): its table, in both languages, is experiments/23-merging/lab09/results.json, PPL to the
fourth decimal and exact match as a percentage to one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = json.loads((REPO / "experiments/23-merging/lab09/results.json").read_text(encoding="utf-8"))
ROWS = {"base": ("lab 01's model", "el modelo del lab 01"), "present": ("fine-tune on the present",
        "ajuste fino en el presente"), "subjunctive": ("fine-tune on the subjunctive", "ajuste fino en el subjuntivo"),
        "ties": ("ties (", "ties ("), "dare_linear": ("dare_linear (", "dare_linear ("),
        "dare_ties": ("dare_ties (", "dare_ties (")}


@pytest.mark.parametrize("spanish", [False, True], ids=["en", "es"])
def test_the_lab_text_quotes_the_committed_scores(spanish):
    text = (REPO / f"lab/09-model-merging{'.es' if spanish else ''}.md").read_text(encoding="utf-8")
    for model, names in ROWS.items():
        (row,) = [line for line in text.splitlines() if line.startswith(f"| {names[spanish]}")]
        cells = [c.strip().rstrip(" %").replace(",", ".") for c in row.strip("|").split("|")[1:]]
        want = [f"{RESULTS[model][split][key] * (100 if key == 'exact_match' else 1):.{4 if key == 'ppl' else 1}f}"
                for split in ("present_val", "subjunctive_val") for key in ("ppl", "exact_match")]
        assert cells == want, (model, cells, want)


def test_the_labs_configs_are_the_experiments_with_the_committed_models():
    """lab09/'s merge configs differ from experiment 23's merges/ only in the models they name."""
    for method in ("ties", "dare_linear", "dare_ties"):
        ours = (REPO / f"experiments/23-merging/lab09/{method}.yaml").read_text(encoding="utf-8")
        theirs = (REPO / f"experiments/23-merging/merges/{method}.yaml").read_text(encoding="utf-8")
        moved = re.sub(r"runs/23-merging/lr1e-2/(\w+)", r"experiments/23-merging/lab09/\1.safetensors", theirs)
        moved = moved.replace("models/minigpt-phase18-64ab16764a406b88.safetensors",
                              "experiments/23-merging/lab09/base.safetensors")
        assert ours == moved, method
    base = (REPO / "experiments/23-merging/lab09/base.safetensors").read_bytes()
    assert base == (REPO / "models/minigpt-phase18-64ab16764a406b88.safetensors").read_bytes()


def test_the_last_item_shows_your_scores_beside_the_tables():
    """The end-to-end item, passed, prints each merge's scores as it computed them and the table's (issue 49)."""
    from minitrain.course.labs import grade

    item = "your TIES, DARE-linear and DARE-TIES merges of experiment 23's fine-tunes score as the committed ones on " \
           "the held-out present and subjunctive"
    _, outcomes = grade("09", limits=None, only=lambda name: name == item or not name.startswith("your "))
    outcome = outcomes[-1]
    assert outcome.name == item and outcome.passed
    lines = outcome.reason.splitlines()
    assert len(lines) == 6
    for line, (method, split) in zip(lines, [(m, s) for m in ("ties", "dare_linear", "dare_ties")
                                            for s in ("present_val", "subjunctive_val")], strict=True):
        want = RESULTS[method][split]
        table = f"the table's {want['ppl']:.4f} and {want['exact_match'] * 100:.1f} %"
        assert line.startswith(f"{method} on {split}: your val PPL ") and line.endswith(table), line


def test_the_readme_names_the_programs_and_the_folder_the_student_has(tmp_path, monkeypatch):
    """Started at a checkout's root, the README's commands say `.venv/bin/minitrain`; started elsewhere, the
    minitrain beside the Python that runs it; and the workspace as the student named it, never `labs/09`."""
    import sys

    from minitrain.course.labs import LABS, _readme

    programs = tmp_path / "checkout" / ".venv" / "bin"
    programs.mkdir(parents=True)
    (programs / "minitrain").write_text("", encoding="utf-8")
    monkeypatch.setattr(sys, "executable", str(programs / "python"))
    (tmp_path / "elsewhere").mkdir()
    for here, shown in (("checkout", ".venv/bin"), ("elsewhere", str(programs))):
        monkeypatch.chdir(tmp_path / here)
        readme = _readme(LABS["09"], "my/ws")
        assert f"\n    {shown}/minitrain lab check 09 my/ws\n" in readme
        assert f"\n    MINITRAIN_LAB_DIR=my/ws {shown}/minitrain merge experiments/23-merging/lab09/ties.yaml -o " \
               "my/ws/ties.safetensors\n" in readme
        assert "labs/09" not in readme and (" .venv/bin/" in readme) == (here == "checkout")
    (programs / "minitrain").unlink()  # minitrain installed elsewhere than beside its Python: the one on the PATH
    assert "\n    minitrain lab check 09 my/ws\n" in _readme(LABS["09"], "my/ws")
