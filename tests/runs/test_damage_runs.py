"""Foreign run-folder files, generated: each file `train --resume` reads replaced by another run's of another kind
(a table run's in a language model's folder, and the other way round), or the folder held by a second writer.

Two tiny runs, a MiniGPT one and a table one, are trained once. Each example copies one of them, puts the other's
file in place of one file resume reads (manifest.json, train_log.jsonl, config.resolved.yaml,
the checkpoint it names) or holds the folder's writer lock, and resumes it in-process. Every resume must refuse
with exit code 2 and exactly one `error:` line naming the file or the folder, no traceback, within the hang guard,
and leave the folder's files as they were. Conventions (examples, seeds, hang guard, counts) are test_damage.py's.
"""

from __future__ import annotations

import contextlib
import csv
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_damage import EXAMPLES, FUZZ, REPO, STATS, count, fingerprint, run_cli

from minitrain.config import load_config
from minitrain.course.fixtures import write_tiny_data
from minitrain.runs.run_lock import RunLock
from minitrain.training.run import run_training

pytestmark = pytest.mark.slow

TEXT_CONFIG = """\
model: {n_layer: 1, n_head: 2, d_model: 16, d_ff: 32, vocab_size: 64, max_seq_len: 32}
optimizer: {type: adamw, lr_max: 3.0e-3, lr_min: 3.0e-4, clip: 1.0}
scheduler: {warmup_steps: 2, total_steps: 8}
training: {batch_size: 4, val_every: 2, log_every: 2, checkpoint: {save_every: 4}}
data: {train_path: data/train.jsonl, val_path: data/val.jsonl, vocab_path: data/vocab.json}
monitoring: {progress: none}
"""
TABLE_CONFIG = """\
model:
  type: sequential
  layers: [{linear: {out_features: 8}}, {activation: relu}, {linear: {out_features: 10}}, {activation: softmax}]
data: {source: digits.csv, split: {train: 0.8, val: 0.2}}
optimizer: {type: adamw, lr_max: 0.005}
training: {total_steps: 8, batch_size: 16, val_every: 2, log_every: 2, checkpoint: {save_every: 4}}
monitoring: {progress: none}
"""
FILES = ["manifest.json", "train_log.jsonl", "config.resolved.yaml", "checkpoints/step-4"]  # latest: same bytes in both


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """{kind: base folder}: base/config.yaml, its data and base/run, a finished run of 8 steps."""
    bases = {}
    for kind, config in (("text", TEXT_CONFIG), ("table", TABLE_CONFIG)):
        base = bases[kind] = tmp_path_factory.mktemp(f"foreign-{kind}")
        if kind == "text":
            write_tiny_data(base, baseline_ppl=1000.0)
        else:
            with (REPO / "data" / "digits" / "digits.csv").open(newline="") as src, \
                    (base / "digits.csv").open("w", newline="") as dst:
                csv.writer(dst).writerows(row for _, row in zip(range(121), csv.reader(src), strict=False))
        (base / "config.yaml").write_text(config, encoding="utf-8")
        with contextlib.chdir(base):
            run_training(load_config("config.yaml"), "run", progress=False, config_path="config.yaml",
                         baseline_path="baseline.json")
    return bases


def _path(run: Path, name: str) -> Path:
    return run / "checkpoints" / "step-4.safetensors" if name == "checkpoints/step-4" else run / name


@settings(max_examples=max(EXAMPLES // 5, 6), derandomize=not FUZZ, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_another_runs_file_in_place_of_each_file_resume_reads_is_refused(runs, data):
    kind = data.draw(st.sampled_from(sorted(runs)), label="folder")
    other = "table" if kind == "text" else "text"
    name = data.draw(st.sampled_from([*FILES, "second writer"]), label="foreign")
    with tempfile.TemporaryDirectory(prefix="minitrain-foreign-") as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(runs[kind], work, symlinks=True)
        if name != "second writer":
            shutil.copyfile(_path(runs[other] / "run", name), _path(work / "run", name))
        before = fingerprint(work / "run")
        count("foreign run files")
        # a finished run resumes from its latest checkpoint: the foreign step-4 is read when --resume names it
        resume = "run/checkpoints/step-4.safetensors" if name == "checkpoints/step-4" else "run"
        argv = ["train", "--resume", resume, "--quiet"]
        with contextlib.chdir(work), (RunLock(work / "run") if name == "second writer" else contextlib.nullcontext()):
            code, _, err = run_cli(argv if name != "config.resolved.yaml" else [argv[0], "config.yaml", *argv[1:]])
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        context = f"{kind} run, {other}'s {name}: exit {code}\n{err}"
        assert code == 2 and len(errors) == 1 and "Traceback" not in err, context
        assert "run" in errors[0], context
        after = fingerprint(work / "run")
        changed = {k for k, v in after.items() if before.get(k) != v} - {"logs/train.log", ".run.lock"}
        assert not changed, context
        STATS["failed"] += 1
