"""The live dashboard (`minitrain watch`, `train --tui`): frames rendered to a virtual terminal at known states of a
run folder built here, the tailing of files being written, the refusals, and one tiny run trained with and without
--tui to the same bytes."""

from __future__ import annotations

import io
import json
import math
import sys
import threading
from pathlib import Path

from rich.console import Console

from minitrain import cli
from minitrain.config.observing import Chart, DashboardConfig
from minitrain.course.fixtures import write_tiny_run
from minitrain.monitor.dashboard import frame, watch
from minitrain.monitor.run_view import RunView
from minitrain.monitor.text_charts import buckets, column_levels, columns_text, curve_chart
from minitrain.runs.run_lock import RunLock

TOTAL = 101


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def write_lines(path: Path, rows: list, mode: str = "a") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode, encoding="utf-8") as f:
        f.writelines((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows)


def train_rows(steps: range) -> list[dict]:
    """loss 5 − step/20 (a straight fall), lr 1e-3, grad_norm 1 + step/100."""
    return [{"step": s, "loss": 5 - s / 20, "lr": 1e-3, "grad_norm": 1 + s / 100} for s in steps]


def make_run(root: Path, status: str = "running", dashboard: str = "") -> Path:
    run = root / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"status": status, "total_steps": TOTAL}), encoding="utf-8")
    (run / "config.resolved.yaml").write_text(
        "name: tiny\ntraining: {batch_size: 4, grad_accumulation: 2}\n" + dashboard, encoding="utf-8")
    val = {"step": 20, "val_loss": 4.5, "val_ppl": math.exp(4.5)}
    write_lines(run / "train_log.jsonl", [*train_rows(range(0, 21, 10)), val])
    return run


def render(view: RunView, settings: DashboardConfig | None = None, width: int = 80) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    console.print(frame(view, settings or DashboardConfig(), width))
    return console.export_text()


def test_a_frame_shows_the_numbers_and_the_eta_of_the_pace_seen(tmp_path):
    run, clock = make_run(tmp_path), Clock()
    view = RunView(run, clock=clock)
    view.poll()  # steps 0-20 seen at t = 0
    assert "eta         —" in render(view)  # one note of the pace is none
    write_lines(run / "train_log.jsonl", train_rows(range(30, 41, 10)))
    clock.now = 10.0
    view.poll()  # step 40 seen at t = 10: 20 steps in 10 s
    text = render(view)
    # 0.5 s a step; 41 of 101 steps done: 60 × 0.5 = 30 s left. Examples: batch 4 × accumulation 2 = 8 a step.
    assert "throughput  2 steps/s  16 examples/s" in text
    assert "eta         30s" in text
    assert "step 41/101 " in text and " 41%  eta 30s" in text
    assert "loss        3          best 3 at step 40" in text  # 5 − 40/20
    assert "val_loss    4.5        best 4.5 at step 20" in text
    assert "grad_norm   1.4 " in text
    assert "running  ·  step 41 of 101  ·  " in text
    assert "no system metrics" in text and "none" in text.split("alerts")[1]


def test_the_curve_of_a_falling_loss_falls_from_full_height_to_one_eighth(tmp_path):
    run = make_run(tmp_path)
    write_lines(run / "train_log.jsonl", train_rows(range(30, 101, 10)))
    view = RunView(run)
    view.poll()
    lines = curve_chart(Chart(type="curve", metric="loss", height=3), view, 50)
    assert lines[0] == "loss: last 0, min 0 at step 100 (11 values)"
    assert [line[:12] for line in lines[1:]] == ["         5 ┤", "           │", "         0 ┤"]
    body = [line[12:] for line in lines[1:]]
    assert all(len(row) == 11 for row in body)  # one column per value: 11 fit in 50 - 12
    heights = [sum(8 if c == "█" else "▁▂▃▄▅▆▇".find(c) + 1 for c in col) for col in zip(*body, strict=True)]
    # Levels 1 + round((v − 0) / 5 · 23) for v = 5, 4.5, ..., 0: 24, 22, 19, 17, ... 1.
    assert heights == [1 + round(v / 5 * 23) for v in (5 - s / 20 for s in range(0, 101, 10))]
    assert heights == sorted(heights, reverse=True) and heights[0] == 24 and heights[-1] == 1


