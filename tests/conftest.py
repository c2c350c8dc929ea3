"""Fixtures shared by the Hub tests (hub/test_hub_*.py): the stand-in Hub and a finished run (see fakehub.py); and
the damage suite's count of cases, printed at the end of the session.

The tests mirror the package: tests/<room>/ holds the tests of minitrain/<room>/, and the tests of the house as a
whole (layering, the budget, the registries' contracts, the docs' examples) sit here. The shared helpers (fakehub,
text_fixtures, op_checks, ...) sit here too, and a test imports another's helpers by module name (`from test_run
import ...`), so every room's folder is put on the import path below, as this folder is.

`make test` runs the suite in several processes (pytest-xdist, -n auto): every test writes only under its own
tmp_path and serves on port 0, so none sees another's files or ports. The damage counts are a module's state in
the worker that ran those tests; each worker hands its counts to the controller, which adds them up.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOMS = sorted(room for room in Path(__file__).parent.iterdir() if room.is_dir() and any(room.glob("test_*.py")))
sys.path[1:1] = [str(room) for room in ROOMS]

from fakehub import TOKEN, FakeHub, make_run, serving  # noqa: E402

from minitrain.common.runtime import set_blas_threads  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):
    _SHARE = max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    os.environ["OPENBLAS_NUM_THREADS"] = str(_SHARE)
    set_blas_threads(_SHARE)


@pytest.fixture(autouse=True)
def offline_hub(monkeypatch) -> None:
    """No test reaches huggingface.co: the Hub client is offline unless a test serves the stand-in Hub (the `hub`
    fixture turns it back on), so a Hub id a config names is answered from the cache at once instead of after
    the client's connection timeouts (23 s each on a machine without internet), in this process and its children."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


@pytest.fixture(autouse=True)
def english(monkeypatch) -> None:
    """Every test sees the course's messages in English, whatever the machine's locale (minitrain/course/i18n.py);
    a test of the Spanish ones sets the language itself."""
    monkeypatch.setenv("MINITRAIN_LANG", "en")


@pytest.fixture
def hub(monkeypatch, tmp_path) -> Iterator[FakeHub]:
    """The stand-in Hub, with the client pointed at it, HF_HOME in tmp_path/hf and HF_TOKEN = TOKEN (alice's)."""
    with serving(monkeypatch, tmp_path / "hf", TOKEN, {TOKEN: "alice"}) as server:
        yield server


@pytest.fixture
def run(tmp_path) -> Path:
    """A finished run folder (fakehub.make_run under tmp_path/work: work/run, work/models, work/data)."""
    return make_run(tmp_path / "work")


# Long tests that sat at the back of the collection start first. xdist (--dist worksteal) hands each worker one
# half of the collection in order, and an idle worker takes the back half of a busy one's queue: a 30-second test
# near the end can run alone while the other core waits. The lab commands' test is left where it is: its seven
# groups of processes, started before anything has filled numba's disk cache, would compile every kernel side by
# side. A name that is no longer collected moves nothing.
LONG_FIRST = ("tests/test_wheel.py::", "tests/training/test_experiment_21_lora.py::",
              "tests/training/test_experiment_25_pruning.py::",
              "tests/merging/test_merging_experiment.py::test_the_pipeline_runs",
              "tests/distillation/test_distillation_run.py::test_experiment_24")


def pytest_collection_modifyitems(items) -> None:
    def rank(item) -> int:
        return next((i for i, prefix in enumerate(LONG_FIRST) if item.nodeid.startswith(prefix)), len(LONG_FIRST))

    items.sort(key=rank)  # stable: every other test keeps its place


WORKER_DAMAGE: Counter = Counter()  # the controller's sum of the workers' damage counts (xdist)


def pytest_sessionfinish(session) -> None:
    damage = sys.modules.get("test_damage")
    workeroutput = getattr(session.config, "workeroutput", None)  # set in an xdist worker only
    if workeroutput is not None and damage is not None:
        workeroutput["damage_stats"] = dict(damage.STATS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # xdist, in the controller: a worker has finished
    stats = getattr(node, "workeroutput", {}).get("damage_stats", {})
    for key, value in stats.items():
        WORKER_DAMAGE[key] = max(WORKER_DAMAGE[key], value) if key == "slowest" else WORKER_DAMAGE[key] + value


def pytest_terminal_summary(terminalreporter) -> None:
    damage = sys.modules.get("test_damage")
    if damage is None and WORKER_DAMAGE["cases"]:
        from test_damage import STATS, summary  # the controller never collected it: its counts came from workers

        STATS.update(WORKER_DAMAGE)
        terminalreporter.write_line(summary())
    elif damage is not None and damage.STATS["cases"]:
        terminalreporter.write_line(damage.summary())
