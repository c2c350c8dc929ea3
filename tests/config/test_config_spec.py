"""The spec's manifest shape (minitrain/config/spec_shape.py, spec_keys.py): every spec key is accepted or refused
with a reason, spec keys land on minitrain's keys, and a problem is reported under the name and line the user
wrote."""

from __future__ import annotations

import copy
import json
import re
import textwrap
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_config import LAB01, NOW

from minitrain import cli
from minitrain.config import ConfigError, config_from_dict, load_config, resolved_dict
from minitrain.config.spec_keys import NOT_YET
from minitrain.config.yaml_lines import parse_yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "data" / "yaml_mode_spec_examples.yaml"
DOC = ROOT / "docs" / "yaml-mode.md"
BASE = {"training": {"total_steps": 100_000},  # long enough for the spec's warm-ups
        "name": "spec-example", "version": "1.0.0"}  # what a spec manifest (entrenar: ...) must give
ENV = {"DATA_PATH": "./data"}


@cache
def spec_examples() -> list[dict]:
    """The documents of the examples file, read as minitrain reads a config (`1e-8` is a float)."""
    return [parse_yaml(text).data for text in EXAMPLES.read_text(encoding="utf-8").split("\n---\n")]


def key_paths(node: Any, path: tuple = ()) -> dict[tuple, Any]:
    """Every mapping key of `node` as a path ("[]" marks a list item) with its first example value."""
    found: dict[tuple, Any] = {}
    items = node.items() if isinstance(node, dict) else ((("[]"), v) for v in node) if isinstance(node, list) else ()
    for key, value in items:
        child = (*path, key)
        if key != "[]":
            found.setdefault(child, value)
        for sub, example in key_paths(value, child).items():
            found.setdefault(sub, example)
    return found


@cache
def all_spec_keys() -> dict[tuple, Any]:
    found: dict[tuple, Any] = {}
    for document in spec_examples():
        for path, value in key_paths(document).items():
            found.setdefault(path, value)
    return found


def spelled(path: tuple) -> str:
    return ".".join(path).replace(".[]", "[]")


def with_key(path: tuple, value: Any, base: dict | None = None) -> dict:
    """`base` (BASE by default) with `value` set at `path`; a key inside a list item gets the spec's first item
    that has it, so its siblings come along."""
    data = copy.deepcopy(BASE if base is None else base)
    if "[]" in path:
        cut = path.index("[]")
        path, value = path[:cut], [copy.deepcopy(first_item_with(path[:cut], path[cut + 1]))]
    value = copy.deepcopy(value)  # the cached examples stay as they are
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {}) if isinstance(node.get(part), dict | type(None)) else node[part]
    node[path[-1]] = value
    return data


def first_item_with(list_path: tuple, key: str) -> Any:
    for document in spec_examples():
        node = document
        for part in list_path:
            node = node.get(part) if isinstance(node, dict) else None
        for item in node or []:
            if isinstance(item, dict) and key in item:
                return item
    raise AssertionError(f"no item with {key} under {list_path}")


def outcome(data: dict) -> tuple[list[str], list[str]]:
    """(problem lines, notes) of validating `data` (no data files read)."""
    try:
        cfg = config_from_dict(data, env=ENV, now=NOW)
    except ConfigError as exc:
        return str(exc).splitlines()[1:], []
    return [], cfg.source.notes


# --- every key of the spec is accepted or refused with a reason ------------------------------------------------


def test_the_examples_hold_every_section_of_the_spec():
    keys = all_spec_keys()
    assert len(keys) > 200
    top = {path[0] for path in keys}
    assert top == {"entrenar", "name", "version", "description", "seed", "data", "model", "optimizer", "scheduler",
                   "training", "lora", "quantize", "monitoring", "callbacks", "output", "quality"}


@pytest.mark.parametrize("path", sorted(all_spec_keys(), key=spelled), ids=spelled)
def test_no_spec_key_is_a_bare_unknown_key(path):
    problems, _ = outcome(with_key(path, all_spec_keys()[path]))
    for line in problems:
        assert "unknown key" not in line, line


