"""Callbacks (minitrain/callbacks): the events arrive when the loop numbering says, a callback only watches
(same numbers with and without), its stop is clean and survives a resume, and each callback a config names by
type does what docs/yaml-mode.md says."""

from __future__ import annotations

import json
import math
import textwrap

import numpy as np
import pytest
from test_run import log_rows, train_tiny, write_tiny_run

from minitrain import cli
from minitrain.callbacks import Callback
from minitrain.common.errors import UserError
from minitrain.config import load_config
from minitrain.runs.model_files import load_model_file

pytestmark = pytest.mark.slow


class Recorder(Callback):
    """Writes down every event it hears."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.logged: list[dict] = []

    def on_step_end(self, ctx):
        self.events.append(("step", ctx.step, dict(ctx.metrics)))

    def on_validation_end(self, ctx):
        self.events.append(("validation", ctx.step, dict(ctx.metrics)))

    def on_epoch_end(self, ctx):
        self.events.append(("epoch", ctx.step, ctx.epoch))

    def on_train_end(self, ctx):
        self.events.append(("end", ctx.step, ctx.status, dict(ctx.results)))

    def on_log(self, row):
        self.logged.append(dict(row))


def test_events_follow_the_loops_numbering_and_callbacks_change_no_number(tmp_path):
    config = write_tiny_run(tmp_path)  # 24 steps, val_every 5, 10 steps per epoch
    plain = train_tiny(config, tmp_path / "plain")
    recorder = Recorder()
    watched = train_tiny(config, tmp_path / "watched", callbacks=[recorder])

    assert (tmp_path / "watched" / "train_log.jsonl").read_bytes() == (
        tmp_path / "plain" / "train_log.jsonl").read_bytes()
    assert watched["model_path"] == plain["model_path"]  # the same weights, byte for byte
    report = (tmp_path / "watched" / "report.md").read_text(encoding="utf-8")
    assert "## Hyperparameters" in report and "| training.batch_size | " in report  # the resolved settings

    steps = [e for e in recorder.events if e[0] == "step"]
    assert [e[1] for e in steps] == list(range(24))
    assert {"loss", "lr", "grad_norm"} <= steps[3][2].keys()
    validations = [e for e in recorder.events if e[0] == "validation"]
    assert [e[1] for e in validations] == [0, 5, 10, 15, 20, 23]
    assert validations[-1][2]["val_ppl"] == watched["val_ppl"]
    assert [(e[1], e[2]) for e in recorder.events if e[0] == "epoch"] == [(9, 1), (19, 2)]
    kinds = [e[0] for e in recorder.events if e[1] == 9]
    assert kinds == ["step", "epoch"]  # step 9 ends the first epoch; no validation there
    assert recorder.events[-1] == ("end", 23, "completed", watched)
    assert recorder.logged == log_rows(tmp_path / "watched")


def test_the_context_is_read_only_and_a_stop_is_clean_and_survives_a_resume(tmp_path):
    class Stopper(Callback):
        def on_step_end(self, ctx):
            with pytest.raises(ValueError):
                ctx.parameters()["transformer.wte.weight"][0, 0] = 1.0  # read-only views
            with pytest.raises(ValueError):
                ctx.gradients()["transformer.wte.weight"][0, 0] = 1.0
            if ctx.step == 7:
                ctx.request_stop("enough")

    config = write_tiny_run(tmp_path)
    results = train_tiny(config, tmp_path / "run", callbacks=[Stopper()])
    assert results["status"] == "early_stopped" and results["steps"] == 8
    assert max(r["step"] for r in log_rows(tmp_path / "run")) == 6  # log_every 2: step 7 logs no row
    meta = load_model_file(tmp_path / "run" / "checkpoints" / "step-8.safetensors")[2]
    assert meta["extra"]["loop"]["stopped_by"] == "enough"
    # Resuming the stopped run's checkpoint trains no further: it only finishes the run again.
    again = train_tiny(config, tmp_path / "run", resume=tmp_path / "run")
    assert again["steps"] == 8 and again["model_path"] == results["model_path"]
    assert max(r["step"] for r in log_rows(tmp_path / "run")) == 6


CALLBACKS = """\
callbacks:
  - {type: lr_monitor, interval: 2}
  - {type: gradient_monitor, interval: 10, config: {log_histogram: true}}
  - {type: sample_predictions, trigger: validation, config: {num_samples: 16}}
  - {type: checkpoint, trigger: epoch_end, config: {save_best: true, metric: val_loss}}
