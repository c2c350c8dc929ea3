"""benchmarks/load_rule.py: the project's rule that a ratio measured above load 1.5 is not a result. Pure functions
of the loads and the core count; nothing is timed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("load_rule", Path(__file__).resolve().parents[1] / "benchmarks" /
                                               "load_rule.py")  # fmt: skip
load_rule = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(load_rule)


def test_a_quiet_comparison_is_a_result_and_says_its_loads_and_cores():
    assert load_rule.verdict(0.4, 0.9, 2) == "load 0.4 -> 0.9 on 2 cores (0 of them the benchmark's): result"
    assert load_rule.counts(1.5, 1.5)  # the limit itself is allowed: "above 1.5" is not a result


def test_the_benchmarks_own_threads_are_not_counted_against_it():
    assert load_rule.counts(0.2, 2.9, threads=2)  # 2 of the 2.9 are its own threads
    assert not load_rule.counts(0.2, 3.6, threads=2)  # 1.6 added by other work while it ran
    assert not load_rule.counts(1.6, 1.6, threads=2)  # the others' load before is never excused


@pytest.mark.parametrize(("start", "end", "worst"), [(2.3, 6.1, "6.1"), (1.6, 0.2, "1.6"), (0.3, 1.51, "1.51")])
def test_a_load_above_the_limit_at_either_end_is_not_a_result(start, end, worst):
    assert not load_rule.counts(start, end)
    expected = (f"load {start:g} -> {end:g} on 2 cores (0 of them the benchmark's): "
                f"NOT A RESULT (others' load {worst} > 1.5)")
    assert load_rule.verdict(start, end, 2) == expected


def test_strict_exits_only_when_some_ratio_is_not_a_result():
    load_rule.finish(all_count=False, strict=False)  # the marked table is enough without --strict
    load_rule.finish(all_count=True, strict=True)
    with pytest.raises(SystemExit) as stop:
        load_rule.finish(all_count=False, strict=True)
    assert "not a result" in str(stop.value)  # a message, so the exit status is 1