# --- docs/yaml-mode.md's table says what happens to each key, and says it truly ---------------------------------

ROW = re.compile(r"^\| `([^`]+)` \| (.*?) \| (accepted|no effect|not yet|refused)\b", re.MULTILINE)


@cache
def doc_rows() -> list[tuple[str, list[str] | None, str]]:
    """(spec key, the values the row is about or None for any, status) of every row of the spec-key table."""
    rows = []
    for key, _, status in ROW.findall(DOC.read_text(encoding="utf-8")):
        name, _, values = key.partition(": ")
        rows.append((name, [v.strip() for v in values.split(",")] if values else None, status))
    return rows


def covering_rows(path: tuple) -> list[tuple[str, list[str] | None, str]]:
    name = spelled(path)
    return [row for row in doc_rows() if row[0] == name or (row[0].endswith(".*") and (
        name == row[0][:-2] or name.startswith(row[0][:-1]) or name.startswith(row[0][:-2] + "[]")))]


def test_the_docs_table_lists_every_spec_key():
    missing = [spelled(p) for p in all_spec_keys() if not covering_rows(p)]
    assert not missing, f"docs/yaml-mode.md has no row for {missing}"


SPLIT = {"train": 0.8, "val": 0.1, "test": 0.1}
TABLE = {"model": {"type": "sequential", "layers": [{"linear": {"out_features": 10}}]},
         "data": {"source": "t.csv"}}
IMAGE_TABLE = {**TABLE, "data": {"source": "t.csv", "image_shape": [224, 224, 3]}}
SEQUENTIAL = {"model": {"architecture": {"type": "sequential"}}}


def table_company(name: str) -> dict:
    """Company for keys that only a table task takes (a sequential model, a source to split)."""
    if name.startswith(("data.source", "data.preprocessing", "data.split", "training.validation.cross_validation")):
        return TABLE
    if name.startswith("model.architecture.layers"):
        return SEQUENTIAL
    if name.startswith("lora"):  # a lora: section is on unless it says enabled: false, and LoRA adapts a model
        return {"model": {"init_from": "user/base"}}
    if name.startswith("training.mixed_precision."):  # present means on, and on is refused: these keys say off
        return {"training": {"mixed_precision": {"enabled": False}}}
    return {}


