"""Fixtures shared by the Hub tests (test_hub_*.py): the stand-in Hub and a finished run (see fakehub.py); and the
damage suite's count of cases, printed at the end of the session."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakehub import TOKEN, FakeHub, make_run, serving


@pytest.fixture
def hub(monkeypatch, tmp_path) -> Iterator[FakeHub]:
    """The stand-in Hub, with the client pointed at it, HF_HOME in tmp_path/hf and HF_TOKEN = TOKEN (alice's)."""
    with serving(monkeypatch, tmp_path / "hf", TOKEN, {TOKEN: "alice"}) as server:
        yield server


@pytest.fixture
def run(tmp_path) -> Path:
    """A finished run folder (fakehub.make_run under tmp_path/work: work/run, work/models, work/data)."""
    return make_run(tmp_path / "work")


def pytest_terminal_summary(terminalreporter) -> None:
    damage = sys.modules.get("test_damage")
    if damage is not None and damage.STATS["cases"]:
        terminalreporter.write_line(damage.summary())
