"""Bad numbers and bad tables (issue 26, items 1, 3, 6 and 8): a loss too large to exponentiate, weights that are
not finite or not float32, table cells that are not UTF-8, not numbers or not finite. Each ends in a documented
exit code with one `error:` line (or, for a diverging run, exit 3 and status "diverged"), never a traceback, never
a file written from bad numbers, never a lock or a "running" status left behind.

Listed cases first, then generated ones (hypothesis, derandomized; MINITRAIN_DAMAGE_EXAMPLES runs more, with random
seeds, as in tests/test_damage.py).
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
from test_damage import CONFIG, metadata_of, run_cli

from minitrain.callbacks import Callback
from minitrain.config import load_config
from minitrain.course.fixtures import write_tiny_data
from minitrain.evaluation.metrics import PerplexityMeter, perplexity
from minitrain.runs.model_files import _content_digest
from minitrain.runs.run_lock import writer_of
from minitrain.training.run import run_training

pytestmark = pytest.mark.slow

TRAIN = ["train", "config.yaml", "--models-dir", "models", "--quiet"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A finished tiny language-model run: base/config.yaml, base/data/, base/run/ (checkpoints at 4 and 8),
    base/models/; the config and the paths it records are relative to base."""
    base = tmp_path_factory.mktemp("numbers-base")
    write_tiny_data(base, baseline_ppl=1000.0)
    (base / "config.yaml").write_text(CONFIG, encoding="utf-8")
    with contextlib.chdir(base):
        run_training(load_config("config.yaml"), "run", progress=False, models_dir="models",
                     config_path="config.yaml", baseline_path="baseline.json")
    return base


@pytest.fixture
def work(tiny, tmp_path) -> Path:
    """A copy of the tiny run to damage, as the working folder."""
    copy = tmp_path / "w"
    shutil.copytree(tiny, copy)
    for name in ("run/manifest.json", "run/results.json"):  # recorded absolute paths: point them into the copy
        path = copy / name
        path.write_text(path.read_text().replace(str(tiny), str(copy)))
    with contextlib.chdir(copy):
        yield copy


def with_tensors(data: bytes, change) -> bytes:
    """The same file with `change(tensors)` applied and its checksum recomputed (a forger who knows the format)."""
    tensors = safetensors.numpy.load(data)
    meta = metadata_of(data)
    meta.pop("sha256")
    tensors = change(dict(tensors))
    meta["sha256"] = _content_digest(tensors, meta)
    return safetensors.numpy.save(tensors, metadata=meta)


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------------------ 1. a loss too large to exponentiate


def test_the_perplexity_of_a_huge_loss_is_inf_not_an_overflow_error():
    assert perplexity(709.0) == math.exp(709.0) and perplexity(710.0) == math.inf and math.isnan(perplexity(math.nan))
    meter = PerplexityMeter()
    meter.update(np.full((1, 2, 3), -1e4), np.zeros((1, 2), dtype=int), np.ones((1, 2), dtype=bool))
    assert meter.mean_nll == 1e4 and meter.ppl == math.inf


def test_a_huge_finite_val_loss_ends_the_run_as_diverged_with_the_lock_released(work):
    models = sorted((work / "models").iterdir())
    code, _, err = run_cli([*TRAIN, "--out-dir", "big", "--set", "optimizer.lr_max=50", "--set", "optimizer.lr_min=0"])
    assert code == 3, err
    assert one_error(err).startswith("error: training diverged: val_loss ") and "val_ppl inf" in err
    assert manifest(work / "big")["status"] == "diverged" and writer_of(work / "big") is None
    log = (work / "big" / "train_log.jsonl").read_text()
    assert "Infinity" not in log and "NaN" not in log  # the diverged validation is not logged: the log stays JSON
    assert sorted((work / "models").iterdir()) == models


def test_resuming_weights_that_overflow_ends_as_diverged_and_writes_no_model_file(work):
    checkpoint = work / "run" / "checkpoints" / "step-8.safetensors"
    checkpoint.write_bytes(with_tensors(checkpoint.read_bytes(), lambda t: {
        name: a * np.float32(1e30) if not name.startswith("optimizer.") else a for name, a in t.items()}))
    models = sorted((work / "models").iterdir())
    code, _, err = run_cli([*TRAIN, "--out-dir", "run", "--resume", "run"])
    assert code == 3, err
    assert "in the final evaluation after step 7" in one_error(err) and "train_loss nan" in err
    assert manifest(work / "run")["status"] == "diverged" and writer_of(work / "run") is None
    assert sorted((work / "models").iterdir()) == models and not (work / "run" / "results.json").exists()


class Broken(Callback):
    """A watcher with a bug: it raises at the third step."""

    def on_step_end(self, ctx) -> None:
        if ctx.step == 2:
            raise RuntimeError("a bug in a callback")


def test_an_unexpected_exception_leaves_status_failed_and_the_folder_free(work):
    with pytest.raises(RuntimeError, match="a bug in a callback"):
        run_training(load_config("config.yaml"), "broken", progress=False, models_dir="models",
                     config_path="config.yaml", baseline_path="baseline.json", callbacks=[Broken()])
    recorded = manifest(work / "broken")
    assert recorded["status"] == "failed" and recorded["error"] == "RuntimeError: a bug in a callback"
    assert writer_of(work / "broken") is None