"""


def test_each_builtin_callback_from_yaml(tmp_path):
    config = write_tiny_run(tmp_path)
    text = config.read_text().replace("optimizer: {", "optimizer: {groups: [{pattern: 'transformer.h.*', "
                                                     "lr_scale: 0.5}], ")
    config.write_text(text + CALLBACKS)
    run = tmp_path / "run"
    results = train_tiny(config, run)
    rows = log_rows(run)
    train = {r["step"]: r for r in rows if "loss" in r}

    # lr_monitor: every 2nd step, the schedule's lr and the group's scaled one
    lr_rows = [r for r in rows if "lr/transformer.h.*" in r]
    assert [r["step"] for r in lr_rows] == list(range(0, 24, 2))
    for r in lr_rows:
        assert r["lr/transformer.h.*"] == pytest.approx(0.5 * r["lr"])
        if r["step"] in train:
            assert r["lr"] == train[r["step"]]["lr"]

    # gradient_monitor: per-parameter norms of the clipped gradient add up to the clipped global norm
    norm_rows = [r for r in rows if "grad_norm/transformer.wte.weight" in r]
    assert [r["step"] for r in norm_rows] == [0, 10, 20]
    for r in norm_rows:
        if r["step"] in train:
            total = math.sqrt(sum(v ** 2 for k, v in r.items() if k.startswith("grad_norm/")))
            assert total == pytest.approx(min(train[r["step"]]["grad_norm"], 1.0), rel=1e-4)  # clip 1.0
    assert sorted(p.name for p in (run / "histograms").iterdir()) == [f"step-{s}.png" for s in (0, 10, 20)]
    assert (run / "histograms" / "step-10.png").read_bytes()[:4] == b"\x89PNG"
    assert "grad_norm/transformer.wte.weight" in (run / "metrics.csv").read_text().splitlines()[0]

    # sample_predictions: a row per held-out prompt at each validation; the final model's in report.md, and on
    # all 16 val records its share of right answers is results.json's val_exact_match
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert [s["step"] for s in samples[::16]] == [0, 5, 10, 15, 20, 23] and len(samples) == 6 * 16
    assert all(s["correct"] == (s["predicted"] == s["expected"]) for s in samples)
    right = round(results["val_exact_match"] * 16)
    assert f"## Sample predictions of the final model ({right}/16 right)" in (run / "report.md").read_text()
    assert sum(s["correct"] for s in samples[-16:]) == right

    # checkpoint: a checkpoint at each epoch end (steps 9, 19: files step-10, step-20), best.safetensors at the
    # best val_loss seen at a validation
    files = {p.name for p in (run / "checkpoints").iterdir()}
    assert {"step-10.safetensors", "step-20.safetensors", "best.safetensors"} <= files
    best = load_model_file(run / "checkpoints" / "best.safetensors")[2]
    assert best["step"] == results["best_val_step"] + 1


def test_a_custom_callback_is_an_entry_point_with_args_and_a_failing_one_does_not_end_the_run(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_callbacks.py").write_text(textwrap.dedent("""\
        import numpy as np

        def wte_norm(ctx, scale=1.0):
            ctx.log({"wte_norm": scale * float(np.linalg.norm(ctx.parameters()["transformer.wte.weight"]))})

        def broken(ctx):
            raise RuntimeError("oops")
        """))
    config = write_tiny_run(tmp_path)
    config.write_text(config.read_text() + textwrap.dedent("""\
        callbacks:
          - {type: custom, entry_point: "my_callbacks:wte_norm", interval: 4, args: {scale: 2.0}}
          - {type: custom, entry_point: "my_callbacks:broken", trigger: validation}
        """))
    results = train_tiny(config, tmp_path / "run")
    assert results["status"] == "completed"
    norms = [r for r in log_rows(tmp_path / "run") if "wte_norm" in r]
    assert [r["step"] for r in norms] == [0, 4, 8, 12, 16, 20]
    assert all(r["wte_norm"] > 0 for r in norms)
    err = capsys.readouterr().err
    assert err.count("callback my_callbacks:broken raised RuntimeError: oops at step 0") == 1


def test_callbacks_are_checked_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = write_tiny_run(tmp_path)
    config.write_text(config.read_text() + "callbacks:\n  - {type: custom, entry_point: 'nowhere:f'}\n")
    assert cli.main(["validate", str(config)]) == 2
    assert "callbacks[0].entry_point: cannot import nowhere (ModuleNotFoundError" in capsys.readouterr().err
    # A script is code in the config: refused, with what to write instead.
    config.write_text(config.read_text().replace("entry_point: 'nowhere:f'", "script: 'print(1)'"))
    assert cli.main(["validate", str(config)]) == 2
    err = capsys.readouterr().err
    assert "callbacks[0].script: minitrain never runs code written in a config" in err
    assert "a custom callback needs entry_point" in err
    with pytest.raises(UserError, match="cannot import nowhere"):
        from minitrain.callbacks.custom import load_entry_point

        load_entry_point("nowhere:f")


def test_watchers_that_are_not_configured_cost_nothing(tmp_path, monkeypatch):
    """No callback, tracker or system metrics: the loop gets callbacks=None and builds nothing per step."""
    import minitrain.training.run as run_module

    seen = {}
    real_train = run_module.train

    def spy(*args, **kwargs):
        seen["callbacks"] = kwargs.get("callbacks")
        return real_train(*args, **kwargs)

    monkeypatch.setattr(run_module, "train", spy)
    config = write_tiny_run(tmp_path)
    train_tiny(config, tmp_path / "run")
    assert seen == {"callbacks": None}
    cfg = load_config(config)
    assert cfg.callbacks == [] and cfg.monitoring.tracking is None and cfg.monitoring.system is None


def test_resolved_callbacks_load_again_and_stay_out_of_the_training_hash(tmp_path):
    from minitrain.config import config_from_dict, resolved_dict
    from minitrain.training.parts import training_config_hash

    config = write_tiny_run(tmp_path)
    plain = load_config(config)
    watched = load_config(config, ["callbacks=[{type: gradient_monitor, config: {log_histogram: true} }]",
                                   "monitoring.tracking.backend=jsonl", "output.report.format=html"])
    assert training_config_hash(watched) == training_config_hash(plain)
    again = config_from_dict(resolved_dict(watched))
    assert resolved_dict(again)["callbacks"] == [{"type": "gradient_monitor", "trigger": "step", "interval": 1,
                                                 "config": {"log_histogram": True}}]
    assert np.isclose(again.optimizer.lr_max, plain.optimizer.lr_max)


@pytest.mark.parametrize(("entries", "extra", "message"), [
    ([{"type": "checkpoint", "config": {"num_samples": 3}}], {},
     "callbacks[0].config.num_samples: a checkpoint callback takes save_best, metric, mode"),
    ([{"type": "lr_monitor", "config": {"log_histogram": True}}], {}, "a lr_monitor callback takes no config keys"),
    ([{"type": "custom"}], {}, "callbacks[0]: a custom callback needs entry_point"),
    ([{"type": "lr_monitor", "entry_point": "a:b"}], {}, "callbacks[0].entry_point: only a custom callback takes"),
    ([{"type": "custom", "entry_point": "not a module"}], {}, "is not an entry point; write it as 'module.path:"),
    ([{"type": "sample_predictions", "trigger": "validation", "interval": 2}], {},
     "callbacks[0].interval: trigger validation acts at every validation event"),
    ([{"type": "gradient_monitor", "trigger": "train_end"}], {}, "callbacks[0].trigger: a gradient_monitor"),
    ([{"type": "checkpoint", "config": {"save_best": True}}], {"checkpoint": {"save_best": True}},
     "callbacks[0].config.save_best: checkpoints/best.safetensors is kept by one rule only"),
    ([{"type": "checkpoint", "config": {"save_best": True, "metric": "val_ppl", "mode": "max"}}], {},
     "callbacks[0].config.mode: val_ppl is lower-is-better"),
    ([{"type": "lr_monitor"}], {"__include": ["lr/*", "val_pp"]},
     "output.metrics.include[1]: val_pp is never logged — did you mean 'val_ppl'?"),
])
def test_callback_rules(entries, extra, message):
    from minitrain.config import ConfigError, config_from_dict

    training = {"total_steps": 10, **{k: v for k, v in extra.items() if not k.startswith("__")}}
    data = {"training": training, "callbacks": entries}
    if "__include" in extra:
        data["output"] = {"metrics": {"include": extra["__include"]}}
    with pytest.raises(ConfigError) as error:
        config_from_dict(data)
    assert message in str(error.value)


def test_the_example_in_docs_callbacks_md_runs(tmp_path):
    """docs/callbacks.md's BestSoFar, taken from the page (up to where it trains lab 01) and run on the tiny
    config: it sees every validation and remembers the best val PPL."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "callbacks.md").read_text(encoding="utf-8")
    code = page.split("```python\n", 1)[1].split("cfg = load_config", 1)[0]
    namespace: dict = {}
    exec(compile(code, "docs/callbacks.md", "exec"), namespace)
    callback = namespace["BestSoFar"]()
    config = write_tiny_run(tmp_path)
    train_tiny(config, tmp_path / "run", callbacks=[callback])
    assert callback.best == min(r["val_ppl"] for r in log_rows(tmp_path / "run") if "val_ppl" in r)
    assert callback.state_dict() == {"best": callback.best}


