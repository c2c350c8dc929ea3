"""Damage for sweeps, generated rather than listed: search spaces of every size, and a second writer on a sweep folder.

Spaces: a grid of 0 to 6 keys of 1 to 200 values each, 1 to 10^12 random draws, 0 to 60 seeds, so from one trial
to 10^27. Every space is counted without building it; one of at most MAX_TRIALS expands to exactly that many
trials, in order, with distinct ids; a larger one is refused by `minitrain sweep` with one `error:` line naming its
largest factor, exit 2, before anything is drawn or written (so 10^36 trials cost what one does).

Writers: a sweep folder in some state (missing, empty, holding this sweep's or another sweep's table, a damaged
table, trial folders) while another sweep holds its lock: the second sweep is refused (exit 2, one error line)
and the folder is byte for byte as it was. Without the lock, a folder holding another sweep's table is refused
the same way. Nothing here trains: every case ends at a refusal.

`make test` runs a fixed number of examples from a fixed seed; `make fuzz` more (MINITRAIN_DAMAGE_EXAMPLES, as
tests/training/test_damage.py, whose in-process runner, hang guard and counts these cases share).
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_damage import EXAMPLES, FUZZ, STATS, count, run_cli

from minitrain.course.fixtures import write_tiny_run
from minitrain.runs.run_lock import RunLock
from minitrain.sweep.space import MAX_TRIALS, SweepSpec, expand

pytestmark = pytest.mark.slow
SETTINGS = settings(max_examples=EXAMPLES, derandomize=not FUZZ, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    return write_tiny_run(tmp_path_factory.mktemp("damage-sweep"))


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(argv: list[str], what: str) -> str:
    """Run `minitrain ARGV`, which must refuse: exit 2 and exactly one `error:` line (no traceback); its stderr."""
    code, _, err = run_cli(argv)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, f"{what}: minitrain {argv} -> {code}\n{err}"
    STATS["failed"] += 1
    return err


sizes = st.one_of(st.integers(1, 12), st.integers(1, 200))  # the case: 4 keys of 100 values


@SETTINGS
@given(grid=st.lists(sizes, max_size=6), samples=st.one_of(st.none(), st.integers(1, 2**31 - 1)),
       seeds=st.integers(0, 60))
def test_a_space_of_any_size_is_counted_and_expanded_or_refused(config, grid, samples, seeds):
    count("sweep spaces")
    keys = [f"model.k{i}" for i in range(len(grid))]
    factors = {**{f"grid {key}": n for key, n in zip(keys, grid, strict=True)}, "samples": samples or 1,
               "seeds": seeds or 1}
    expected = math.prod(factors.values())
    argv = ["sweep", str(config), *(f"--grid={key}={','.join(map(str, range(n)))}" for key, n in zip(keys, grid,
                                                                                                  strict=True))]
    argv += [*(["--random", "model.dropout=uniform(0, 0.2)", "--samples", str(samples)] if samples else []),
             *(["--seeds", ",".join(map(str, range(seeds)))] if seeds else [])]
    with tempfile.TemporaryDirectory(prefix="minitrain-damage-sweep-") as tmp:
        out = Path(tmp) / "s"
        if expected > MAX_TRIALS:
            err = refused([*argv, "--out-dir", str(out)], f"{expected} trials")
            largest = max(factors, key=lambda name: factors[name])
            assert f"the space has {expected:,} trials" in err and f"shrink {largest} ({factors[largest]:,}" in err
            assert not out.exists()
            return
    spec = SweepSpec(base=str(config), grid={key: list(range(n)) for key, n in zip(keys, grid, strict=True)},
                     random={"model.dropout": "uniform(0, 0.2)"} if samples else {}, samples=samples,
                     seeds=list(range(seeds)))
    trials = expand(spec)
    assert spec.count() == expected == len(trials) == len({t.id for t in trials})
    assert [t.index for t in trials] == list(range(expected))
    assert trials[-1].params.keys() >= set(keys) and all(trials[-1].params[k] == n - 1 for k, n in
                                                          zip(keys, grid, strict=True))


STATES = ("missing", "empty", "this table", "another table", "damaged table", "trial folders")


def prepare(out: Path, state: str, config: Path, junk: bytes) -> None:
    """The sweep folder `out` in `state` (this sweep: a grid of optimizer.lr_max=0.001 over `config`)."""
    if state == "missing":
        return
    out.mkdir()
    space = {"grid": {"optimizer.lr_max": [0.001]}, "random": {}, "samples": None, "sampler_seed": 0, "seeds": [],
             "set": {}}
    if state in ("this table", "another table"):
        other = {"grid": {"optimizer.lr_max": [0.5]}} if state == "another table" else {}
        (out / "sweep.json").write_text(json.dumps({"base": str(config), "space": {**space, **other}, "trials": []}))
    elif state == "damaged table":
        (out / "sweep.json").write_bytes(junk)
    elif state == "trial folders":
        (out / "trials" / "000-lr_max=0.001").mkdir(parents=True)
        (out / "trials" / "000-lr_max=0.001" / "manifest.json").write_bytes(junk)


@SETTINGS
@given(state=st.sampled_from(STATES), junk=st.binary(max_size=64), flags=st.lists(st.sampled_from(
    [["--seeds", "1,2"], ["--workers", "1"], ["--metric", "dev_ppl"], ["--name", "x"]]), max_size=2))
def test_a_second_writer_on_a_sweep_folder_is_refused_and_changes_nothing(config, state, junk, flags):
    count("sweep folders")
    with tempfile.TemporaryDirectory(prefix="minitrain-damage-sweep-") as tmp:
        out = Path(tmp) / "s"
        prepare(out, state, config, junk)
        argv = ["sweep", str(config), "--grid", "optimizer.lr_max=1e-3", *(f for flag in flags for f in flag),
                "--out-dir", str(out)]
        with RunLock(out):  # another sweep writing this folder
            before = files(out)
            err = refused(argv, state)
            assert err.startswith(f"error: {out} is in use by another minitrain process") and files(out) == before
        if state == "another table":  # no other writer, but the table is another sweep's
            before = files(out)
            assert "holds the table of another sweep" in refused(argv, state) and files(out) == before
