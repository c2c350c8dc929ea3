"""The project's rule for a speed ratio: a ratio measured above load 1.5 is not a result.

The machines are shared, and another job's threads take cores from both contestants, not always alike (one waits
for a descheduled BLAS or OpenMP worker more than the other). So every comparison records the 1-minute load average
(`os.getloadavg()[0]`) just before its first timed run and just after its last, prints both beside its ratio, and
calls the ratio a result only when neither exceeds LIMIT. Otherwise the raw times and the ratio are still printed,
marked "NOT A RESULT (load X > 1.5)", and `--strict` (for CI and for regenerating the docs) makes the run exit 1.

The load at the end counts the benchmark's own running threads too (about one per thread it times: a 2-thread
comparison adds up to 2), so the rule reads the end's load less those threads: the load before is the others' work
alone, the load after less the benchmark's own threads is what the others added while it ran.
"""

from __future__ import annotations

import argparse
import os
import time

LIMIT = 1.5


def load_now() -> float:
    """The 1-minute load average, to two decimals."""
    return round(os.getloadavg()[0], 2)


def settled_load(limit: float = LIMIT, wait: float = 120.0) -> float:
    """The load just before a comparison, after waiting (at most `wait` seconds) for it to fall to `limit`: the
    1-minute average still holds the previous comparison's own threads for a while (it decays as e^(−t/60 s))."""
    deadline = time.monotonic() + wait
    while (load := load_now()) > limit and time.monotonic() < deadline:
        time.sleep(5)
    return load


def others_load(start: float, end: float, threads: int = 0) -> float:
    """The load of other work around a comparison timed on `threads` threads: the worse of the load before and the
    load after less the benchmark's own threads."""
    return round(max(start, end - threads), 2)


def counts(start: float, end: float, threads: int = 0, limit: float = LIMIT) -> bool:
    """Whether a ratio measured between loads `start` and `end` (on `threads` threads) is a result."""
    return others_load(start, end, threads) <= limit


def verdict(start: float, end: float, cores: int, threads: int = 0, limit: float = LIMIT) -> str:
    """The words printed beside a ratio: the loads and the core count, then whether the ratio is a result."""
    loads = f"load {start:g} -> {end:g} on {cores} cores ({threads} of them the benchmark's): "
    if counts(start, end, threads, limit):
        return loads + "result"
    return loads + f"NOT A RESULT (others' load {others_load(start, end, threads):g} > {limit:g})"


def add_strict_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--strict", action="store_true",
                        help=f"exit 1 if any ratio was measured above load {LIMIT:g} (CI, docs regeneration)")


def finish(all_count: bool, strict: bool) -> None:
    """Exit 1 under `--strict` when some ratio was not a result; otherwise return (the table is already printed)."""
    if strict and not all_count:
        raise SystemExit(f"--strict: a ratio above was measured above load {LIMIT:g}, so this run is not a result")
