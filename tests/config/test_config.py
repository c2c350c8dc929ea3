"""The config schema, its rules, `--set` overrides and templates (minitrain/config/)."""

from __future__ import annotations

import datetime as dt
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from minitrain.config import ConfigError, config_from_dict, load_config, resolved_dict, resolved_yaml
from minitrain.config.fields import parse_duration
from minitrain.config.rules import RULES, parameter_names
from minitrain.config.schema import Config, ModelConfig

# Lab 01's config block exactly as the lab gives it (Bloque C), comments and alignment included.
LAB01 = """\
model:
  n_layer: 2       # Phase 17 locked config
  n_head: 4
  d_model: 64
  d_ff: 256
  vocab_size: 64   # Phase 17 locked config
  max_seq_len: 32  # verb sentences are short

optimizer:
  type: adamw
  lr_max: 3e-4
  lr_min: 3e-5
  beta1: 0.9
  beta2: 0.95
  eps: 1e-8
  weight_decay: 0.1
  clip: 1.0

scheduler:
  warmup_steps: 100
  total_steps: 2000

training:
  batch_size: 8
  val_every: 50
  log_every: 10
  loss_reduction: token_mean
  rng_seed: 42
  data_seed: 7

data:
  train_path: data/processed/train.jsonl
  val_path:   data/processed/val.jsonl
  heldout_policy: verbs_4
"""

NOW = dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=dt.UTC)


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems(tmp_path: Path, text: str, overrides=(), **kwargs) -> str:
    """The ConfigError message for `text`; asserts the exit code is 2 and no file was written."""
    path = write(tmp_path, text)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides, **kwargs)
    assert info.value.exit_code == 2
    assert sorted(tmp_path.iterdir()) == before
    return str(info.value)


# --- lab 01 ---------------------------------------------------------------------------------------------------


def test_lab01_config_validates_unchanged(tmp_path):
    cfg = load_config(write(tmp_path, LAB01))
    assert (cfg.model.n_layer, cfg.model.n_head, cfg.model.d_model, cfg.model.d_ff) == (2, 4, 64, 256)
    assert (cfg.model.vocab_size, cfg.model.max_seq_len) == (64, 32)
    assert cfg.optimizer.type == "adamw"
    assert cfg.optimizer.lr_max == 3e-4 and cfg.optimizer.lr_min == 3e-5 and cfg.optimizer.eps == 1e-8
    assert (cfg.optimizer.beta1, cfg.optimizer.beta2, cfg.optimizer.weight_decay) == (0.9, 0.95, 0.1)
    assert cfg.optimizer.clip == 1.0 and cfg.clip_norm == 1.0 and cfg.clip_value is None
    assert cfg.scheduler.type == "warmup_cosine"
    assert (cfg.scheduler.warmup_steps, cfg.scheduler.total_steps, cfg.total_steps) == (100, 2000, 2000)
    assert cfg.resolve_steps() == 2000
    assert (cfg.training.batch_size, cfg.training.val_every, cfg.training.log_every) == (8, 50, 10)
    assert cfg.training.loss_reduction == "token_mean"
    assert (cfg.training.rng_seed, cfg.training.data_seed) == (42, 7)
    assert cfg.data.train_path == "data/processed/train.jsonl" and cfg.data.val_path == "data/processed/val.jsonl"
    assert cfg.data.heldout_policy == "verbs_4" and cfg.data.loss_on == "answer"
    assert cfg.data.dev_path == "data/processed/dev.jsonl" and cfg.data.vocab_path == "data/processed/vocab.json"
    assert cfg.model.dropout == 0.0 and cfg.model.init_from is None and cfg.publish is None
    assert cfg.training.early_stopping is None