# Where a key works only with others (momentum with sgd) or the spec's example value does not fit a course-size
# model (a glob on encoder names), the table's "accepted" is checked with this company or value.
CONTEXT: dict[str, tuple[dict, Any]] = {
    "optimizer.momentum": ({"optimizer": {"name": "sgd"}}, 0.9),
    "optimizer.nesterov": ({"optimizer": {"name": "sgd", "momentum": 0.9}}, True),
    "optimizer.dampening": ({"optimizer": {"name": "sgd"}}, 0),
    "optimizer.alpha": ({"optimizer": {"name": "rmsprop"}}, 0.99),
    "optimizer.centered": ({"optimizer": {"name": "rmsprop"}}, False),
    "optimizer.param_groups": ({}, [{"params": "transformer.h.*", "lr": 1e-4}]),
    "optimizer.param_groups[].params": ({}, [{"params": "transformer.h.*", "weight_decay": 0}]),
    "optimizer.param_groups[].lr": ({}, [{"params": "transformer.h.*", "lr": 1e-4}]),
    "optimizer.param_groups[].weight_decay": ({}, [{"params": "transformer.h.*", "weight_decay": 0}]),
    "scheduler.step_size": ({"scheduler": {"name": "step"}}, 1000),
    "scheduler.gamma": ({"scheduler": {"name": "exponential"}}, 0.1),
    **{f"scheduler.{k}": ({"scheduler": {"name": "plateau"}}, v)
       for k, v in (("mode", "min"), ("factor", 0.1), ("patience", 10), ("threshold", 1e-4))},
    **{f"scheduler.{k}": ({"scheduler": {"name": "one_cycle"}}, v)
       for k, v in (("max_lr", 0.01), ("pct_start", 0.3), ("anneal_strategy", "cos"), ("div_factor", 25),
                    ("final_div_factor", 10000))},
    **{f"training.{k}": ({"training": {"total_steps": None}}, v)
       for k, v in (("epochs", 10), ("max_steps", 10000), ("duration", "2h"))},
    "monitoring.alerts": ({}, [{"condition": "loss > 10", "action": "warn", "message": "Loss explosion"}]),
    "training": ({}, {"max_steps": 10}),
    "quantize.granularity=per_group": ({"quantize": {"group_size": 16}}, None),  # divides MiniGPT's 64 and 256
    "training.validation": ({}, {"every": 100, "metrics": ["loss", "token_accuracy"]}),
    "monitoring.terminal": ({}, {"enabled": True, "refresh_rate": 100}),
    "output.metrics": ({}, {"format": "csv"}),
    "scheduler.name=step": ({"scheduler": {"step_size": 100}}, None),
    "scheduler.name=exponential": ({"scheduler": {"gamma": 0.99}}, None),
    "data.format=text": ({"data": {"loss_on": "all", "heldout_policy": "none"}}, None),
    "monitoring.alerts[].condition": ({}, [{"condition": "val_loss.stall(5)", "action": "warn"}]),
    # The spec's example names Llama's modules (embed_tokens, layers.0): MiniGPT's are GPT-2's.
    "model.freeze": ({}, ["transformer.wte", "transformer.h.0"]),
    # Table keys come with a sequential model and a source to split (a split leaf with the other ratios).
    "data.split": (TABLE, None),
    **{f"data.split.{k}": ({**TABLE, "data": {**TABLE["data"], "split": dict(SPLIT)}}, None)
       for k in ("train", "val", "test", "stratify", "seed")},
    "data.augmentation": ({}, [{"random_swap": {"probability": 0.1}}]),
    **{f"data.augmentation[].{kind}{leaf}": (IMAGE_TABLE, None) for kind in ("random_crop", "horizontal_flip",
                                                                            "normalize")
       for leaf in ("", ".size", ".padding", ".probability", ".mean", ".std")},
    "model.architecture.type=sequential": ({"model": {"architecture": {"layers": [{"linear": {"out_features": 2}}]}}},
                                           None),
    "model.architecture.layers[].activation": (SEQUENTIAL, [{"linear": {"out_features": 2}}, {"activation": "relu"}]),
    "model.architecture.layers[].dropout": (SEQUENTIAL, [{"dropout": 0.2}, {"linear": {"out_features": 2}}]),
    # A list inside a list item: the test sets the whole outer list.
    **{f"data.preprocessing[].{kind}.columns": (TABLE, [{kind: {"columns": ["x_0", "...", "x_3"]}}])
       for kind in ("normalize", "encode", "drop")},
    **{f"data.augmentation[].{kind}.{leaf}": (IMAGE_TABLE, [{kind: options}]) for kind, leaf, options in (
        ("random_crop", "size", {"size": [224, 224], "padding": 4}),
        ("normalize", "mean", {"mean": [0.5] * 3, "std": [0.2] * 3}),
        ("normalize", "std", {"mean": [0.5] * 3, "std": [0.2] * 3}))},
    **{f"training.validation.metrics={m}": (TABLE, None)
       for m in ("accuracy", "precision", "recall", "f1", "auc_roc", "confusion_matrix")},
    # LoRA adapts a base (no file is read here); its targets are checked while it is enabled.
    "lora.enabled": ({"model": {"init_from": "models/base.safetensors"}}, True),
    "lora.target_modules": ({"model": {"init_from": "m.safetensors"}, "lora": {"enabled": True}}, ["c_attn"]),
    "lora.target_modules_pattern": ({"model": {"init_from": "m.safetensors"}, "lora": {"enabled": True}},
                                    r"transformer\.h\.1\..*"),
    # Names and group sizes are checked while quantization is on; samples weigh the mse method only.
    "quantize.exclude": ({"quantize": {"enabled": True}}, ["mlp.c_proj"]),
    "quantize.group_size": ({"quantize": {"enabled": True, "granularity": "per_group"}}, 32),
    "quantize.calibration": ({}, {"samples": 512, "method": "mse"}),
    "quantize.calibration.samples": ({"quantize": {"calibration": {"method": "mse"}}}, 512),
    # The spec's examples track to trueno-db, tag with data.source (not a minitrain key), watch GPUs, include a
    # classifier's accuracy and write a callback as a script: each is refused on its own row.
    "monitoring.tracking": ({}, {"enabled": True, "backend": "mlflow", "project": "verbs",
                                 "experiment": "{{ name }}-{{ timestamp }}"}),
    **{f"monitoring.tracking.tags{k}": ({}, v) for k, v in ((".model", "{{ model.type }}"), (".dataset", "verbs"),
                                                            ("", {"model": "{{ model.type }}", "seed": 3}))},
    "monitoring.system": ({}, {"enabled": True, "interval": 1000, "metrics": ["cpu_percent", "memory_mb"]}),
    "output.metrics.include": ({}, ["train_loss", "val_loss", "learning_rate"]),
    # The spec's dashboard shows an accuracy: a classifier's, when its validation measures it.
    "monitoring.terminal.metrics": ({**TABLE, "training": {"validation": {"metrics": ["loss", "accuracy"]}}}, None),
    "callbacks": ({}, [{"type": "checkpoint", "trigger": "epoch_end", "config": {"save_best": True}},
                       {"type": "lr_monitor", "trigger": "step"}]),
}


