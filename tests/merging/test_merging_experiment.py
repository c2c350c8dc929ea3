"""experiments/23-merging: the whole pipeline runs (3-step fine-tunes, one grid point per method, two of the three
settings), its structural facts are the committed results', and the committed results are consistent with
themselves (each fine-tune's val scores are its run's, the tuned point is the grid's best on dev)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = ROOT / "experiments" / "23-merging"
METHODS = ("linear", "task_arithmetic", "ties", "dare_linear", "dare_ties", "slerp")
SETTINGS = ("lr1e-2", "lr1e-3", "replay")


def test_the_pipeline_runs_and_its_structural_facts_match_the_committed_results(tmp_path):
    subprocess.run([sys.executable, str(EXPERIMENT / "run.py"), "--quick", str(tmp_path)], cwd=ROOT, check=True,
                   capture_output=True)
    quick = json.loads((tmp_path / "results.json").read_text())
    committed = json.loads((EXPERIMENT / "results.json").read_text())
    assert quick["data"] == committed["data"]
    assert committed["data"]["present/val"] == committed["data"]["subjunctive/val"] == 24  # 4 verbs × 6 persons
    assert "lr1e-3" not in quick  # --quick leaves out the setting that differs from lr1e-2 by two --set values
    for setting in ("lr1e-2", "replay"):
        q, c = quick[setting], committed[setting]
        assert q["fine_tune_settings"] == c["fine_tune_settings"]
        for method in METHODS:
            assert q["merges"][method]["tensors"] == c["merges"][method]["tensors"] == 28
            assert q["merges"][method]["weights"] == c["merges"][method]["weights"] == 106_240
        assert set(q["scores"]) == set(c["scores"]) == {"base", "present", "subjunctive", *METHODS}
        assert q["fine_tunes"]["present"]["steps"] == 3 and c["fine_tunes"]["present"]["steps"] == 400
        # a LoRA run changes only its adapted layers: 4 linear weights in each of 2 blocks
        assert [c["deltas"][name]["changed_tensors"] for name in ("present", "subjunctive")] == [8, 8]
        # lab 01's model is the same file in both settings and both runs
        assert q["scores"]["base"]["present_val"] == c["scores"]["base"]["present_val"]


def test_the_committed_results_agree_with_themselves():
    committed = json.loads((EXPERIMENT / "results.json").read_text())
    for setting in SETTINGS:
        results = committed[setting]
        for name in ("present", "subjunctive"):  # the run's own validation and this scoring read the same forms
            run, scored = results["fine_tunes"][name], results["scores"][name][f"{name}_val"]
            assert scored["exact_match"] == pytest.approx(run["val_exact_match"], abs=1e-4)
            assert scored["ppl"] == pytest.approx(run["val_ppl"], abs=1e-3)
        for method, tuned in results["tuned"].items():
            best = max(tuned["grid"], key=lambda t: (t["dev_forms_right"], -t["mean_dev_ppl"]))
            assert all(t["dev_forms"] == 48 for t in tuned["grid"])  # 2 tenses × 4 dev verbs × 6 persons
            assert tuned["parameters"] == best["parameters"], (setting, method)
    # the gentler fine-tunes change the weights less
    assert all(committed["lr1e-3"]["deltas"][n]["relative_norm"] < committed["lr1e-2"]["deltas"][n]["relative_norm"]
               for n in ("present", "subjunctive"))