def test_lab01s_committed_run_keeps_its_resolved_config_and_config_hash(monkeypatch):
    # Keys added since (ADDED_KEYS) stay out of config.resolved.yaml at their defaults, so lab 01's committed
    # run folder still says exactly what a run of its config resolves to, and resuming it finds the same hash.
    from minitrain.training.parts import training_config_hash

    lab = Path(__file__).resolve().parents[2] / "experiments" / "18-train-mini"
    monkeypatch.chdir(lab.parents[1])
    cfg = load_config("experiments/18-train-mini/config.yaml",
                      values={"training.rng_seed": 42, "output.dir": "experiments/18-train-mini/"})
    assert resolved_yaml(cfg) == (lab / "config.resolved.yaml").read_text(encoding="utf-8")
    manifest = json.loads((lab / "manifest.json").read_text(encoding="utf-8"))
    assert training_config_hash(cfg) == manifest["config_hash"]


def test_name_and_output_dir_default_to_the_experiment_folder(tmp_path):
    folder = tmp_path / "18-train-mini"
    folder.mkdir()
    cfg = load_config(write(folder, LAB01, "config.yaml"))
    assert cfg.name == "18-train-mini"
    assert cfg.output.dir == "runs/18-train-mini"


def test_resolved_config_loads_again_to_the_same_values(tmp_path):
    cfg = load_config(write(tmp_path, LAB01), ["training.batch_size=16"], values={"training.rng_seed": 5})
    text = resolved_yaml(cfg)
    assert "# override: --set training.batch_size=16" in text and "# override: --seed 5" in text
    again = load_config(write(tmp_path, text, "resolved.yaml"))
    assert resolved_dict(again) == resolved_dict(cfg)
    assert again.training.batch_size == 16 and again.training.rng_seed == 5


def test_resolved_config_leaves_out_keys_of_other_optimizer_types(tmp_path):
    cfg = load_config(write(tmp_path, LAB01), ["scheduler.type=step", "scheduler.step_size=100",
                                               "scheduler.gamma=0.5"])
    data = resolved_dict(cfg)
    assert "momentum" not in data["optimizer"] and "beta1" in data["optimizer"]
    assert data["scheduler"]["step_size"] == 100 and "pct_start" not in data["scheduler"]


def test_config_from_dict_runs_the_same_rules():
    cfg = config_from_dict({"training": {"total_steps": 5}, "model": {"n_head": 2}})
    assert cfg.total_steps == 5 and cfg.model.n_head == 2
    with pytest.raises(ConfigError, match=r"model.n_head: d_model 64 is not divisible by n_head 3"):
        config_from_dict({"training": {"total_steps": 5}, "model": {"n_head": 3}})


def test_json_schema_lists_every_section():
    schema = Config.model_json_schema()
    assert set(schema["properties"]) >= {"model", "data", "optimizer", "scheduler", "training", "monitoring",
                                          "output", "publish", "name", "version", "description"}
    assert schema["$defs"]["OptimizerConfig"]["additionalProperties"] is False


# --- every validation rule: message with key path and line, exit code 2 ---------------------------------------

STEPS = "training:\n  total_steps: 100\n"