def checked_cases() -> list[tuple[str, tuple, Any, dict, str]]:
    """(id, path, value, company, status) for every spec key and every value a row names."""
    cases = []
    for path, example in all_spec_keys().items():
        for name, values, status in covering_rows(path):
            company, value = CONTEXT.get(spelled(path), (table_company(spelled(path)), example))
            value = example if value is None else value
            for each in values if values is not None and name == spelled(path) else [None]:
                if each is not None:
                    company = CONTEXT.get(f"{spelled(path)}={each}", (company, None))[0]
                    value = [each] if isinstance(example, list) else parse_yaml(each).data
                cases.append((f"{spelled(path)}={value!r}"[:90], path, value, company, status))
    return cases


@pytest.mark.parametrize(("path", "value", "company", "status"), [c[1:] for c in checked_cases()],
                         ids=[c[0] for c in checked_cases()])
def test_each_key_does_what_the_docs_table_says(path, value, company, status):
    base = copy.deepcopy(BASE)
    for section, keys in company.items():
        base.setdefault(section, {}).update(keys)
    if "[]" in path and isinstance(value, list):  # CONTEXT gives the whole list
        path = path[: path.index("[]")]
    problems, notes = outcome(with_key(path, value, base))
    name = spelled(path)
    if status == "accepted":
        assert problems == []
    elif status == "no effect":
        assert problems == [] and any(note.startswith(f"{name}:") for note in notes), notes
    elif status == "not yet":
        assert any("not supported yet" in line for line in problems), problems
    else:
        assert problems and not any("not supported yet" in line for line in problems), problems


def test_the_not_yet_table_is_what_the_docs_call_not_yet():
    not_yet = {name for name, _, status in doc_rows() if status == "not yet"}
    for key in NOT_YET:
        path, _, value = key.partition("=")
        path = path.replace(".*.", "[].")  # a key inside list items, as the docs table spells it
        assert path in not_yet or f"{path}.*" in not_yet or any(r.startswith(path + ":") for r in not_yet) or (
            any(row[0] == path and value in (row[1] or []) for row in doc_rows())), key


