"""Merge and prune configs, generated: a `merge` config with any method, base, models and parameters (weights and
densities NaN, inf, 1e308, negative, 0, strings, lists; unknown keys; models missing or not models), and `prune`
flags of any method, sparsity, structure, excluded layers and calibration. Each runs in-process as the CLI runs it
(tests/training/test_damage.py's `run_cli`: a hang guard, a traceback fails the example) and must exit 0 or 2 with
one `error:` line when it fails; a merge that succeeds writes finite weights, a prune only sets weights to zero
(every weight it keeps is the source's own); the source models are never changed, and nothing is written but OUT.
Conventions of tests/training/test_damage.py (derandomized in `make test`, more under MINITRAIN_DAMAGE_EXAMPLES)."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from fakehub import make_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_damage import EXIT_CODES, STATS, count, fingerprint, run_cli

from minitrain.config import load_config
from minitrain.course.fixtures import write_tiny_run
from minitrain.merging.methods import MERGE_METHODS
from minitrain.runs.model_files import load_model_file
from minitrain.training.run import run_training

EXAMPLES = int(os.environ.get("MINITRAIN_DAMAGE_EXAMPLES", "8"))
FUZZ = "MINITRAIN_DAMAGE_EXAMPLES" in os.environ
SETTINGS = settings(max_examples=EXAMPLES, derandomize=not FUZZ, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
NUMBERS = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 1e-320, 1e308, -1e308, math.nan, math.inf, -math.inf, 2, 0,
                           -3, 10**30]) | st.floats(-4, 4)
ODD = st.sampled_from(["", "0.5", "lots", None, True, [], [0.5], {"a": 1}])
VALUES = NUMBERS | ODD


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, list[Path]]:
    """A folder with three run folders of TINY_MODEL (random weights, one vocabulary) and a file that is no model."""
    root = tmp_path_factory.mktemp("merge-prune")
    (root / "notes.txt").write_text("not a model\n")
    return root, [make_run(root / f"r{seed}", seed=seed) for seed in range(3)]


def checked(argv: list[str], root: Path) -> int:
    """Run `argv` as the CLI does; its exit code, after the checks every example shares (nothing under `root` but
    its out/ folder changes)."""
    sources = lambda: {k: v for k, v in fingerprint(root).items() if not k.startswith("out/")}  # noqa: E731
    before = sources()
    code, _, err = run_cli(argv)
    context = f"minitrain {' '.join(argv)} -> {code}\n{err}"
    assert code in EXIT_CODES and code in (0, 1, 2), context
    errors = [line for line in err.splitlines() if re.match(r"(minitrain [a-z-]+: )?error: ", line)]  # argparse's
    assert "Traceback" not in err and len(errors) == (code != 0), context
    assert sources() == before, context
    STATS["failed"] += code != 0
    return code


def weights(source: Path) -> dict[str, np.ndarray]:
    return load_model_file(source)[0]


def valid_config(method: str, models: list[Path]) -> dict:
    """A merge config of `method` that merges: the runs' first model as the base, the others merged onto it."""
    entries = [{"model": str(m), "parameters": {"weight": 1.0}} for m in models[1:]]
    config = {"merge_method": method, "base_model": str(models[0]), "models": entries, "parameters": {}}
    if method == "linear":
        config.pop("base_model")
    elif method == "slerp":
        config["models"], config["parameters"] = [{"model": str(models[1])}], {"t": 0.5}
    if "density" in MERGE_METHODS[method].reads:
        config["parameters"]["density"] = 0.5
    return config