RULE_CASES = [
    # (id, yaml, line, dotted path, message fragment)
    ("unknown key", "optimizer:\n  lr_mx: 1e-3\n" + STEPS, 2, "optimizer.lr_mx",
     "unknown key — did you mean 'lr_max'?"),
    ("misplaced key", "training:\n  total_steps: 100\n  lr_max: 1e-3\n", 3, "training.lr_max",
     "'lr_max' belongs in optimizer"),
    ("unknown section", "modle:\n  n_layer: 2\n" + STEPS, 1, "modle", "did you mean 'model'?"),
    ("unknown nested key", STEPS + "  checkpoint:\n    save_evry: 3\n", 4, "training.checkpoint.save_evry",
     "did you mean 'save_every'?"),
    ("string for int", 'training:\n  total_steps: 100\n  batch_size: "8"\n', 3, "training.batch_size",
     "must be a valid integer"),
    ("bool for int", "model:\n  vocab_size: true\n" + STEPS, 2, "model.vocab_size", "must be a valid integer"),
    ("bad choice", "optimizer:\n  type: adamm\n" + STEPS, 2, "optimizer.type",
     "must be one of adamw, adam, sgd, rmsprop, adagrad, lamb, lbfgs, cg (got 'adamm')"),
    ("lr > 0", "optimizer:\n  lr_max: 0\n" + STEPS, 2, "optimizer.lr_max", "must be greater than 0"),
    ("lr finite", "optimizer:\n  lr_max: .nan\n" + STEPS, 2, "optimizer.lr_max", "must be a finite number"),
    ("beta1 < 1", "optimizer:\n  beta1: 1.0\n" + STEPS, 2, "optimizer.beta1", "must be less than 1"),
    ("beta2 > 0", "optimizer:\n  beta2: 0\n" + STEPS, 2, "optimizer.beta2", "must be greater than 0"),
    ("eps > 0", "optimizer:\n  eps: 0.0\n" + STEPS, 2, "optimizer.eps", "must be greater than 0"),
    ("weight decay >= 0", "optimizer:\n  weight_decay: -0.1\n" + STEPS, 2, "optimizer.weight_decay",
     "greater than or equal to 0"),
    ("clip > 0", "optimizer:\n  clip: 0\n" + STEPS, 2, "optimizer.clip", "must be greater than 0"),
    ("steps >= 1", "training:\n  total_steps: 0\n", 2, "training.total_steps", "greater than or equal to 1"),
    ("epochs >= 1", "training:\n  epochs: 0\n", 2, "training.epochs", "greater than or equal to 1"),
    ("batch >= 1", STEPS + "  batch_size: 0\n", 3, "training.batch_size", "greater than or equal to 1"),
    ("accumulation >= 1", STEPS + "  grad_accumulation: 0\n", 3, "training.grad_accumulation",
     "greater than or equal to 1"),
    ("dropout < 1", "model:\n  dropout: 1.0\n" + STEPS, 2, "model.dropout", "must be less than 1"),
    ("dropout >= 0", "model:\n  dropout: -0.1\n" + STEPS, 2, "model.dropout", "greater than or equal to 0"),
    ("n_layer >= 1", "model:\n  n_layer: 0\n" + STEPS, 2, "model.n_layer", "greater than or equal to 1"),
    ("seed >= 0", STEPS + "  data_seed: -1\n", 3, "training.data_seed", "greater than or equal to 0"),
    ("heads divide width", "model:\n  d_model: 64\n  n_head: 5\n" + STEPS, 3, "model.n_head",
     "d_model 64 is not divisible by n_head 5"),
    ("clip in two places", "optimizer:\n  clip: 1.0\n" + STEPS + "  clip: 2.0\n", 5, "training.clip",
     "also given as optimizer.clip; give it in one place only"),
    ("clip_value in two places", "optimizer:\n  clip_value: 1.0\n" + STEPS + "  clip_value: 2.0\n", 5,
     "training.clip_value", "also given as optimizer.clip_value"),
    ("total_steps in two places", "scheduler:\n  total_steps: 10\n" + STEPS, 4, "training.total_steps",
     "also given as scheduler.total_steps"),
    ("two run lengths", STEPS + "  epochs: 3\n", 3, "training.epochs",
     "give only one of total_steps / epochs / duration (also given: training.total_steps)"),
    ("scheduler steps and duration", "scheduler:\n  total_steps: 10\ntraining:\n  duration: 90s\n", 4,
     "training.duration", "also given: scheduler.total_steps"),
    ("bad duration", "training:\n  duration: 1h30x\n", 2, "training.duration", "'1h30x' is not a duration"),
    ("optimizer key of another type", "optimizer:\n  momentum: 0.9\n" + STEPS, 2, "optimizer.momentum",
     "optimizer type adamw does not use momentum (it belongs to rmsprop, sgd)"),
    ("lr_min above lr_max", "optimizer:\n  lr_max: 1e-4\n  lr_min: 1e-3\n" + STEPS, 3, "optimizer.lr_min",
     "lr_min 0.001 is above lr_max 0.0001"),
    ("nesterov needs momentum", "optimizer:\n  type: sgd\n  nesterov: true\n" + STEPS, 3,
     "optimizer.nesterov", "nesterov needs momentum > 0"),
    ("lbfgs is full-batch", "optimizer:\n  type: lbfgs\n" + STEPS, 2, "optimizer.type",
     "lbfgs is a full-batch method (its line search re-evaluates the loss on one fixed batch); a minigpt language "
     "model trains on mini-batches"),
    ("cg takes no clipping", "optimizer:\n  type: cg\n  clip: 1.0\n" + STEPS, 3, "optimizer.clip",
     "cg's line search needs the loss's own gradient"),
    ("nesterov needs no dampening",
     "optimizer:\n  type: sgd\n  momentum: 0.9\n  dampening: 0.1\n  nesterov: true\n" + STEPS, 5,
     "optimizer.nesterov", "nesterov needs dampening = 0"),
    ("group overrides nothing", "optimizer:\n  groups:\n    - pattern: 'transformer.wte.*'\n" + STEPS,
     3, "optimizer.groups[0]", "overrides nothing"),
    ("group matches nothing", "optimizer:\n  groups:\n    - pattern: 'encoder.*'\n"
     "      weight_decay: 0\n" + STEPS, 3, "optimizer.groups[0].pattern", "matches no parameter"),
    ("one_cycle rises", "scheduler:\n  type: one_cycle\n  pct_start: 0.01\n" + STEPS, 3, "scheduler.pct_start",
     "pct_start 0.01 · total_steps 100 must exceed 1"),
    ("scheduler metric only for plateau", "scheduler:\n  metric: val_ppl\n" + STEPS, 2, "scheduler.metric",
     "does not use metric (it belongs to plateau)"),
    ("scheduler key of another type", "scheduler:\n  pct_start: 0.2\n" + STEPS, 2, "scheduler.pct_start",
     "scheduler type warmup_cosine does not use pct_start (it belongs to one_cycle)"),
    ("step needs step_size", "scheduler:\n  type: step\n  gamma: 0.5\n" + STEPS, 1, "scheduler.step_size",
     "scheduler type step needs step_size"),
    ("exponential needs gamma", "scheduler:\n  type: exponential\n" + STEPS, 1, "scheduler.gamma",
     "scheduler type exponential needs gamma"),
    ("gamma <= 1", "scheduler:\n  type: exponential\n  gamma: 1.5\n" + STEPS, 3, "scheduler.gamma",
     "less than or equal to 1"),
    ("one_cycle warmup", "scheduler:\n  type: one_cycle\n  warmup_steps: 10\n" + STEPS, 3,
     "scheduler.warmup_steps", "one_cycle warms up by pct_start"),
    ("warmup below total", "scheduler:\n  warmup_steps: 100\n" + STEPS, 2, "scheduler.warmup_steps",
     "warmup_steps 100 must be below total_steps 100"),
    ("plateau mode", "scheduler:\n  type: plateau\n  mode: max\n" + STEPS, 3, "scheduler.mode",
     "val_loss is lower-is-better, so mode must be min"),
    ("checkpoint mode", STEPS + "  checkpoint:\n    metric: val_ppl\n    mode: max\n", 5,
     "training.checkpoint.mode", "val_ppl is lower-is-better"),
    ("early stopping mode", STEPS + "  early_stopping:\n    mode: max\n", 4, "training.early_stopping.mode",
     "val_loss is lower-is-better"),
    ("early stopping patience", STEPS + "  early_stopping:\n    patience: 0\n", 4,
     "training.early_stopping.patience", "greater than or equal to 1"),
    ("text needs loss_on all", "data:\n  format: text\n  heldout_policy: none\n" + STEPS, 1, "data.loss_on",
     "plain-text lines have no answer part"),
    ("text has no held-out verbs", "data:\n  format: text\n  loss_on: all\n" + STEPS, 1,
     "data.heldout_policy", "no verbs to hold out"),
    ("bad alert", "monitoring:\n  alerts:\n    - 'loss > 10: warn'\n    - 'loss >> 3: halt'\n" + STEPS, 4,
     "monitoring.alerts[1]", "condition must be 'METRIC > NUMBER'"),
    ("bad alert action", "monitoring:\n  alerts: ['nan: stop']\n" + STEPS, 2, "monitoring.alerts[0]",
     "action must be warn or halt"),
    ("bad repo id", "publish:\n  repo: not a repo\n" + STEPS, 2, "publish.repo", "is not a Hub repo id"),
    ("publish needs repo", "publish:\n  private: true\n" + STEPS, 1, "publish.repo", "required key is missing"),
    ("progress choice", "monitoring:\n  progress: fancy\n" + STEPS, 2, "monitoring.progress",
     "must be one of auto, bar, plain, none"),
    ("loss_reduction", STEPS + "  loss_reduction: sum\n", 3, "training.loss_reduction", "must be one of token_mean"),
    ("section not a mapping", "model: 5\n" + STEPS, 1, "model", "must be a valid dictionary"),
    ("duplicate key", "optimizer:\n  lr_max: 1e-3\n  lr_max: 2e-3\n" + STEPS, 3, "optimizer.lr_max",
     "key given twice (lines 2 and 3)"),
]


