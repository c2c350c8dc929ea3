"""experiments/25-pruning: the whole pipeline runs (3-step fine-tunes, no lottery), its one-shot rows (which do
not depend on training) are the committed results' (counts exactly; perplexities and norms to float32's rounding,
which differs between CPUs: 1e-7 relative seen between Intel and AMD), and every file it writes holds exactly the
zeros it asked for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = ROOT / "experiments" / "25-pruning"


def same_up_to_float32(made, committed, where: str = "results") -> None:
    """Counts, names and flags equal; floats within 1e-6 relative (float32 sums, summed in another order)."""
    if isinstance(committed, dict):
        assert sorted(made) == sorted(committed), where
        for key in committed:
            same_up_to_float32(made[key], committed[key], f"{where}.{key}")
    elif isinstance(committed, float):
        assert made == pytest.approx(committed, rel=1e-6), where
    else:
        assert made == committed, where


def test_the_pipeline_runs_and_its_one_shot_rows_are_the_committed_ones(tmp_path):
    subprocess.run([sys.executable, str(EXPERIMENT / "run.py"), "--quick", str(tmp_path)], cwd=ROOT, check=True,
                   capture_output=True)
    quick = json.loads((tmp_path / "results.json").read_text())
    committed = json.loads((EXPERIMENT / "results.json").read_text())
    same_up_to_float32(quick["one_shot"], committed["one_shot"])  # the same model, records and seed
    same_up_to_float32(quick["ablation"], committed["ablation"])
    assert len(committed["one_shot"]) == 12 and all(row["exact"] for row in committed["one_shot"].values())
    # --quick fine-tunes magnitude and Wanda at sparsity 50 only (every kind of fine-tune once); the committed run
    # all three methods at 30, 50 and 70
    for results, methods, sparsities in ((quick, 2, (50,)), (committed, 3, (30, 50, 70))):
        recovered = {name: row for name, row in results["recovery"].items() if "unstructured" in name}
        assert len(recovered) == methods * len(sparsities) and all(row["mask_held"] for row in recovered.values())
        assert all(results["recovery"][f"gradual-{s}"]["exact"] for s in sparsities)
    # the lottery (not in --quick: tests/training/test_lottery.py runs a tiny one): every round's zeros exact
    assert "lottery" not in quick and all(committed["lottery"][f"lottery-{s}"]["exact"] for s in (0, 30, 50, 70))
    assert [len(committed["lottery"][f"lottery-{s}"]["rounds"]) for s in (0, 30, 50, 70)] == [1, 3, 3, 3]
