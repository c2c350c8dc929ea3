"""Runs from any folder (issue 26, item 14): a config and its data copied outside the checkout train there, read
their own data, and write nothing under the checkout; the model file lands in the run folder unless
--models-dir or output.models_dir says otherwise."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DIGITS = REPO / "data" / "digits" / "digits.csv"
SKIPPED = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache"}

SPEC_MANIFEST = """\
entrenar: "1.0"
name: "digits"
version: "1.0.0"
data:
  source: digits.csv
  split: {train: 0.8, val: 0.2}
model:
  type: sequential
  layers: [{linear: {out_features: 8}}, {activation: relu}, {linear: {out_features: 10}}, {activation: softmax}]
optimizer: {name: adamw, lr: 0.005}
training: {epochs: 1, batch_size: 32}
monitoring: {progress: none}
"""


def listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under the checkout (not .git, the venv, caches) with its size and modification time."""
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED]
        for name in files:
            path = Path(folder, name)
            stat = path.lstat()
            found[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return found


@pytest.mark.slow
def test_a_spec_manifest_trains_outside_the_checkout_and_writes_nothing_in_it(tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    with DIGITS.open(newline="") as src, (work / "digits.csv").open("w", newline="") as dst:
        csv.writer(dst).writerows(row for _, row in zip(range(201), csv.reader(src), strict=False))
    (work / "spec.yaml").write_text(SPEC_MANIFEST, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "MINITRAIN_MODELS_DIR"}
    env["PYTHONPATH"] = str(REPO)
    before = listing(REPO)

    done = subprocess.run([sys.executable, "-m", "minitrain", "train", "spec.yaml", "--quiet"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert listing(REPO) == before  # no model file, no data read from (or written into) the checkout
    run = work / "output"  # the spec's Appendix A default for output.dir
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    assert [f["path"] for f in manifest["data"]["files"]] == ["digits.csv"]  # its own data, from its folder
    assert manifest["data_sha256"] == {"data file 1": manifest["data"]["files"][0]}
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    # relative to the folder it ran from, which manifest.json records relative to the run folder
    model = run / manifest["working_dir"] / results["model_path"]
    assert manifest["working_dir"] == ".." and model.resolve().parent == run.resolve() / "models" and model.is_file()

