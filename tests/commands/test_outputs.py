"""What a run writes besides lab 01's files: metrics.json / metrics.parquet with `include`, report.html,
environment.yaml and logs/train.log."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
import yaml
from test_run import log_rows, train_tiny, write_tiny_run

from minitrain.monitor.html_report import markdown_to_html
from minitrain.monitor.metrics_files import select_columns

pytestmark = pytest.mark.slow


def csv_table(text: str) -> list[dict]:
    return [{k: (float(v) if v else None) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]


def test_metrics_in_json_and_parquet_hold_the_csv_table_and_include_picks_columns(tmp_path):
    import pyarrow.parquet as pq

    config = write_tiny_run(tmp_path)
    run = tmp_path / "run"
    train_tiny(config, run, ["output.metrics.format=json"])
    full = csv_table((run / "metrics.csv").read_text())
    data = json.loads((run / "metrics.json").read_text())
    assert data["columns"] == ["step", "loss", "lr", "grad_norm", "val_loss", "val_ppl"]
    assert [{k: (None if v is None else float(v)) for k, v in row.items()} for row in data["rows"]] == full

    train_tiny(config, run, ["output.metrics.format=parquet", "output.metrics.include=[train_loss, val_ppl]"],
               overwrite=True)
    table = pq.read_table(run / "metrics.parquet")
    assert table.column_names == ["step", "loss", "val_ppl"]
    assert str(table.schema.field("step").type) == "int64"
    assert table.to_pylist() == [{"step": int(r["step"]), "loss": r["loss"], "val_ppl": r["val_ppl"]} for r in full]
    assert len(csv_table((run / "metrics.csv").read_text())[0]) == 6  # metrics.csv keeps every column

    # format csv: include applies to it, and no other file
    train_tiny(config, run, ["output.metrics.format=csv", "output.metrics.include=[learning_rate]"], overwrite=True)
    assert (run / "metrics.csv").read_text().splitlines()[0] == "step,lr" and not (run / "metrics.parquet").exists()
    assert select_columns(["step", "loss", "grad_norm/a", "grad_norm/b"], ["grad_norm/*"]) == [
        "step", "grad_norm/a", "grad_norm/b"]


def test_a_run_writes_metrics_parquet_by_default(tmp_path):
    # the spec's §15.3: every run writes metrics.parquet (pyarrow installed: minitrain[parquet], in dev)
    import pyarrow.parquet as pq

    run = tmp_path / "run"
    train_tiny(write_tiny_run(tmp_path), run)
    full = csv_table((run / "metrics.csv").read_text())
    table = pq.read_table(run / "metrics.parquet")
    assert table.column_names == ["step", "loss", "lr", "grad_norm", "val_loss", "val_ppl"]
    assert table.to_pylist() == [{**row, "step": int(row["step"])} for row in full]


def test_html_report_is_one_self_contained_page(tmp_path):
    config = write_tiny_run(tmp_path, plots=True)  # the page embeds them
    run = tmp_path / "run"
    results = train_tiny(config, run, ["output.report.format=html"])
    page = (run / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert 'src="data:image/png;base64,' in page and "loss_curve.png" not in page.split("alt=")[0]
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing loaded from elsewhere
    assert f"<td>{results['val_ppl']:.4g}</td>" in page
    assert "<h2>Training quality:" in page
    # Text is escaped and code spans kept: a prompt with | and < shows as written.
    html = markdown_to_html("# T\n\n| a | b |\n|---|---|\n| `x\\|y` | <b> |\n", tmp_path)
    assert "<td><code>x|y</code></td><td>&lt;b&gt;</td>" in html


def run_plain(config, run, **keys):
    """train_tiny with the progress display on (plain lines: the test's output is no terminal)."""
    from minitrain.config import load_config
    from minitrain.training.run import run_training

    return run_training(load_config(config), run, models_dir=config.parent / "models",
                        baseline_path=config.parent / "baseline.json", **keys)


def test_a_run_that_shows_nothing_still_keeps_its_log(tmp_path, capsys):
    # the spec's §15.3: every run writes logs/ (the tiny config has monitoring.progress: none)
    run = tmp_path / "run"
    train_tiny(write_tiny_run(tmp_path), run)
    assert capsys.readouterr().out == ""  # nothing on the screen
    log = (run / "logs" / "train.log").read_text().splitlines()
    assert [line.split(" |")[0] for line in log if line.startswith("step ") and "/24" in line] == [
        f"step {n}/24" for n in range(2, 25, 2)]
    assert any(line.startswith("step 23: val_loss") for line in log)


def test_environment_yaml_and_the_console_log(tmp_path):
    config = write_tiny_run(tmp_path)
    config.write_text(config.read_text().replace("monitoring: {progress: none}", "monitoring: {progress: plain}"))
    run = tmp_path / "run"
    run_plain(config, run)
    env = yaml.safe_load((run / "environment.yaml").read_text())
    assert {"python", "libraries", "os", "cpu", "ram_gb", "blas"} <= env.keys()
    assert env["libraries"]["numpy"] and env["cpu"]["logical_cores"] >= 1 and "threads" in env["blas"]
    log = (run / "logs" / "train.log").read_text().splitlines()
    assert [line.split(" |")[0] for line in log if line.startswith("step ") and "/24" in line] == [
        f"step {n}/24" for n in range(2, 25, 2)]
    assert any(line.startswith("step 23: val_loss") for line in log)
    # A resume appends to the same log.
    run_plain(config, run, resume=run / "checkpoints" / "step-16.safetensors")
    assert len((run / "logs" / "train.log").read_text().splitlines()) > len(log)
    assert log_rows(run)[-1]["step"] == 23