@pytest.mark.parametrize(("text", "line", "path", "fragment"), [c[1:] for c in RULE_CASES],
                         ids=[c[0] for c in RULE_CASES])
def test_each_rule_names_key_and_line(tmp_path, text, line, path, fragment):
    message = problems(tmp_path, text)
    assert f"c.yaml:{line}: {path}: " in message
    assert fragment in message
    assert "Traceback" not in message


def test_missing_run_length_is_reported_on_the_training_section(tmp_path):
    message = problems(tmp_path, "model:\n  n_layer: 2\n")
    assert "c.yaml: training: say how long to train" in message


def test_all_problems_are_reported_at_once(tmp_path):
    message = problems(tmp_path, """\
        model:
          n_head: 5
        optimizer:
          lr_mx: 1e-3
        training:
          total_steps: 10
          batch_size: 0
        """)
    assert message.splitlines()[0].endswith("has 3 problems:")
    assert "c.yaml:2: model.n_head" in message and "c.yaml:4: optimizer.lr_mx" in message
    assert "c.yaml:7: training.batch_size" in message


def test_yaml_syntax_error_names_the_line(tmp_path):
    message = problems(tmp_path, "model:\n  n_layer: 2\n n_head: [4\n")
    assert "c.yaml:3: not valid YAML" in message or "c.yaml:4: not valid YAML" in message