@SETTINGS
@given(data=st.data())
def test_a_generated_merge_config_merges_finite_weights_or_is_one_error(runs, tmp_path_factory, data):
    """A config that merges, then up to 3 damages: a parameter (top level or a model's) set to anything, a source
    that is missing, not a model or a folder of models, an unknown key, a key left out."""
    root, models = runs
    config = valid_config(data.draw(st.sampled_from(list(MERGE_METHODS)), "method"), models)
    for _ in range(data.draw(st.integers(0, 3), "damages")):
        where = data.draw(st.sampled_from(["parameters", "model", "source", "key", "drop"]), "damage")
        entry = data.draw(st.sampled_from(config.get("models") or [{}]), "entry")
        if where in ("parameters", "model"):
            key = data.draw(st.sampled_from(["weight", "density", "lambda", "normalize", "t", "epsilon"]), "key")
            value = data.draw(VALUES | st.lists(st.fixed_dictionaries({"value": VALUES}), max_size=2), "value")
            (config if where == "parameters" else entry).setdefault("parameters", {})[key] = value
        elif where == "source":
            bad = data.draw(st.sampled_from([str(root / "missing"), str(root / "notes.txt"), str(root), 7]), "bad")
            if data.draw(st.booleans(), "base") or not entry:
                config["base_model"] = bad
            else:
                entry["model"] = bad
        elif where == "key":
            config[data.draw(st.sampled_from(["tokenizer_source", "slices", "dtype", "seed"]), "key")] = \
                data.draw(VALUES | st.integers(-2, 2**64), "value")
        else:
            config.pop(data.draw(st.sampled_from(sorted(config)), "dropped"))
    count("merge configs")
    folder = tmp_path_factory.mktemp("merge", numbered=True)
    spec, out = folder / "merge.yaml", root / "out" / f"{folder.name}.safetensors"
    spec.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    if checked(["merge", str(spec), "-o", str(out)], root) == 0:
        merged = weights(out)
        assert merged.keys() == weights(models[0].parent / "models" / "minigpt-test.safetensors").keys()
        assert all(np.isfinite(a).all() for a in merged.values()), config  # a silent NaN model
        out.unlink()


@pytest.fixture(scope="module")
def trained(runs) -> Path:
    """A run of the tiny corpus trained 2 steps (wanda reads its training split)."""
    root = runs[0] / "trained"
    config = load_config(write_tiny_run(root), ["scheduler.warmup_steps=1", "scheduler.total_steps=2"])
    run_training(config, root / "run", progress=False, models_dir=root / "models", baseline_path=root /
                 "baseline.json")
    return root / "run"


FLAGS = {"--method": st.sampled_from(["magnitude", "wanda", "random", ""]),
         "--sparsity": st.sampled_from(["0", "0.5", "0.999", "1", "-0.0", "nan", "inf", "1e-300", "x", "-1"])
         | st.floats(0, 1).map(repr),
         "--structure": st.sampled_from(["unstructured", "2:4", "4:8"]),
         "--exclude": st.sampled_from(["transformer.h.0.attn.c_attn", "lm_head", "nope", ""]),
         "--calibration": st.sampled_from(["train", "missing", "notes"]),
         "--calibration-samples": st.sampled_from(["1", "3", "0", "-1", "1000000000"])}


@SETTINGS
@given(method=st.sampled_from(["magnitude", "wanda"]), data=st.data())
def test_generated_prune_flags_prune_only_or_are_one_error(runs, trained, method, data):
    """Flags that prune (METHOD at sparsity 0.5), then up to 3 flags set to anything or left out."""
    root, _ = runs
    flags = {"--method": method, "--sparsity": "0.5"}
    for _ in range(data.draw(st.integers(0, 3), "damages")):
        flag = data.draw(st.sampled_from(sorted(FLAGS)), "flag")
        if data.draw(st.booleans(), "drop") and flag in flags:
            del flags[flag]
        else:
            flags[flag] = data.draw(FLAGS[flag], flag)
    files = {"train": trained.parent / "data" / "train.jsonl", "missing": root / "missing", "notes": root /
             "notes.txt"}
    if "--calibration" in flags:
        flags["--calibration"] = str(files[flags["--calibration"]])
    out = root / "out" / "pruned.safetensors"
    argv = ["prune", str(trained), str(out), *(f"{flag}={value}" for flag, value in flags.items()), "--force"]
    count("prune flags")
    if checked(argv, root) == 0:
        source = weights(Path(json.loads((trained / "results.json").read_text())["model_path"]))
        pruned = weights(out)
        assert pruned.keys() == source.keys()
        for name, a in pruned.items():  # pruning zeroes weights; it never moves one it keeps
            kept = a != 0
            assert np.array_equal(a[kept], source[name][kept]), (argv, name)
        out.unlink()
