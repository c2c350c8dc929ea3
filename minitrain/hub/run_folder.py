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
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.artifacts import REPO_ROOT
from minitrain.checkpoint import CheckpointManager, load_model_file
from minitrain.config.schema import DataConfig
from minitrain.config.yaml_lines import load_yaml_file
from minitrain.errors import UserError
from minitrain.hub.gpt2 import check_state_dict
from minitrain.lora import LoraSettings, adapter_names_in, settings_of


@dataclass
class RunInfo:
    model_path: Path
    state: dict[str, np.ndarray]
    model_config: dict[str, Any]
    run_dir: Path | None = None
    results: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)  # the resolved training config, as plain data
    adapter: LoraSettings | None = None  # a LoRA run: `state` holds the adapters, `adapter` how to apply them

    @property
    def num_parameters(self) -> int:
        """Trainable numbers; the output layer is tied to wte, so it adds none."""
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


def locate(recorded: str | None, run_dir: Path | None) -> Path | None:
    """Find a recorded path: as given if absolute, else under the cwd, the run folder or the repository root."""
    if not recorded:
        return None
    path = Path(recorded)
    bases = [Path.cwd(), *([run_dir] if run_dir else []), REPO_ROOT]
    candidates = [path] if path.is_absolute() else [base / path for base in bases]
    return next((c for c in candidates if c.exists()), None)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: cannot read it as JSON ({e})") from None


def _run_config(run_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    resolved = run_dir / "config.resolved.yaml"
    if resolved.is_file():
        loaded = load_yaml_file(resolved, "resolved config")
        return loaded if isinstance(loaded, dict) else {}
    config = manifest.get("config")
    return config if isinstance(config, dict) else {}


def _model_file_of(run_dir: Path, results: dict[str, Any]) -> Path:
    """The final model named by results.json, or else the newest checkpoint."""
    found = locate(results.get("model_path"), run_dir)
    if found is not None and found.is_file():
        return found
    checkpoint = CheckpointManager(run_dir).latest()
    if checkpoint is not None:
        return checkpoint
    raise UserError(
        f"{run_dir}: no model file found (results.json has no existing model_path and there is no "
        "checkpoint); has this run finished?"
    )


def read_run(source: str | Path) -> RunInfo:
    """Load the model and the run's facts from a run folder or a model/checkpoint file."""
    source = Path(source)
    if source.is_dir():
        run_dir: Path | None = source
    elif source.is_file():
        parent = source.parent
        is_checkpoint = parent.name == "checkpoints" and (parent.parent / "manifest.json").is_file()
        run_dir = parent.parent if is_checkpoint else None
    else:
        raise UserError(f"{source}: no such run folder or model file")

    results = manifest = config = {}
    if run_dir is not None:
        results = _read_json(run_dir / "results.json") if (run_dir / "results.json").is_file() else {}
        manifest = _read_json(run_dir / "manifest.json") if (run_dir / "manifest.json").is_file() else {}
        config = _run_config(run_dir, manifest)
    model_path = _model_file_of(source, results) if source.is_dir() else source

    state, model_config, _ = load_model_file(model_path)
    adapter = settings_of(model_config)
    if adapter is None:
        check_state_dict(state, model_config, str(model_path))
    else:  # a LoRA run's model file holds the adapters; its checkpoints hold the base too, which is left out
        state = {name: state[name] for name in adapter_names_in(state, adapter)}
    return RunInfo(model_path=model_path, state=state, model_config=dict(model_config), run_dir=run_dir,
                   results=results, manifest=manifest, config=config, adapter=adapter)
