"""The live training dashboard (minitrain[tui], rich): `minitrain watch RUN` and `minitrain train ... --tui`.

    watch("runs/x")                              # redraws until no process writes the run, then returns
    watch("runs/x", once=True)                   # one frame
    with live_dashboard("runs/x", settings):     # train --tui: redrawn by a thread while the block trains
        run_training(...)

A frame shows, from the run folder's files only (minitrain/monitor/run_view.py tails them): the run's status, the
numbers of `monitoring.dashboard.metrics` (last and best value of each logged metric, throughput, ETA), its
`charts` (minitrain/monitor/text_charts.py), the last system metrics row, the last validation samples and the
alerts and warnings the run printed. The renderer only reads, on its own thread, every `refresh_ms`: the run's
files are the same bytes with and without it (tests/monitor/test_dashboard.py trains a tiny run both ways).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.extras import require
from minitrain.common.registry import load
from minitrain.config.observing import CHARTS, DashboardConfig
from minitrain.config.section import HIGHER_IS_BETTER
from minitrain.monitor.progress import format_seconds
from minitrain.monitor.run_view import RunView, is_run_folder
from minitrain.runs.run_files import RESOLVED_CONFIG
from minitrain.runs.run_lock import writer_of

SAMPLES_SHOWN, ALERTS_SHOWN = 5, 5
_BEST = ("loss", "val_loss", "val_ppl", *HIGHER_IS_BETTER)  # the metrics whose best value means something


def _console(file: Any = None) -> Any:
    from rich.console import Console

    return Console(file=file if file is not None else sys.stdout)


def settings_of(view: RunView) -> DashboardConfig:
    """The run's own `monitoring.dashboard` (config.resolved.yaml), or the default dashboard."""
    section = ((view.config.get("monitoring") or {}).get("dashboard")) if isinstance(view.config, dict) else None
    try:
        return DashboardConfig.model_validate(section or {})
    except ValidationError as exc:
        raise UserError(f"{view.run / RESOLVED_CONFIG}: monitoring.dashboard is not valid: "
                        f"{exc.errors()[0]['msg']}", BAD_INPUT) from None


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def metric_rows(view: RunView, settings: DashboardConfig) -> list[tuple[str, str, str]]:
    """(name, last, best) for each of `settings.metrics`: best is the lowest (the highest for an accuracy-like
    metric) with its step, for losses and val metrics; throughput in steps/s (and examples/s); eta."""
    rows = []
    for name in settings.metrics:
        if name == "throughput":
            pace, examples = view.seconds_per_step(), view.examples_per_step()
            per_second = "—" if not pace else f"{1 / pace:.3g} steps/s"
            rows.append((name, per_second, f"{examples / pace:.4g} examples/s" if pace and examples else ""))
        elif name == "eta":
            eta = view.eta_seconds()
            rows.append((name, "—" if eta is None else format_seconds(eta), ""))
        else:
            key = view.key_of(name)
            logged = view.rows_of(key)
            if not logged:
                rows.append((key, "—", ""))
                continue
            best = ""
            if key in _BEST:
                pick = max if key in HIGHER_IS_BETTER else min
                top = pick(logged, key=lambda r: r[key])
                best = f"best {_number(top[key])} at step {top['step']}"
            rows.append((key, _number(logged[-1][key]), best))
    return rows


def _system_line(view: RunView) -> str:
    if not view.system:
        return "no system metrics (monitoring.system turns them on)"
    last = view.system[-1]
    parts = [f"cpu {last['cpu_percent']:.0f} %" if "cpu_percent" in last else "",
             f"memory {last['memory_mb']:.0f} MB" if "memory_mb" in last else "",
             f"disk read {last['disk_read_mb']:.1f} MB, written {last['disk_write_mb']:.1f} MB"
             if "disk_write_mb" in last else ""]
    return f"at {last.get('time', 0):.0f} s: " + "   ".join(p for p in parts if p)


