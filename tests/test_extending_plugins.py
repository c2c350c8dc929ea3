"""docs/extending.md's plug-ins of the registered kinds, as a contributor adds them: Lion (an optimizer), Model Stock
(a merge method) and a CSV tracker, each one file in tests/extending/ and one record line in its kind's table (the
merge method an import line too). In a copy of minitrain with the three added, the kinds' contract tests
(tests/test_registries.py) run on the new entries with nothing else edited."""

from __future__ import annotations

import csv
from itertools import combinations
from pathlib import Path

import numpy as np
from extending.csv_tracker import CsvTracker
from extending.model_stock import model_stock_merge
from test_course_text import excerpt_matches, parse
from test_extending import run_with_plug_ins

from minitrain.tracking.tracker import Destination

ROOT = Path(__file__).resolve().parents[1]
EXTENDING = ROOT / "tests" / "extending"


def model_stock_oracle(base, tensors):
    """Jang et al. 2024, eq. 3, written out: t = N·cos / (1 + (N − 1)·cos), θ = t·θ_avg + (1 − t)·θ_0."""
    n = len(tensors)
    taus = [(t.astype(np.float64) - base).ravel() for t in tensors]
    pairs = list(combinations(range(n), 2))
    cos = sum(np.dot(taus[i], taus[j]) / np.sqrt(np.dot(taus[i], taus[i]) * np.dot(taus[j], taus[j]))
              for i, j in pairs) / len(pairs)
    t = n * cos / (1 + (n - 1) * cos)
    return t * sum(x.astype(np.float64) for x in tensors) / n + (1 - t) * base


def test_model_stock_matches_the_papers_formula():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(4, 5))
    for n in (2, 3, 5):
        tensors = [(base + rng.normal(scale=0.1, size=base.shape) + 0.2).astype(np.float32) for _ in range(n)]
        np.testing.assert_allclose(model_stock_merge(base, tensors), model_stock_oracle(base, tensors), rtol=1e-5)
    # Two fine-tunes that agree exactly (cos = 1) are averaged; at right angles (cos = 0) the base comes back.
    same = [base + 1.0, base + 1.0]
    np.testing.assert_allclose(model_stock_merge(base, same), base + 1.0, rtol=1e-6)
    square = [base + np.eye(4, 5), base + np.eye(4, 5)[::-1]]  # task vectors with disjoint support
    np.testing.assert_allclose(model_stock_merge(base, square), base, rtol=1e-6)


def test_the_csv_tracker_writes_rows_that_the_csv_module_reads_back(tmp_path):
    path = tmp_path / "tracking.csv"
    for run in ("a", "b"):  # two runs share the file: one header
        tracker = CsvTracker(Destination(str(path), run, "exp", None, tmp_path, None))
        tracker.start({}, {})
        tracker.on_log({"step": 0, "loss": 2.5, "lr/a,b": 0.001})
        tracker.finish("completed", {"steps": 3, "val_ppl": 1.75}, [])
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert [(r["run"], r["step"], r["metric"], float(r["value"])) for r in rows] == [
        (run, step, metric, value) for run in ("a", "b")
        for step, metric, value in (("0", "loss", 2.5), ("0", "lr/a,b", 0.001), ("3", "results/steps", 3.0),
                                    ("3", "results/val_ppl", 1.75))]


# (the file, where it goes, the table it joins, the line it follows there, the lines added after it)
PLUG_INS = [
    ("lion.py", "minitrain/optim/lion.py", "minitrain/optim/factory.py", '    "lamb.Lamb",\n', '    "lion.Lion",\n'),
    ("model_stock.py", "minitrain/merging/model_stock.py", "minitrain/merging/methods.py",
     '    MergeMethod("slerp", _slerp, frozenset({"t"}), requires=frozenset({"t"}), models=(1, 1)),\n',
     '    MergeMethod("model_stock", model_stock, frozenset(), models=(2, None)),\n'),
    ("model_stock.py", None, "minitrain/merging/methods.py", "from minitrain.merging.ties import ties\n",
     "from minitrain.merging.model_stock import model_stock\n"),
    ("csv_tracker.py", "minitrain/tracking/csv_tracker.py", "minitrain/config/observing.py",
     '    TrackerBackend("jsonl", "minitrain.tracking.jsonl_tracker.JsonlTracker", "{run_dir}/tracking.jsonl"),\n',
     '    TrackerBackend("csv", "minitrain.tracking.csv_tracker.CsvTracker", "{run_dir}/tracking.csv"),\n'),
]


def test_the_docs_quote_the_files_and_the_lines_they_add():
    page = parse(ROOT / "docs" / "extending.md")
    for name, *_, line in PLUG_INS:
        quoted = [code for source, code in page.excerpts if source == f"tests/extending/{name}"]
        assert quoted and excerpt_matches(quoted[0], (EXTENDING / name).read_text(encoding="utf-8")), name
        assert line.strip() in (ROOT / "docs" / "extending.md").read_text(encoding="utf-8"), line


def test_each_is_one_file_and_its_record_line_and_its_kinds_contract_covers_it(tmp_path):
    tests = ["test_every_optimizer_brings_a_least_squares_loss_down_and_its_state_round_trips[lion]",
             "test_every_merge_method_merges_tiny_tensors_and_refuses_what_it_does_not_read[model_stock]",
             "test_every_tracker_backend_writes_a_run_that_its_reader_reads_back[csv]"]
    plug_ins = [(EXTENDING / name, target, table, after, line) for name, target, table, after, line in PLUG_INS]
    out = run_with_plug_ins(tmp_path, ["test_registries.py", "training/test_run.py", "pruning/test_pruning.py",
                                       "data/test_tables.py"], plug_ins,
                            [f"tests/test_registries.py::{t}" for t in tests])
    assert "3 passed" in out