def test_unsafe_yaml_tag_is_refused(tmp_path):
    message = problems(tmp_path, "name: !!python/object/apply:os.system ['true']\n" + STEPS)
    assert "not valid YAML" in message


def test_top_level_must_be_a_mapping(tmp_path):
    assert "the top level must be a mapping" in problems(tmp_path, "- 1\n- 2\n")


def test_missing_file_is_a_user_error(tmp_path):
    from minitrain.common.errors import UserError

    with pytest.raises(UserError, match="config file not found") as info:
        load_config(tmp_path / "nope.yaml")
    assert info.value.exit_code == 2


def test_every_rule_is_documented():
    doc = (Path(__file__).parents[2] / "docs" / "yaml-mode.md").read_text(encoding="utf-8")
    for r in RULES:
        assert r.doc and r.doc in doc, f"rule {r.name} missing from docs/yaml-mode.md"


def test_durations():
    assert parse_duration("90s") == 90 and parse_duration("1h30m") == 5400 and parse_duration("PT1H30M") == 5400
    assert parse_duration("1.5h") == 5400 and parse_duration("2m5s") == 125
    for bad in ("", "90", "1x", "0s", "h"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    cfg = config_from_dict({"training": {"duration": "1h30m"}})
    assert cfg.duration_seconds == 5400 and cfg.resolve_steps() is None


def test_epochs_resolve_with_steps_per_epoch():
    cfg = config_from_dict({"training": {"epochs": 3}})
    assert cfg.resolve_steps(steps_per_epoch=40) == 120
    with pytest.raises(ValueError, match="steps_per_epoch"):
        cfg.resolve_steps()


def test_clip_may_live_in_training():
    cfg = config_from_dict({"training": {"total_steps": 5, "clip": 0.5, "clip_value": 0.1}})
    assert cfg.clip_norm == 0.5 and cfg.clip_value == 0.1


def test_left_out_optimizer_keys_take_the_types_defaults():
    adagrad = config_from_dict({"training": {"total_steps": 5}, "optimizer": {"type": "adagrad"}}).optimizer
    assert adagrad.eps == 1e-10 and adagrad.lr_max == 1e-2 and adagrad.beta1 is None
    adamw = config_from_dict({"training": {"total_steps": 5}}).optimizer
    assert adamw.weight_decay == 0.01 and adamw.momentum is None


def test_kwargs_build_the_optimizer_and_schedule(tmp_path):
    from minitrain.autograd.tensor import Tensor
    from minitrain.optim import build_optimizer
    from minitrain.optim.schedule import build_scheduler

    cfg = load_config(write(tmp_path, LAB01), ["optimizer.groups=[{pattern: 'transformer.wte.*', lr_scale: 0.5}]"])
    params = [("transformer.wte.weight", Tensor(np.zeros((4, 3)), requires_grad=True)),
              ("transformer.ln_f.bias", Tensor(np.zeros(3), requires_grad=True))]
    assert cfg.optimizer.kwargs() == {"lr": 3e-4, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1,
                                      "amsgrad": False,
                                      "groups": [{"pattern": "transformer.wte.*", "lr_scale": 0.5}]}
    optimizer = build_optimizer(cfg.optimizer.type, params, **cfg.optimizer.kwargs())
    kwargs = cfg.scheduler_kwargs(cfg.resolve_steps())
    assert kwargs == {"lr_max": 3e-4, "total_steps": 2000, "lr_min": 3e-5, "warmup_steps": 100,
                      "warmup_start_lr": 0.0, "decay_steps": None}
    schedule = build_scheduler(cfg.scheduler.type, optimizer, **kwargs)
    assert schedule.lr_at(99) == pytest.approx(3e-4) and schedule.lr_at(2000) == pytest.approx(3e-5)
    step = load_config(write(tmp_path, LAB01), ["scheduler.type=step", "scheduler.step_size=10"])
    assert step.scheduler_kwargs(2000) == {"lr_max": 3e-4, "step_size": 10, "gamma": 0.1, "warmup_steps": 100,
                                           "warmup_start_lr": 0.0}


def test_schema_has_every_key_the_optimizers_and_schedules_take():
    from minitrain.config.schema import OPTIMIZER_KEYS, SCHEDULER_KEYS, OptimizerConfig, SchedulerConfig

    assert set().union(*OPTIMIZER_KEYS.values()) <= set(OptimizerConfig.model_fields)
    assert set().union(*SCHEDULER_KEYS.values()) <= set(SchedulerConfig.model_fields)


@pytest.mark.parametrize("shape", [
    ModelConfig(n_layer=3, n_head=2, d_model=8, d_ff=16, vocab_size=10, max_seq_len=6),
    ModelConfig(type="mlp_lm", context=3, d_embed=4, hidden=[5, 6], vocab_size=10, max_seq_len=6),
])
def test_parameter_names_are_the_models(shape):
    from minitrain.models.registry import build_model

    model = build_model(shape.architecture())
    assert parameter_names(shape) == [name for name, _ in model.named_parameters()]


def test_parameter_names_are_listed_only_when_a_group_pattern_needs_them(tmp_path, monkeypatch):
    # A mistyped n_layer such as 2**31 - 1 must not make validation list 10**10 names (hours, then out of memory).
    calls = []
    names = ["transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.weight"]
    monkeypatch.setattr("minitrain.config.rules.parameter_names", lambda model: calls.append(model) or names)
    cfg = load_config(write(tmp_path, LAB01), ["model.n_layer=2147483647"])
    assert cfg.model.n_layer == 2**31 - 1 and calls == []
    problems(tmp_path, LAB01, ["optimizer.groups=[{pattern: 'x', weight_decay: 0}]"])
    assert len(calls) == 1


# --- --set ------------------------------------------------------------------------------------------------------


def test_set_changes_the_value_and_is_recorded(tmp_path):
    cfg = load_config(write(tmp_path, LAB01), ["optimizer.lr_max=1e-3", "training.early_stopping.patience=3",
                                               "monitoring.alerts=['nan: halt']"])
    assert cfg.optimizer.lr_max == 1e-3
    assert cfg.training.early_stopping is not None and cfg.training.early_stopping.patience == 3
    assert cfg.monitoring.alerts == ["nan: halt"]
    assert cfg.source.overrides == ("--set optimizer.lr_max=1e-3", "--set training.early_stopping.patience=3",
                                    "--set monitoring.alerts=['nan: halt']")
    assert "lr_max: 0.001" in resolved_yaml(cfg)


def test_set_value_is_validated_like_the_file(tmp_path):
    message = problems(tmp_path, LAB01, ["training.batch_size=abc", "optimizer.lr_mx=1"])
    assert "--set training.batch_size=abc: training.batch_size: must be a valid integer" in message
    assert "--set optimizer.lr_mx=1: optimizer.lr_mx: unknown key — did you mean 'lr_max'?" in message


def test_an_unknown_section_made_by_set_is_reported_against_the_override(tmp_path):
    message = problems(tmp_path, LAB01, ["foo.bar=1", "training.early_stoping.patience=3"])
    assert "--set foo.bar=1: foo: unknown key; valid keys here: name, version" in message
    assert "--set training.early_stoping.patience=3: training.early_stoping: unknown key — did you mean " \
           "'early_stopping'?" in message
    # A known section an override creates is still the file's: its own problems are not the override's.
    message = problems(tmp_path, "model:\n  n_layer: 2\n", ["training.batch_size=3"])
    assert "c.yaml: training: say how long to train" in message


def test_malformed_set_is_an_error(tmp_path):
    message = problems(tmp_path, LAB01, ["training.batch_size"])
    assert "write an override as --set section.key=value" in message
    message = problems(tmp_path, LAB01, ["model.n_layer.x=3"])
    assert "model.n_layer is not a section" in message


def test_cli_values_are_typed_and_recorded(tmp_path):
    cfg = load_config(write(tmp_path, LAB01), values={"training.rng_seed": 9, "output.dir": "123"})
    assert cfg.training.rng_seed == 9 and cfg.output.dir == "123"
    assert cfg.source.overrides == ("--seed 9", "--out-dir 123")


# --- templates ----------------------------------------------------------------------------------------------------


def test_templates_render(tmp_path):
    cfg = load_config(write(tmp_path, """\
        name: "verbs-{{ env.WHO }}"
        version: "1.2"
        description: "{{ name }} v{{version}} seed {{ seed }} on {{ date }}"
        training:
          total_steps: 10
          rng_seed: "{{ env.SEED }}"
        output:
          dir: "runs/{{ name }}/{{ timestamp }}"
        optimizer:
          lr_max: "{{ env.LR }}"
        """), env={"WHO": "ana", "SEED": "11", "LR": "1e-3"}, now=NOW)
    assert cfg.name == "verbs-ana"
    assert cfg.description == "verbs-ana v1.2 seed 11 on 2025-03-04"
    assert cfg.output.dir == "runs/verbs-ana/20250304T050607Z"
    assert cfg.training.rng_seed == 11 and cfg.optimizer.lr_max == 1e-3


@pytest.mark.parametrize(("value", "fragment"), [
    ("{{ nam }}", "unknown name 'nam' — did you mean 'name'?"),
    ("{{ model.n_layr }}", "unknown key 'model.n_layr' — did you mean 'n_layer'?"),
    ("{{ model }}", "model is a section; name one value in it"),
    ("{{ 1 + }}", "the expression ends too early"),
    ("{{ __import__('os') }}", "names with '__' ('__import__') are not allowed"),
    ("{{ os.system('ls') }}", "'os.system(...)': calls are not allowed"),
    ("{{ name[0] }}", "unexpected '[0]'"),
    ("{{ env.MINITRAIN_SURELY_UNSET }}", "environment variable MINITRAIN_SURELY_UNSET is not set"),
    ("{{ version }}", "{{ version }} is used but the config sets no version"),
    ("runs/{{ name", "unbalanced '{{' or '}}'"),
    ("runs/{{ 1 / 0 }}", "division by zero (1 / 0)"),
    ("runs/{{ training.total_steps }}", "training.total_steps is not set in this config"),
])
def test_bad_templates_are_validation_errors(tmp_path, value, fragment):
    message = problems(tmp_path, f'output:\n  dir: "{value}"\n' + "scheduler:\n  total_steps: 100\n", env={})
    assert "c.yaml:2: output.dir: " in message and fragment in message
    assert message.splitlines()[0].endswith("has 1 problem:")  # not a second one about the text left behind


def test_name_cannot_use_itself(tmp_path):
    message = problems(tmp_path, 'name: "{{ name }}-x"\n' + STEPS)
    assert "c.yaml:1: name: in '{{ name }}': name refers to itself" in message
    assert message.splitlines()[0].endswith("has 1 problem:")


def test_templates_in_set_values_render(tmp_path):
    cfg = load_config(write(tmp_path, LAB01), ["output.dir=runs/{{ date }}"], now=NOW)
    assert cfg.output.dir == "runs/2025-03-04"


@pytest.mark.parametrize("value", ["{{ env.LR }}", "'{{ env.LR }}'", '"{{env.LR}}"'])
def test_a_whole_template_in_set_fills_a_number_quoted_or_not(tmp_path, value):
    # Unquoted, `{{ env.LR }}` would be YAML for a nested mapping ("found unhashable key").
    cfg = load_config(write(tmp_path, LAB01), [f"optimizer.lr_max={value}"], env={"LR": "2e-3"})
    assert cfg.optimizer.lr_max == 2e-3
    assert cfg.source.overrides == (f"--set optimizer.lr_max={value}",)


@pytest.mark.parametrize("in_file, override, steps", [
    ("scheduler:\n  warmup_steps: 10\n  total_steps: 2000", "training.total_steps=30", 30),
    ("scheduler:\n  warmup_steps: 10\n  total_steps: 2000", "training.max_steps=30", 30),
    ("scheduler:\n  warmup_steps: 10\ntraining:\n  max_steps: 2000", "training.total_steps=30", 30),
    ("scheduler:\n  warmup_steps: 10\ntraining:\n  max_steps: 2000", "scheduler.total_steps=30", 30),
    ("scheduler:\n  warmup_steps: 10\ntraining:\n  total_steps: 2000", "training.max_steps=30", 30),
    ("scheduler:\n  warmup_steps: 10\ntraining:\n  total_steps: 2000", "scheduler.total_steps=null", 2000),
])
def test_a_set_stopping_point_replaces_the_files_however_either_spells_it(tmp_path, in_file, override, steps):
    """`--set` of the stopping point (what a resume may move) replaces the file's, whichever of its three
    spellings each uses; a null override is no new stopping point and leaves the file's alone."""
    text = LAB01.replace("scheduler:\n  warmup_steps: 100\n  total_steps: 2000", in_file, 1)
    if "training:\n  max_steps" in in_file or "training:\n  total_steps" in in_file:
        text = text.replace("\ntraining:\n  batch_size", "\n  batch_size", 1)  # one training section
    cfg = load_config(write(tmp_path, text), [f"--set {override}".removeprefix("--set ")])
    assert (cfg.scheduler.total_steps or cfg.training.total_steps) == steps
