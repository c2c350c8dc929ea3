"""Experiment tracking and system metrics against the real libraries: an MLflow SQLite store read back with
MlflowClient, TensorBoard event files read back with TensorBoard's EventAccumulator, the JSONL file, psutil."""

from __future__ import annotations

import json
import sys

import pytest
from test_run import log_rows, train_tiny, write_tiny_run

from minitrain.common.errors import UserError

pytestmark = pytest.mark.slow


def tracked(tmp_path, monitoring: str, extra: str = "", **keys):
    config = write_tiny_run(tmp_path, plots=True)  # the files a tracker gets include the plots
    config.write_text(config.read_text().replace("monitoring: {progress: none}", monitoring) + extra)
    return config, train_tiny(config, tmp_path / "run", **keys)


def test_mlflow_gets_params_metrics_per_step_status_and_files(tmp_path):
    from mlflow.tracking import MlflowClient

    config, results = tracked(tmp_path, "monitoring: {progress: none, tracking: {backend: mlflow, project: verbs, "
                                        "experiment: tiny, tags: {lab: '01'}}}")
    run_dir = tmp_path / "run"
    client = MlflowClient(f"sqlite:///{run_dir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("tiny")
    assert experiment.tags["project"] == "verbs"
    [run] = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    assert run.data.params["optimizer.lr_max"] == "0.003" and run.data.params["training.rng_seed"] == "42"
    assert run.data.tags["lab"] == "01" and run.data.tags["project"] == "verbs"
    # Tag keys are data other tools query (not module paths): their names stay.
    assert run.data.tags["minitrain.run_dir"] == str(run_dir.resolve())
    assert len(run.data.tags["minitrain.config_hash"]) == 64
    val = [r for r in log_rows(run_dir) if "val_ppl" in r]
    history = client.get_metric_history(run.info.run_id, "val_ppl")
    assert [(m.step, m.value) for m in history] == [(r["step"], r["val_ppl"]) for r in val]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "loss")] == [*range(0, 24, 2), 23]
    assert run.data.metrics["results.train_ppl"] == pytest.approx(results["train_ppl"])
    files = {f.path for f in client.list_artifacts(run.info.run_id)}
    assert {"results.json", "report.md", "config.resolved.yaml", "loss_curve.png", "model"} <= files
    [model] = client.list_artifacts(run.info.run_id, "model")
    assert model.path.endswith(".safetensors") and model.file_size > 0
    assert json.loads((run_dir / "tracking.json").read_text())["run_id"] == run.info.run_id

    # A resume continues the same MLflow run.
    train_tiny(config, run_dir, resume=run_dir / "checkpoints" / "step-16.safetensors")
    assert [r.info.run_id for r in client.search_runs([experiment.experiment_id])] == [run.info.run_id]
    assert client.get_run(run.info.run_id).info.status == "FINISHED"