def test_columns_are_bucket_means_drawn_in_eighths():
    assert buckets([1, 2, 3, 4, 5, 6], 3) == [1.5, 3.5, 5.5]
    assert buckets([1, 2, 3, 4, 5], 2) == [1.5, 4.0]  # runs of 2 and 3
    assert buckets([1, 2], 10) == [1, 2]
    assert column_levels([0.0, 1.0, 0.5, math.nan], 2) == [1, 16, 1 + round(0.5 * 15), 0]
    assert column_levels([3.0, 3.0], 2) == [8, 8]
    assert columns_text([16, 9, 3, 0], 2) == ["█▁  ", "██▃ "]


def test_a_truncated_last_line_waits_and_a_replaced_log_starts_over(tmp_path):
    run = make_run(tmp_path)
    view = RunView(run)
    view.poll()
    assert view.steps_done == 21
    with open(run / "train_log.jsonl", "a", encoding="utf-8") as f:
        f.write('{"step": 30, "loss": 3.5, "lr"')  # the loop is still writing this row
    view.poll()
    assert view.steps_done == 21
    with open(run / "train_log.jsonl", "a", encoding="utf-8") as f:
        f.write(': 0.001, "grad_norm": 1.3}\n')
    view.poll()
    assert view.steps_done == 31 and view.train[-1]["loss"] == 3.5
    replacement = run / "new.jsonl"  # a resume rewrites the log up to its checkpoint, atomically
    write_lines(replacement, train_rows(range(0, 11, 10)))
    replacement.replace(run / "train_log.jsonl")
    view.poll()
    assert [r["step"] for r in view.train] == [0, 10] and view.val == []


def test_system_metrics_samples_and_alerts_are_shown(tmp_path):
    run = make_run(tmp_path)
    write_lines(run / "system_metrics.jsonl", [{"time": 3.0, "step": 20, "cpu_percent": 97.6, "memory_mb": 150.2,
                                               "disk_read_mb": 0.0, "disk_write_mb": 1.25}])
    write_lines(run / "samples.jsonl", [
        {"step": 10, "prompt": "ir|P1|", "expected": "voy", "predicted": "vo", "correct": False},
        {"step": 20, "prompt": "ir|P1|", "expected": "voy", "predicted": "voy", "correct": True},
        {"step": 20, "prompt": "ser|P1|", "expected": "soy", "predicted": "sos", "correct": False}])
    write_lines(run / "logs" / "train.log", ["step 10/101 | loss 4.5", "warn: loss > 4: warn",
                                             "step 20/101 | loss 4.0"])
    view = RunView(run)
    view.poll()
    text = render(view, width=100)
    assert "at 3 s: cpu 98 %   memory 150 MB   disk read 0.0 MB, written 1.2 MB" in text
    assert "samples at step 20: 1/2 right" in text
    assert "ser|P1|   soy        sos         ✗" in text and "vo " not in text  # step 10's samples are gone
    assert "warn: loss > 4: warn" in text and "step 10/101" not in text


def test_the_runs_own_dashboard_section_picks_what_is_shown(tmp_path, capsys):
    dashboard = ("monitoring:\n  dashboard:\n    metrics: [learning_rate]\n"
                 "    charts: [{type: sparkline, metric: grad_norm, window: 2}]\n")
    run = make_run(tmp_path, status="completed", dashboard=dashboard)
    assert cli.main(["watch", str(run), "--once"]) == 0
    text = capsys.readouterr().out
    assert "lr  0.001" in text and "loss" not in text and "throughput" not in text
    assert "grad_norm  ▁█  1.2" in text  # the last 2 of 1.0, 1.1, 1.2


def test_watch_of_a_run_no_one_writes_draws_its_last_frame_and_returns(tmp_path):
    run = make_run(tmp_path, status="completed")
    console = Console(record=True, width=80, file=io.StringIO())
    watch(run, console=console)
    assert "completed  ·  step 21 of 101" in console.export_text()