# --- the mapping ----------------------------------------------------------------------------------------------


SPEC_SHAPED = """\
entrenar: "1.0"
name: verbs-spec
version: "1.0.0"
seed: 5
data:
  train: data/processed/train.jsonl
  val: data/processed/val.jsonl
  loader: {batch_size: 16, shuffle: false, drop_last: false, num_workers: 4}
model:
  architecture: {type: transformer, hidden_size: 32, num_layers: 1, num_heads: 2, vocab_size: 64,
                 max_seq_length: 32}
  device: cpu
  dtype: float64
optimizer:
  name: adamw
  lr: 2e-3
  betas: [0.9, 0.95]
  amsgrad: true
  param_groups:
    - {params: "transformer.h.*", lr: 1e-3}
scheduler:
  name: cosine_annealing
  warmup: {steps: 10, start_lr: 1e-5}
  T_max: 100
  eta_min: 1e-5
training:
  max_steps: 200
  gradient: {accumulation_steps: 2, clip_norm: 1.0}
  validation: {every: 25, metrics: [loss, token_accuracy]}
  early_stopping: {enabled: true, patience: 3}
  deterministic: true
monitoring:
  terminal: {enabled: false}
  alerts:
    - {condition: "loss > 10", action: warn, message: "loss exploded"}
output:
  dir: runs/spec
  model: {format: safetensors}
"""


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    """`text` as a config file; one without a run length gets scheduler.total_steps at its end (its own lines
    stay where they are)."""
    if not re.search(r"total_steps|max_steps|epochs|duration|minitrain_lock", text):
        text += "scheduler:\n  total_steps: 100\n" if "\nscheduler:" not in "\n" + text else ""
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_a_spec_shaped_config_lands_on_minitrains_keys(tmp_path):
    cfg = load_config(write(tmp_path, SPEC_SHAPED))
    data = resolved_dict(cfg)
    assert data["model"] | {} == {"n_layer": 1, "n_head": 2, "d_model": 32, "d_ff": 256, "vocab_size": 64,
                                  "max_seq_len": 32, "dropout": 0.0, "init_from": None, "dtype": "float64"}
    assert data["optimizer"] == {"type": "adamw", "lr_max": 2e-3, "lr_min": 1e-5, "beta1": 0.9, "beta2": 0.95,
                                 "eps": 1e-8, "weight_decay": 0.01, "amsgrad": True, "clip": None,
                                 "clip_value": None, "groups": [{"pattern": "transformer.h.*", "lr_scale": None,
                                                                 "lr": 1e-3, "weight_decay": None}]}
    assert cfg.optimizer.kwargs()["groups"] == [{"pattern": "transformer.h.*", "lr_scale": 0.5}]
    assert data["scheduler"] == {"type": "warmup_cosine", "warmup_steps": 10, "warmup_start_lr": 1e-5,
                                 "total_steps": None, "decay_steps": 100}
    training = data["training"]
    assert (training["total_steps"], training["batch_size"], training["grad_accumulation"]) == (200, 16, 2)
    assert (training["shuffle"], training["drop_last"], training["clip"], training["val_every"]) == (
        False, False, 1.0, 25)
    assert training["val_metrics"] == ["loss", "perplexity", "token_accuracy"]
    assert (training["rng_seed"], training["data_seed"]) == (5, 6)  # the root seed derives both
    assert training["early_stopping"]["patience"] == 3
    assert data["monitoring"] == {"progress": "none", "alerts": [
        {"condition": "loss > 10", "action": "warn", "message": "loss exploded"}]}
    assert cfg.monitoring.alert_rules()[0].message == "loss exploded"
    assert sorted(note.split(":")[0] for note in cfg.source.notes) == [
        "data.loader.num_workers", "model.device", "training.deterministic"]
    assert cfg.output.model_format == "safetensors"  # output.model.format is a setting: gguf writes a GGUF
    assert "type" not in data["model"]  # architecture.type transformer is model.type minigpt, the default
    # the resolved config is a lab-01-shaped config that loads to the same values
    again = load_config(write(tmp_path, yaml.safe_dump(data), "again.yaml"))
    assert resolved_dict(again) == data