def test_tensorboard_event_files_hold_scalars_histograms_and_text(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, results = tracked(tmp_path, "monitoring: {progress: none, tracking: {backend: tensorboard}}",
                         "callbacks:\n  - {type: gradient_monitor, interval: 10, config: {log_histogram: true}}\n"
                         "  - {type: sample_predictions, trigger: train_end, config: {num_samples: 3}}\n")
    run_dir = tmp_path / "run"
    events = EventAccumulator(str(run_dir / "tensorboard" / "run"), size_guidance={"scalars": 0, "histograms": 0,
                                                                                  "tensors": 0})
    events.Reload()
    rows = log_rows(run_dir)
    loss = [(r["step"], r["loss"]) for r in rows if "loss" in r]
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [(s, pytest.approx(v, rel=1e-6)) for s, v in loss]
    assert [e.step for e in events.Scalars("val_ppl")] == [0, 5, 10, 15, 20, 23]
    assert [e.step for e in events.Scalars("grad_norm/transformer.wte.weight")] == [0, 10, 20]
    assert events.Scalars("results/val_ppl")[0].value == pytest.approx(results["val_ppl"], rel=1e-6)
    assert "grad/transformer.wte.weight" in events.Tags()["histograms"]
    assert [h.step for h in events.Histograms("grad/transformer.wte.weight")] == [0, 10, 20]
    assert not (run_dir / "histograms").exists()  # the tracker kept them: no PNGs
    assert {"config/text_summary", "samples/text_summary", "status/text_summary"} <= set(events.Tags()["tensors"])


def test_jsonl_tracking_and_system_metrics(tmp_path):
    _, results = tracked(tmp_path, "monitoring: {progress: none, tracking: {backend: jsonl, project: p}, "
                                   "system: {interval: 100, metrics: [cpu_percent, memory_mb, disk_io]}}")
    run_dir = tmp_path / "run"
    lines = [json.loads(line) for line in (run_dir / "tracking.jsonl").read_text().splitlines()]
    assert lines[0]["event"] == "start" and lines[0]["params"]["model.d_model"] == 16
    assert lines[0]["experiment"] == tmp_path.name and lines[0]["project"] == "p"  # the run's name: its folder's
    assert lines[-1]["event"] == "end" and lines[-1]["status"] == "completed"
    assert lines[-1]["results"]["val_ppl"] == results["val_ppl"]
    logged = [(line["step"], line["values"]) for line in lines if line["event"] == "metrics"
              and "loss" in line["values"]]
    assert logged == [(r["step"], {k: v for k, v in r.items() if k != "step"}) for r in log_rows(run_dir)
                      if "loss" in r]

    samples = [json.loads(line) for line in (run_dir / "system_metrics.jsonl").read_text().splitlines()]
    assert samples, "at least the closing sample"
    assert set(samples[-1]) == {"time", "step", "cpu_percent", "memory_mb", "disk_read_mb", "disk_write_mb"}
    assert samples[-1]["memory_mb"] > 10 and samples[-1]["step"] == 23
    assert any(line["event"] == "metrics" and "system/memory_mb" in line["values"] for line in lines)
    # The clock-driven samples stay out of train_log.jsonl, which stays the same bytes as an unwatched run's.
    train_tiny(run_dir.parent / "config.yaml", tmp_path / "plain", ["monitoring.tracking.enabled=false"])
    assert (run_dir / "train_log.jsonl").read_bytes() == (tmp_path / "plain" / "train_log.jsonl").read_bytes()


def test_a_missing_extra_is_one_clear_error_before_anything_is_written(tmp_path, monkeypatch, capsys):
    from minitrain import cli
    from minitrain.common.extras import require
    from minitrain.config import ConfigError

    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # what a Python without the package raises
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    message = r"backend tensorboard needs the tensorboardX package, which is not installed here: pip install " \
              r"'minitrain\[tensorboard\]'"
    with pytest.raises(ConfigError, match=message) as error:
        tracked(tmp_path, "monitoring: {progress: none, tracking: {backend: tensorboard}}",
                "output: {metrics: {format: parquet}}\n")
    assert error.value.exit_code == 2 and "pip install 'minitrain[parquet]'" in str(error.value)
    assert not (tmp_path / "run").exists()  # refused before anything is written
    assert cli.main(["validate", str(tmp_path / "config.yaml")]) == 2
    assert "monitoring.tracking.backend: backend tensorboard needs" in capsys.readouterr().err
    with pytest.raises(UserError, match=r"--backend ray needs the nothere package.*minitrain\[ray\]"):
        require("nothere", "ray", "--backend ray")


def test_gpu_metrics_and_unreachable_trackers_are_refused(tmp_path):
    from minitrain.config import ConfigError, config_from_dict

    with pytest.raises(ConfigError) as error:
        config_from_dict({"training": {"total_steps": 10},
                          "monitoring": {"system": {"metrics": ["cpu_percent", "gpu_memory_mb"]},
                                         "tracking": {"backend": "wandb"}}})
    text = str(error.value)
    assert "monitoring.system.metrics[1]: gpu_memory_mb: minitrain trains on the CPU" in text
    assert "monitoring.tracking.backend: not supported: Weights & Biases is a hosted service" in text


def test_an_mlflow_store_that_fails_stops_tracking_not_training(tmp_path, monkeypatch, capsys):
    from mlflow.tracking import MlflowClient

    (tmp_path / "a-file").write_text("not a folder")
    uri = f"sqlite:///{tmp_path / 'a-file' / 'mlflow.db'}"  # a path through a file: no database there
    with pytest.raises(UserError, match=rf"monitoring.tracking: the MLflow store {uri} cannot be used") as error:
        tracked(tmp_path / "a", f"monitoring: {{progress: none, tracking: {{backend: mlflow, uri: '{uri}'}}}}")
    assert error.value.exit_code == 2

    real = MlflowClient.log_batch

    def metrics_fail(self, run_id, metrics=(), **kwargs):
        if metrics:
            raise ConnectionError("the server went away")
        return real(self, run_id, metrics=metrics, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", metrics_fail)
    _, results = tracked(tmp_path / "b", "monitoring: {progress: none, tracking: {backend: mlflow}}")
    assert results["status"] == "completed" and results["steps"] == 24
    err = capsys.readouterr().err
    assert err.count("warning: MLflow tracking stopped: sending metrics failed (ConnectionError: the server went "
                     "away); training goes on") == 1


def test_the_mlflow_extra_installs_what_mlflow_ui_needs():
    """Issue 26: `mlflow ui` needs the full mlflow package (its web UI's files, flask); mlflow-skinny has neither,
    so the extra names mlflow (checked: with mlflow-skinny alone `mlflow ui` dies on `No module named 'flask'`)."""
    import re
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    extra = pyproject["project"]["optional-dependencies"]["mlflow"]
    names = {re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower() for requirement in extra}
    assert "mlflow" in names and "mlflow-skinny" not in names