def test_sample_predictions_on_a_table_model_is_refused_by_validate(tmp_path, capsys):
    """Issue 26 item 5: a table model has no text to decode, so validate (not a TypeError mid-train) says so."""
    from minitrain.config import ConfigError, config_from_dict

    data = {"task": "classification", "model": {"type": "sequential", "layers": [{"linear": {"out_features": 2}}]},
            "training": {"total_steps": 10}, "callbacks": [{"type": "lr_monitor"}, {"type": "sample_predictions"}]}
    with pytest.raises(ConfigError) as error:
        config_from_dict(data)
    assert ("callbacks[1].type: a sample_predictions callback decodes a language model's answers; a sequential "
            "model reads table rows") in str(error.value)


class Broken(Callback):
    def on_step_end(self, ctx):
        if ctx.step == 7:
            raise TypeError("object of type 'NoneType' has no len()")


def test_a_callback_that_raises_ends_the_run_failed_with_one_error_line(tmp_path):
    """A watcher that raises (not a custom entry point, which is switched off) ends the run: status failed, the
    error names the callback and the step, the lock is released and the folder has its manifest."""
    from minitrain.runs.run_lock import writer_of

    config = write_tiny_run(tmp_path)
    with pytest.raises(UserError) as error:
        train_tiny(config, tmp_path / "run", callbacks=[Broken()])
    assert error.value.exit_code == 1
    message = str(error.value)
    assert message.startswith("callback Broken failed at step 7 (step): TypeError: object of type")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["error"].startswith("callback Broken failed at step 7")
    assert writer_of(tmp_path / "run") is None and not (tmp_path / "run" / "results.json").exists()
