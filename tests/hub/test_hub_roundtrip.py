"""Train -> publish -> download -> init_from -> train, end to end against the stand-in Hub.

Also runs the installed `minitrain` command in a subprocess, so the client there reads HF_ENDPOINT, HF_HOME and
HF_TOKEN from the environment exactly as a user's shell would set them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from fakehub import serving
from test_run import log_rows, train_tiny

from minitrain.course.fixtures import write_tiny_data
from minitrain.hub.export_hf import EXPORT_FILES, export_model
from minitrain.hub.upload import publish
from minitrain.runs.model_files import load_model_file

pytestmark = pytest.mark.slow

TOKEN = "hf_roundtripTestToken8Wm"
REPO = "alice/minigpt-roundtrip"


def write_config(folder: Path, name: str, extra: str = "", lr: float = 3e-3, seed: int = 42) -> Path:
    """A 1-layer model on 40 records of the real corpus (test_run's tiny data, written once per folder)."""
    data = folder / "data"
    if not data.exists():
        write_tiny_data(folder, baseline_ppl=7.5)
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""\
        model: {{n_layer: 1, n_head: 2, d_model: 16, d_ff: 32, vocab_size: 64, max_seq_len: 32{extra}}}
        optimizer: {{type: adamw, lr_max: {lr}, lr_min: 0.0, weight_decay: 0.0, clip: 1.0}}
        scheduler: {{warmup_steps: 2, total_steps: 12}}
        training: {{batch_size: 4, val_every: 6, log_every: 3, rng_seed: {seed}, data_seed: 7}}
        data: {{train_path: {data}/train.jsonl, val_path: {data}/val.jsonl, dev_path: {data}/dev.jsonl,
                vocab_path: {data}/vocab.json}}
        monitoring: {{progress: none}}
        """), encoding="utf-8")
    return path


def final_weights(results: dict) -> dict[str, np.ndarray]:
    return load_model_file(results["model_path"])[0]


def test_train_publish_download_and_train_from_it(tmp_path, monkeypatch):
    with serving(monkeypatch, tmp_path / "hf", TOKEN, {TOKEN: "alice"}) as hub:
        first = train_tiny(write_config(tmp_path, "first"), tmp_path / "first")
        publish(tmp_path / "first", REPO)
        export_model(tmp_path / "first", tmp_path / "local", repo_id=REPO)
        for name in EXPORT_FILES:
            assert hub.repos[REPO].files[name] == (tmp_path / "local" / name).read_bytes(), name

        # A second run starts from the published model. With a vanishing learning rate its final weights
        # are the downloaded ones, so equality shows the weights made the whole trip; a different rng_seed
        # shows they did not come from the initialisation.
        frozen = write_config(tmp_path, "second", extra=f", init_from: {REPO}", lr=1e-12, seed=7)
        second = train_tiny(frozen, tmp_path / "second")
        manifest = json.loads((tmp_path / "second" / "manifest.json").read_text())
        cache = tmp_path / "hf" / "hub" / "models--alice--minigpt-roundtrip" / "snapshots"
        assert manifest["init_from"].startswith(str(cache))
        start, end = final_weights(first), final_weights(second)
        for name in start:
            np.testing.assert_allclose(end[name], start[name], atol=1e-6, err_msg=name)
        scratch = final_weights(train_tiny(write_config(tmp_path, "scratch", lr=1e-12, seed=7), tmp_path / "scratch"))
        assert max(np.abs(scratch[n] - start[n]).max() for n in start) > 0.01

        # Fine-tuning from the published model starts where the first run ended, not from scratch: on the very
        # same first batch (same data_seed), its loss is far below a fresh model's (about ln 64 = 4.16).
        tuned = train_tiny(write_config(tmp_path, "tuned", extra=f", init_from: {REPO}", seed=7), tmp_path / "tuned")
        assert tuned["status"] == second["status"] == "completed"
        assert first_loss(tmp_path / "tuned") < first_loss(tmp_path / "scratch") - 0.2


def first_loss(run_dir: Path) -> float:
    return next(row["loss"] for row in log_rows(run_dir) if row.get("loss") is not None)


def minitrain_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minitrain.cli", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


def test_the_cli_publishes_and_samples_through_the_environment(tmp_path, monkeypatch):
    train_tiny(write_config(tmp_path, "first"), tmp_path / "first")
    with serving(monkeypatch, tmp_path / "hf", TOKEN, {TOKEN: "alice"}) as hub:
        done = minitrain_command("push", "--repo", REPO, str(tmp_path / "first"))
        assert done.returncode == 0, done.stderr
        assert f"Published: {hub.url}/{REPO}" in done.stdout
        assert sorted(hub.repos[REPO].files) == sorted(EXPORT_FILES)

        sampled = minitrain_command("sample", REPO, "--prompt", "comer|R1|")
        assert sampled.returncode == 0, sampled.stderr
        assert sampled.stdout.startswith("comer|R1|")
        local = minitrain_command("sample", str(tmp_path / "first"), "--prompt", "comer|R1|")
        assert sampled.stdout == local.stdout  # the downloaded model is the trained one

        monkeypatch.setenv("HF_TOKEN", "hf_notValid123")
        refused = minitrain_command("publish", "--repo", REPO, str(tmp_path / "first"))
        assert refused.returncode == 5  # a failed Hub request (3 is a diverged run)
        assert refused.stderr.startswith("error: publish to") and "HTTP 401" in refused.stderr
        assert "Traceback" not in refused.stderr and "hf_notValid123" not in refused.stdout + refused.stderr