def frame(view: RunView, settings: DashboardConfig, width: int) -> Any:
    """One frame of the dashboard, as a rich renderable `width` columns wide."""
    require("rich", "tui", "the dashboard")
    from rich import box
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    inner = max(width - 4, 10)  # a panel's border and padding
    total = view.total_steps
    head = Text(f"{view.status}  ·  step {view.steps_done}" + (f" of {total}" if total else "") + f"  ·  {view.run}",
                style="bold", no_wrap=True, overflow="ellipsis")
    numbers = Table.grid(padding=(0, 2))
    for name, last, best in metric_rows(view, settings):
        numbers.add_row(Text(name, style="cyan"), last, best)
    charts = [line for chart in settings.charts for line in load(CHARTS[chart.type].draw)(chart, view, inner)]
    parts = [head, Panel(numbers, title="metrics", title_align="left"),
             Panel(Text("\n".join(charts)), title="charts", title_align="left"),
             Panel(Text(_system_line(view)), title="system", title_align="left")]
    if view.samples:
        step = view.samples[-1].get("step")
        last = [s for s in view.samples if s.get("step") == step]
        table = Table(box=box.SIMPLE, padding=(0, 1), expand=False)
        for column in ("prompt", "expected", "predicted", ""):
            table.add_column(column)
        for s in last[:SAMPLES_SHOWN]:
            table.add_row(str(s.get("prompt", "")), str(s.get("expected", "")), str(s.get("predicted", "")),
                          "✓" if s.get("correct") else "✗")
        right = sum(bool(s.get("correct")) for s in last)
        parts.append(Panel(table, title=f"samples at step {step}: {right}/{len(last)} right", title_align="left"))
    alerts = "\n".join(view.alerts[-ALERTS_SHOWN:]) or "none"
    parts.append(Panel(Text(alerts, style="yellow" if view.alerts else ""), title="alerts", title_align="left"))
    return Group(*parts)


def watch(run_dir: str | os.PathLike, *, once: bool = False, console: Any = None,
          refresh_ms: int | None = None) -> None:
    """Draw the run's dashboard: one frame (`once`), or redrawn every refresh_ms (the run's own setting by
    default) while a process writes the run, then its last frame. A UserError (exit code 2) for a folder that
    holds no run or a damaged log line."""
    require("rich", "tui", "minitrain watch")
    from rich.live import Live

    console = console or _console()
    view = RunView(run_dir)
    view.poll()
    settings = settings_of(view)
    if once:
        console.print(frame(view, settings, console.width))
        return
    with Live(console=console, auto_refresh=False) as live:
        while True:
            writing = writer_of(view.run) is not None  # asked before the poll: its last frame reads what it wrote
            view.poll()
            live.update(frame(view, settings, console.width), refresh=True)
            if not writing:
                break
            time.sleep((refresh_ms or settings.refresh_ms) / 1000)
    _end_line(console)


def _follow(run_dir: str | os.PathLike, settings: DashboardConfig, live: Any, stop: threading.Event) -> None:
    """train --tui's thread: poll and redraw every refresh_ms until `stop`, then once more; a problem reading
    the files is shown in the frame, never raised into training."""
    from rich.text import Text

    view = None
    while True:
        last = stop.is_set()
        try:
            if view is None and is_run_folder(Path(run_dir)):  # the run may not have written its first file yet
                view = RunView(run_dir)
            if view is not None:
                view.poll()
            live.update(Text(f"waiting for the run's first files in {run_dir}") if view is None else
                        frame(view, settings, live.console.width), refresh=True)
        except UserError as exc:
            live.update(Text(f"the dashboard cannot read the run: {exc}"), refresh=True)
        if last:
            return
        stop.wait(settings.refresh_ms / 1000)


@contextmanager
def live_dashboard(run_dir: str | os.PathLike, settings: DashboardConfig | None) -> Iterator[None]:
    """train --tui: the dashboard of `run_dir` redrawn on a thread while the block runs; what the block prints
    appears above it (rich's redirection), and its last frame stays on the screen."""
    require("rich", "tui", "--tui")
    from rich.live import Live

    stop = threading.Event()
    live = Live(console=_console(), auto_refresh=False, redirect_stdout=True, redirect_stderr=True)
    thread = threading.Thread(target=_follow, args=(run_dir, settings or DashboardConfig(), live, stop),
                              name="minitrain-dashboard", daemon=True)
    with live:
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
    _end_line(live.console)


def _end_line(console: Any) -> None:
    if not console.is_terminal:  # rich ends the last frame's line on a terminal only
        console.line()