def test_watch_redraws_while_the_run_is_written_and_ends_with_its_last_rows(tmp_path):
    run = make_run(tmp_path)
    console = Console(record=True, width=80, file=io.StringIO())
    with RunLock(run):  # a training process writes the run
        watching = threading.Thread(target=watch, args=(run,), kwargs={"console": console, "refresh_ms": 50})
        watching.start()
        write_lines(run / "train_log.jsonl", train_rows(range(30, 41, 10)))
        watching.join(0.3)
        assert watching.is_alive()  # still redrawing
        (run / "manifest.json").write_text(json.dumps({"status": "interrupted", "total_steps": TOTAL}))
    watching.join(5)
    assert not watching.is_alive()
    last = console.export_text().split("\n\n")[-1]
    assert "interrupted  ·  step 41 of 101" in last and "eta         —" in last  # it stopped short: no time left


def test_watch_refuses_a_folder_without_a_run_and_a_damaged_log(tmp_path, capsys):
    assert cli.main(["watch", str(tmp_path), "--once"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path}: not a run folder") and err.count("\n") == 1
    run = make_run(tmp_path)
    write_lines(run / "train_log.jsonl", ["not json", json.dumps({"step": 40, "loss": 1.0})])
    assert cli.main(["watch", str(run), "--once"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {run / 'train_log.jsonl'}:5: ") and err.count("\n") == 1
    write_lines(run / "train_log.jsonl", [json.dumps({"step": 1, "loss": "high"})], mode="w")
    assert cli.main(["watch", str(run), "--once"]) == 2
    assert "a log row holds numbers only" in capsys.readouterr().err


def test_watch_without_rich_names_the_extra(tmp_path, capsys, monkeypatch):
    run = make_run(tmp_path)
    monkeypatch.setitem(sys.modules, "rich", None)
    assert cli.main(["watch", str(run), "--once"]) == 2
    assert "pip install 'minitrain[tui]'" in capsys.readouterr().err


def test_the_dashboard_keys_are_checked_against_what_the_run_logs(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("training: {total_steps: 10}\nmonitoring:\n  dashboard:\n"
                      "    metrics: [loss, learning_rate, eta, grad_nrom]\n"
                      "    charts: [{type: curve, metric: throughput}, {type: progress, window: 3}]\n",
                      encoding="utf-8")
    assert cli.main(["validate", str(config), "--no-data"]) == 2
    err = capsys.readouterr().err
    assert "charts[1]: window: a progress chart takes show_eta" in err
    config.write_text(config.read_text(encoding="utf-8").replace(", window: 3", ""), encoding="utf-8")
    assert cli.main(["validate", str(config), "--no-data"]) == 2
    err = capsys.readouterr().err
    assert "metrics[3]: grad_nrom is never logged — did you mean 'grad_norm'?" in err
    assert "charts[0].metric: throughput is never logged" in err  # a figure of the metrics, not a logged curve
    assert "metrics[0]" not in err and "metrics[1]" not in err and "metrics[2]" not in err


def test_a_run_trained_with_tui_writes_the_same_bytes(tmp_path, capsys):
    train = ["train", str(write_tiny_run(tmp_path)), "--set", "scheduler.total_steps=8", "--out-dir"]
    assert cli.main([*train, str(tmp_path / "plain")]) == 0
    assert cli.main([*train, str(tmp_path / "tui"), "--tui"]) == 0
    shown = capsys.readouterr().out
    assert "completed  ·  step 8 of 8" in shown  # the last frame, drawn after training
    assert "╯\nrun folder: " in shown
    plain, tui = tmp_path / "plain", tmp_path / "tui"
    names = ["train_log.jsonl", "metrics.csv", *(f"checkpoints/{p.name}" for p in (plain / "checkpoints").iterdir()),
             *(f"models/{p.name}" for p in (plain / "models").iterdir())]
    assert len(names) > 4
    for name in names:
        assert (tui / name).read_bytes() == (plain / name).read_bytes(), name
