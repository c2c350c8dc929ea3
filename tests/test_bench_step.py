"""benchmarks/bench_step.py runs and reports what docs/performance.md reads from it. No timing is asserted (speed
is measured by the benchmark, never by a test): the run is --quick, minitrain only, and the checks are on the
report's shape and on relations that hold at any speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def bench_step(*flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(REPO / "benchmarks" / "bench_step.py"), "--quick", "--configs", "lab",
               "--no-torch", "--no-jax", *flags]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)


@pytest.mark.slow
def test_the_step_benchmark_reports_every_setting_the_floor_and_a_checkout_to_compare_with():
    done = bench_step("--against", str(REPO))  # this very checkout: the same step in a child process
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout.splitlines()[0])
    labels = ["minitrain_rule", "minitrain_1t", "minitrain_2t", "minitrain_measure", "against_rule"]  # --threads 1,2
    assert all(row[f"{label}_ms"] > 0 for label in labels)
    assert "peer_best" not in row  # no peer was asked for
    if (os.cpu_count() or 1) >= 2:  # the same global batch on 2 local data-parallel workers
        assert row["minitrain_2workers_ms"] > 0 and "ratio_minitrain_2workers_over_peer" not in row
    assert row["floor_best_ms"] <= row["floor_1t_ms"]  # the best count per product includes 1 thread
    assert row["ratio_over_floor_1t"] == pytest.approx(row["minitrain_rule_ms"] / row["floor_1t_ms"], abs=1e-3)
    assert row["steps_timed_each"] == 3 * 10  # --quick: 3 rounds of 40 // 4 steps
    assert "threads: measured 1 thread →" in done.stderr  # the measured choice decided during the warm-up
    assert "torch: left out" in done.stderr and "jax: left out" in done.stderr
    assert "ms per step" in done.stdout and "lab: minitrain (rule," in done.stdout
    assert row["verdict"].startswith(f"load {row['load_before']:g} -> {row['load_after']:g} on ")  # load rule
    assert row["verdict"] in done.stdout.splitlines()[-1]  # printed beside the ratios
    assert row["against_rule_first_loss_diff"] == 0.0  # the same code, weights and batch: the same first loss
    assert row["ratio_minitrain_over_against"] == pytest.approx(row["minitrain_rule_ms"] / row["against_rule_ms"],
                                                                abs=1e-3)  # fmt: skip


@pytest.mark.slow
def test_a_folder_that_is_not_a_checkout_is_named_in_one_error_line(tmp_path):
    done = bench_step("--against", str(tmp_path))
    assert done.returncode == 1
    assert f"error: --checkout {tmp_path} has no minitrain package" in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == "error: the contestant against_rule did not start (its own error is above)"
    assert "Traceback" not in done.stderr
