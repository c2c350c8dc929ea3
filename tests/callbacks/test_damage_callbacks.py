"""Callbacks, generated: `callbacks:` lists for every model kind, and watchers that raise at any event.

Two surfaces (issue 26 item 5). Configs: a random list of callback entries (each type, trigger and interval) on a
language model or a table model; `validate`'s rules must refuse each sample_predictions entry of a table model,
naming `callbacks[i].type` and the model kind, and never refuse one on a language model for that reason. Runs:
a tiny run whose Python watcher raises a random exception at a random event and step; the run must end with one
`UserError` line naming the callback, the step and the event, the manifest saying `failed` (with the error), and
no process left holding the folder. Conventions (examples, seeds, counts) are test_damage.py's.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_damage import EXAMPLES, FUZZ, STATS, count

from minitrain.callbacks import Callback
from minitrain.callbacks.callback import TRIGGERS
from minitrain.common.errors import UserError
from minitrain.config import ConfigError, config_from_dict, load_config
from minitrain.course.fixtures import write_tiny_data
from minitrain.runs.run_lock import writer_of
from minitrain.training.run import run_training

pytestmark = pytest.mark.slow

TYPES = ["checkpoint", "lr_monitor", "gradient_monitor", "sample_predictions"]
MODELS = {"minigpt": {"type": "minigpt"}, "mlp_lm": {"type": "mlp_lm"},
          "sequential": {"type": "sequential", "layers": [{"linear": {"out_features": 2}}]}}
REFUSAL = "a sample_predictions callback decodes a language model's answers; a sequential model reads table rows"

entries = st.lists(st.fixed_dictionaries({"type": st.sampled_from(TYPES)},
                                         optional={"trigger": st.sampled_from(sorted(TRIGGERS)),
                                                   "interval": st.integers(1, 3)}), max_size=5)


@settings(max_examples=EXAMPLES, derandomize=not FUZZ, deadline=None, database=None)
@given(kind=st.sampled_from(sorted(MODELS)), callbacks=entries)
def test_validate_refuses_each_callback_the_model_kind_cannot_run(kind, callbacks):
    data = {"model": MODELS[kind], "training": {"total_steps": 10}, "callbacks": callbacks}
    if kind == "sequential":
        data["task"] = "classification"
    count("callback lists")
    try:
        config_from_dict(data)
        problems = ""
    except ConfigError as error:  # any other exception fails the example
        problems = str(error)
    refused = {i for i, entry in enumerate(callbacks) if f"callbacks[{i}].type: {REFUSAL}" in problems}
    cannot_run = {i for i, entry in enumerate(callbacks) if kind == "sequential"
                  and entry["type"] == "sample_predictions"}
    assert refused == cannot_run, problems
    STATS["failed"] += bool(problems)


CONFIG = """\
model: {n_layer: 1, n_head: 2, d_model: 16, d_ff: 32, vocab_size: 64, max_seq_len: 32}
optimizer: {type: adamw, lr_max: 3.0e-3, lr_min: 3.0e-4, clip: 1.0}
scheduler: {warmup_steps: 2, total_steps: 12}
training: {batch_size: 4, val_every: 4, log_every: 2, checkpoint: {save_every: 4}}
data: {train_path: data/train.jsonl, val_path: data/val.jsonl, vocab_path: data/vocab.json}
monitoring: {progress: none}
"""
# 40 records / batch 4: steps 0..11, validations at 0, 4, 8 and 11, log rows at even steps, one epoch ends at 9.
EVENTS = {"on_step_end": ("step", range(12)), "on_validation_end": ("validation", [0, 4, 8, 11]),
          "on_epoch_end": ("epoch_end", [9]), "on_log": ("log", [0, 2, 4, 6, 8, 10])}
ERRORS = [TypeError, ValueError, KeyError, ZeroDivisionError, RuntimeError, AttributeError, OverflowError,
          IndexError, AssertionError]


class Boom(Callback):
    """Raises `error` at `hook` on step `step`, and does nothing at any other event."""

    def __init__(self, hook: str, step: int, error: type[Exception]) -> None:
        self.hook, self.step, self.error = hook, step, error

    def _at(self, hook: str, step: int) -> None:
        if (hook, step) == (self.hook, self.step):
            raise self.error("watcher bug")

    def on_step_end(self, ctx) -> None:
        self._at("on_step_end", ctx.step)

    def on_validation_end(self, ctx) -> None:
        self._at("on_validation_end", ctx.step)

    def on_epoch_end(self, ctx) -> None:
        self._at("on_epoch_end", ctx.step)

    def on_log(self, row) -> None:
        self._at("on_log", row["step"])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("callback-damage")
    write_tiny_data(base, baseline_ppl=1000.0)
    (base / "config.yaml").write_text(CONFIG, encoding="utf-8")
    return base


@settings(max_examples=max(6, EXAMPLES // 5), derandomize=not FUZZ, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_watcher_that_raises_ends_the_run_failed_with_one_error_line(tiny, data):
    hook = data.draw(st.sampled_from(sorted(EVENTS)), label="hook")
    event, steps = EVENTS[hook]
    step = data.draw(st.sampled_from(list(steps)), label="step")
    error = data.draw(st.sampled_from(ERRORS), label="error")
    count("raising callbacks")
    with tempfile.TemporaryDirectory(prefix="minitrain-callback-") as tmp, contextlib.chdir(tiny):
        run = Path(tmp) / "run"
        with pytest.raises(UserError) as raised:
            run_training(load_config("config.yaml"), run, progress=False, models_dir=Path(tmp) / "models",
                         baseline_path="baseline.json", callbacks=[Boom(hook, step, error)])
        message = str(raised.value)
        assert raised.value.exit_code == 1 and "\n" not in message
        assert message.startswith(f"callback Boom failed at step {step} ({event}): {error.__name__}: "), message
        manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["status"] == "failed" and message.startswith(manifest["error"])  # + the last checkpoint
        assert manifest["error"].startswith(f"callback Boom failed at step {step} ({event})")
        assert writer_of(run) is None and not (run / "results.json").exists()
        STATS["failed"] += 1
