"""Reading what a training run left behind: the model file and the facts the model card reports.

`read_run` accepts either a run folder or a model/checkpoint file:

    runs/lab01/                             results.json names the final model ("model_path");
                                            manifest.json, config.resolved.yaml give seeds, hardware, data paths
    runs/lab01/checkpoints/step-400.safetensors    a checkpoint; its run folder is two levels up
    models/minigpt-phase18-<hash>.safetensors     a bare model file: no run facts, the card says so

A LoRA run's model file holds only its adapters and names the base they adapt (`RunInfo.adapter`); the base
itself is loaded by minitrain/hub/sources.py, which can merge the two.

Relative paths recorded by a run (the model path, the data paths) are tried against the current directory, the
run folder and the repository root, in that order, so a run folder can be read from anywhere.

Every file is read through minitrain/runs/run_files.py (any damage is one error naming the file), and the files must
belong together (`check_same_run`): a folder whose results, manifest and model come from different runs is
refused rather than exported with a model card that mixes them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.common.io import regular_file_problem, sha256_of
from minitrain.config.data_section import DataConfig
from minitrain.formats.gpt2 import check_state_dict
from minitrain.lora import LoraSettings, adapter_names_in, settings_of
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.model_files import load_model_file
from minitrain.runs.run_dir import locate
from minitrain.runs.run_files import (
    FINISHED,
    MANIFEST,
    RESOLVED_CONFIG,
    RESULTS,
    read_manifest,
    read_results,
    read_run_config,
)
from minitrain.runs.run_lock import writer_of


@dataclass
class RunInfo:
    model_path: Path
    state: dict[str, np.ndarray]
    model_config: dict[str, Any]
    run_dir: Path | None = None
    results: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)  # the resolved training config, as plain data
    metadata: dict[str, Any] = field(default_factory=dict)  # the model file's metadata

    @property
    def pipeline(self) -> dict[str, Any]:
        """A table model's pipeline (task, target, classes, preprocessing), saved in its model file; {} otherwise."""
        value = self.metadata.get("pipeline")
        return value if isinstance(value, dict) else {}
    adapter: LoraSettings | None = None  # a LoRA run: `state` holds the adapters, `adapter` how to apply them

    @property
    def num_parameters(self) -> int:
        """Every number of the weights (MiniGPT's output layer is tied to wte, so it adds none)."""
        return int(sum(a.size for a in self.state.values()))

    def find(self, recorded: str | None) -> Path | None:
        """A path the run recorded, located on this machine (None when it is nowhere)."""
        return locate(recorded, self.run_dir)

    def section(self, name: str) -> dict[str, Any]:
        value = self.config.get(name)
        return value if isinstance(value, dict) else {}

    def data_config(self) -> DataConfig:
        """The run's data section, each path located on this machine (`find`); the defaults when none is recorded."""
        section = dict(self.section("data"))
        for key, value in section.items():
            if key.endswith("_path") and isinstance(value, str) and (found := self.find(value)) is not None:
                section[key] = str(found)
        try:
            return DataConfig(**section)
        except ValueError as e:
            raise UserError(f"{self.model_path}: the run's data section does not read as a config ({e})") from None


def run_of(path: Path) -> Path | None:
    """The run folder a model or checkpoint file sits in (RUN/checkpoints/ or RUN/models/, beside its
    manifest.json), or None."""
    parent = path.parent
    return parent.parent if parent.name in ("checkpoints", "models") and (parent.parent / MANIFEST).is_file() else None


def run_vocab(path: Path) -> Path | None:
    """The character vocabulary of the run a model or checkpoint file sits in, when the run names one that exists:
    `sample RUN/checkpoints/best.safetensors` needs no --vocab."""
    run_dir = run_of(path)
    if run_dir is None:
        return None
    data = _run_config(run_dir, read_manifest(run_dir / MANIFEST)).get("data") or {}
    return locate(data.get("vocab_path"), run_dir) if isinstance(data, dict) else None