def test_a_spec_shaped_config_validates_and_lists_what_has_no_effect(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    path = write(tmp_path, SPEC_SHAPED.replace("vocab_size: 64,\n", "vocab_size: 64,\n"))
    assert cli.main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "– accepted, no effect: data.loader.num_workers, model.device, training.deterministic" in out
    assert "run: 200 steps of batch 16 × 2, adamw lr 0.002 → 1e-05 (warmup_cosine)" in out


@pytest.mark.parametrize(("text", "line", "key", "message"), [
    ("optimizer:\n  lr: 1e-3\n  lr_max: 2e-3\n", 2, "optimizer.lr", "also given as optimizer.lr_max; give it in one"),
    ("optimizer:\n  lr: 1e-3\nscheduler:\n  max_lr: 2e-3\n", 4, "scheduler.max_lr", "also given as optimizer.lr;"),
    ("seed: 3\ntraining:\n  rng_seed: 4\n", 1, "seed", "also given as training.rng_seed"),
    ("data:\n  loader:\n    batch_size: 0\n", 3, "data.loader.batch_size", "must be greater than or equal to 1"),
    ("training:\n  gradient:\n    clip_norm: -1\n", 3, "training.gradient.clip_norm", "must be greater than 0"),
    ("optimizer:\n  betas: 0.9\n", 2, "optimizer.betas", "write betas: [0.9, 0.95] (two numbers) or beta1/beta2"),
    ("optimizer:\n  betas: [0.9, 1.5]\n", 2, "optimizer.betas[1]", "must be less than 1"),
    ("optimizer:\n  name: AdamW\n", 2, "optimizer.name", "(got 'AdamW') — did you mean 'adamw'?"),
    ("optimizer:\n  param_groups:\n    - {params: 'encoder.*', lr: 1e-4}\n", 3,
     "optimizer.param_groups[0].params", "pattern 'encoder.*' matches no parameter"),
    ("scheduler:\n  warmup: {steps: 5, stepz: 3}\n", 2, "scheduler.warmup.stepz", "did you mean 'steps'?"),
    ("scheduler:\n  warmup: 100\n", 2, "scheduler.warmup", "must be a mapping of ratio, start_lr, steps"),
    ("training:\n  validation:\n    metrics: [accuracy]\n", 3, "training.validation.metrics[0]",
     "accuracy is a classifier's metric; a language model's are loss, perplexity, token_accuracy and exact_match; "
     "for a language model's accuracy use token_accuracy"),
    ("training:\n  effective_batch_size: 32\n", 2, "training.effective_batch_size",
     "is 32, but batch_size 8 × grad_accumulation 1 = 8"),
    ("model:\n  device: cuda:0\n", 2, "model.device", "not supported: minitrain runs NumPy on the CPU"),
    ("model:\n  device: tpu\n", 2, "model.device", "must be auto or cpu (got 'tpu')"),
    ("model:\n  source: s3://bucket/model\n", 2, "model.source", "reaches no service but the Hugging Face Hub"),
    ("model:\n  format: pt\n", 2, "model.format", "pt files are pickles"),
    ("entrenar: '2.0'\n", 1, "entrenar", "this minitrain reads version 1.0 of the YAML-mode spec"),
    ("data:\n  loader:\n    num_workers: -1\n", 3, "data.loader.num_workers", "must be an integer >= 0 (got -1)"),
    ("training:\n  distributed: {strategy: ddp}\n", 2, "training.distributed",
     "minitrain's data parallelism is runtime.data_parallel"),
    ("monitoring:\n  alerts:\n    - {condition: 'gpu_memory > 0.95', action: halt}\n", 3, "monitoring.alerts[0]",
     "gpu_memory is never logged, so this alert could never fire; logged: step, loss, lr, grad_norm, val_loss"),
    ("monitoring:\n  alerts: ['los > 0: halt']\n", 2, "monitoring.alerts[0]", "— did you mean 'loss'?"),
    ("training:\n  max_steps: 10\n  epochs: 2\n", 3, "training.epochs", "(also given: training.max_steps)"),
])
def test_problems_name_the_key_and_line_the_user_wrote(tmp_path, text, line, key, message):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert f"c.yaml:{line}: {key}: " in str(info.value) and message in str(info.value)


def test_the_seed_flag_sets_the_root_seed_of_a_spec_shaped_config(tmp_path):
    cfg = load_config(write(tmp_path, "seed: 5\ntraining:\n  max_steps: 10\n"), values={"training.rng_seed": 9})
    assert (cfg.training.rng_seed, cfg.training.data_seed) == (9, 10)
    given = load_config(write(tmp_path, "seed: 5\ndata:\n  loader: {seed: 1}\ntraining:\n  max_steps: 10\n"))
    assert (given.training.rng_seed, given.training.data_seed) == (5, 1)  # the loader's seed wins for the data


def test_hub_sources_are_hub_ids_and_early_stopping_can_be_turned_off(tmp_path):
    cfg = load_config(write(tmp_path, "model:\n  source: hf://user/verbs\ntraining:\n  max_steps: 10\n"
                                      "  early_stopping: {enabled: false, patience: 3}\n"))
    assert cfg.model.init_from == "user/verbs" and cfg.training.early_stopping is None


@pytest.mark.parametrize(("text", "hint"), [
    ("optimizer:\n  learning_rate: 1e-3\n", "optimizer.learning_rate: unknown key — minitrain calls this "
                                            "optimizer.lr_max"),
    ("optimizer:\n  beta: 0.9\n", "did you mean 'beta1'?"),
    ("training:\n  seed: 3\n", "minitrain calls this training.rng_seed"),
    ("model:\n  n_embd: 64\n", "minitrain calls this model.d_model"),
    ("training:\n  validaton: {every: 5}\n", "training.validaton: unknown key — did you mean 'validation'?"),
])
def test_hints_name_what_means_the_same(tmp_path, text, hint):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert hint in str(info.value)


def test_no_far_fetched_suggestions(tmp_path):
    # 'validation' is not a misspelt 'duration', nor 'output.model' a misspelt 'models_dir': no hint beats a wrong one.
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "training:\n  total_steps: 100\n  validatio_rate: 3\n"))
    assert "did you mean 'duration'" not in str(info.value)
    assert load_config(write(tmp_path, LAB01 + "output:\n  model: {format: safetensors}\n")).output.dir


def test_a_lab01_config_is_untouched_by_the_spec_layer(tmp_path):
    cfg = load_config(write(tmp_path, LAB01))
    assert cfg.source.renamed == {} and cfg.source.notes == []


# --- one JSON Schema for both shapes ---------------------------------------------------------------------------


def test_the_json_schema_checks_either_shape_and_flags_refused_keys(capsys):
    import jsonschema

    assert cli.main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    validator = jsonschema.Draft202012Validator(schema)
    for path in (ROOT / "experiments" / "18-train-mini" / "config.yaml",
                 ROOT / "experiments" / "yaml-spec-11" / "config.yaml",
                 ROOT / "experiments" / "yaml-spec-appendix-b" / "config.yaml"):
        errors = [e.message for e in validator.iter_errors(parse_yaml(path.read_text(encoding="utf-8")).data)]
        assert errors == [], (path, errors)
    assert validator.is_valid(parse_yaml(SPEC_SHAPED).data)
    for refused in ({"monitoring": {"terminal": {"charts": ["loss"]}}}, {"model": {"device": "cuda"}},
                    {"data": {"loader": {"workers": 2}}}, {"optimizer": {"name": "adamw_8bit"}}):
        assert not validator.is_valid(refused), refused
