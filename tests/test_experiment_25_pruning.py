"""experiments/25-pruning: the whole pipeline runs (3-step fine-tunes), its one-shot rows (which do not depend on
training) are the committed results' exactly, and every file it writes holds exactly the zeros it asked for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "25-pruning"


def test_the_pipeline_runs_and_its_one_shot_rows_are_the_committed_ones(tmp_path):
    subprocess.run([sys.executable, str(EXPERIMENT / "run.py"), "--quick", str(tmp_path)], cwd=ROOT, check=True,
                   capture_output=True)
    quick = json.loads((tmp_path / "results.json").read_text())
    committed = json.loads((EXPERIMENT / "results.json").read_text())
    assert quick["one_shot"] == committed["one_shot"]  # deterministic: the same model, records and seed
    assert quick["ablation"] == committed["ablation"]
    assert len(committed["one_shot"]) == 8 and all(row["exact"] for row in committed["one_shot"].values())
    for results in (quick, committed):
        recovered = {name: row for name, row in results["recovery"].items() if "unstructured" in name}
        assert len(recovered) == 6 and all(row["mask_held"] for row in recovered.values())
        assert all(results["recovery"][f"gradual-{s}"]["exact"] for s in (30, 50, 70))