def _run_config(run_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    resolved = run_dir / RESOLVED_CONFIG
    if os.path.lexists(resolved):
        return read_run_config(resolved)
    return manifest.get("config") or {}


def _model_file_of(run_dir: Path, results: dict[str, Any]) -> Path:
    """The final model named by results.json, or else the newest checkpoint."""
    found = locate(results.get("model_path"), run_dir)
    if found is not None and found.is_file():
        return found
    checkpoint = CheckpointManager(run_dir).latest()
    if checkpoint is not None:
        return checkpoint
    raise UserError(f"{run_dir}: no model file found (results.json has no existing model_path and there is no "
                    "checkpoint); has this run finished?", 2)


def check_same_run(run_dir: Path, results: dict[str, Any], manifest: dict[str, Any], model_path: Path,
                   model_meta: dict[str, Any]) -> None:
    """results.json, manifest.json and the model file must describe one and the same run, or a model card
    would report one run's facts beside another run's weights. Checked where the files record it: the run id
    (manifest and results), the model file's sha256 (results), its training config hash and seed (manifest)."""
    problems = []
    if results and manifest and results.get("run_id") != manifest.get("run_id"):
        problems.append(f"results.json is from run {results.get('run_id')}, manifest.json from run "
                        f"{manifest.get('run_id')}")
    if results and manifest.get("status") not in (None, *FINISHED):
        problems.append(f"results.json exists but manifest.json says the run is {manifest['status']!r}")
    named = results.get("model_sha256") and model_path == locate(results.get("model_path"), run_dir)
    if named and sha256_of(model_path) != results["model_sha256"]:
        problems.append(f"the model file {model_path} is not the one results.json names (sha256 differs)")
    for key, meta_key in (("config_hash", "config_hash"), ("seed", "rng_seed")):
        if key in manifest and meta_key in model_meta and manifest[key] != model_meta[meta_key]:
            problems.append(f"the model file {model_path} has {meta_key} {model_meta[meta_key]!r}, manifest.json "
                            f"{key} {manifest[key]!r}")
    if problems:
        raise UserError(f"{run_dir}: its files are not from one run: {'; '.join(problems)}; train it again, or "
                        "export the model file itself", 2)


def read_run(source: str | Path) -> RunInfo:
    """Load the model and the run's facts from a run folder or a model/checkpoint file."""
    source = Path(source)
    if source.is_dir():
        run_dir: Path | None = source
        if (writer := writer_of(source)) is not None:
            raise UserError(f"{source}: a run is being written there now ({writer}); wait for it to finish", 2)
    elif source.is_file():
        run_dir = run_of(source)
    else:
        problem = regular_file_problem(source)
        raise UserError(f"{source}: no such run folder or model file" if problem == "not found" else
                        f"{source}: {problem}", 2)

    results: dict[str, Any] = {}
    manifest: dict[str, Any] = {}
    config: dict[str, Any] = {}
    if run_dir is not None:
        results = read_results(run_dir / RESULTS) if os.path.lexists(run_dir / RESULTS) else {}
        manifest = read_manifest(run_dir / MANIFEST) if os.path.lexists(run_dir / MANIFEST) else {}
        config = _run_config(run_dir, manifest)
    model_path = _model_file_of(source, results) if source.is_dir() else source

    state, model_config, metadata = load_model_file(model_path)
    adapter = settings_of(model_config)
    if adapter is None:
        check_state_dict(state, model_config, str(model_path))
    else:  # a LoRA run's model file holds the adapters; its checkpoints hold the base too, which is left out
        state = {name: state[name] for name in adapter_names_in(state, adapter)}
    if run_dir is not None:
        check_same_run(run_dir, results, manifest, model_path, metadata)
    return RunInfo(model_path=model_path, state=state, model_config=dict(model_config), run_dir=run_dir,
                   results=results, manifest=manifest, config=config, metadata=metadata, adapter=adapter)
