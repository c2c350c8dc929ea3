"""experiments/21-lora: the whole pipeline runs (3-step runs), and the facts that do not depend on training
(data split, trainable share, file sizes, the QLoRA base's bytes) are the committed results'."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = ROOT / "experiments" / "21-lora"


def test_the_pipeline_runs_and_its_structural_facts_match_the_committed_results(tmp_path):
    subprocess.run([sys.executable, str(EXPERIMENT / "run.py"), "--quick", str(tmp_path)], cwd=ROOT, check=True,
                   capture_output=True)
    quick = json.loads((tmp_path / "results.json").read_text())
    committed = json.loads((EXPERIMENT / "results.json").read_text())
    assert quick["data"] == committed["data"] == {"base/train": 13440, "base/dev": 120, "base/val": 120,
                                                  "imperfect/train": 2688, "imperfect/dev": 24, "imperfect/val": 24}
    for method in ("lora", "qlora", "full"):
        for key in ("trainable_parameters", "parameters", "trainable_share", "base_weight_bytes"):
            assert quick["adapt"][method][key] == committed["adapt"][method][key], (method, key)
        # the tensors are the same size; the metadata (paths, step counts) differs by a few bytes
        assert abs(quick["adapt"][method]["model_file_bytes"] - committed["adapt"][method]["model_file_bytes"]) < 256
        assert quick["adapt"][method]["steps"] == 3
    assert committed["adapt"]["qlora"]["base_weight_bytes"] == 50_752  # 4-bit codes + double-quantized absmax
    assert quick["timing"]["training_state_bytes"] == committed["timing"]["training_state_bytes"]
    for bits in (4, 2):  # QAT stores the weights it computed with; PTQ after float training does not
        for rows in (quick["qat"], committed["qat"]):
            qat = rows[f"int{bits}_qat"]
            assert qat["val_ppl"] == pytest.approx(qat["val_ppl_before_storing"], rel=1e-9)
    assert committed["qat"]["int2_qat"]["val_ppl"] < committed["qat"]["int2_ptq_after_finetune"]["val_ppl"] / 5
    assert abs(quick["ptq"][0]["file_bytes"] - committed["ptq"][1]["file_bytes"]) < 256  # int8 per channel
