"""`minitrain merge-adapters RUN_DIR OUT_DIR`: fold a LoRA run's adapters into its base, as a run folder of a plain
model.

    OUT_DIR/model.safetensors    the merged model (W + (alpha/rank)·A·B in every adapted layer; a QLoRA base
                                 dequantized): a minitrain model file without adapters
    OUT_DIR/results.json         the LoRA run's results.json and manifest.json, model_path naming
    OUT_DIR/manifest.json        model.safetensors, plus `merge` {source, base, max_abs_logit_difference, positions}
    OUT_DIR/config.resolved.yaml, config.yaml    the LoRA run's, as they were

So OUT_DIR exports, publishes, samples and starts new runs (`model.init_from`) like any run folder. Before it is
written, the merged model and the adapted one run on the run's val records; the largest difference between
their logits is recorded (float32 rounding of W + ΔW against base(x) + update(x): about 1e-6).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_json
from minitrain.common.paths import recorded_path
from minitrain.config.datacheck import load_split
from minitrain.data.batcher import encode_split
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.run_folder import RunInfo, read_run
from minitrain.hub.sources import adapted_model
from minitrain.lora import merge_adapters
from minitrain.nn import Module, inference
from minitrain.runs.model_files import save_model_file

MERGED_FILE = "model.safetensors"
COPIED = ("config.resolved.yaml", "config.yaml")


def merged_model(info: RunInfo, base: str | None = None) -> tuple[Module, dict[str, Any]]:
    """(the merged model of a LoRA run, {base, max_abs_logit_difference, positions} measured on its val split)."""
    if info.adapter is None:
        raise UserError(f"{info.model_path}: not a LoRA run or adapter (its model has no adapters to merge)", 2)
    model = adapted_model(info.state, info.model_config, str(info.model_path), base, info.run_dir)
    idx, mask = _probe_batch(info, model.config)
    with inference(model):
        adapted = model(idx, attn_pad_mask=mask)[0].data
    merge_adapters(model)
    with inference(model):
        merged = model(idx, attn_pad_mask=mask)[0].data
    difference = float(np.abs(merged[mask] - adapted[mask]).max())
    return model, {"base": base or info.adapter.base, "max_abs_logit_difference": difference,
                   "positions": int(mask.sum())}


def merge_run(source: str | Path, out_dir: str | Path, base: str | None = None) -> dict[str, Any]:
    """Write OUT_DIR (module docstring) for a LoRA run folder or adapter file; returns results.json's `merge`."""
    info = read_run(source)
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out}: exists and is not an empty folder; merge writes a new run folder", 2)
    model, facts = merged_model(info, base)
    facts = {"source": recorded_path(info.model_path), **facts}
    digest = save_model_file(out / MERGED_FILE, model.state_dict(), model.config, {"merged_from": facts})
    for name in COPIED:
        if info.run_dir is not None and (info.run_dir / name).is_file():
            shutil.copyfile(info.run_dir / name, out / name)
    # The same run's facts, now naming the merged file (export checks that results.json names this very file).
    named = {"model_path": MERGED_FILE, "model_sha256": digest, "merge": facts}
    if info.manifest:
        atomic_write_json(out / "manifest.json", {**info.manifest, **named})
    atomic_write_json(out / "results.json", {**info.results, **named})
    return facts


def _probe_batch(info: RunInfo, model_config: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The run's val records encoded (ids, real-token mask); random ids when the run's data cannot be found."""
    data = info.data_config()
    if Path(data.val_path).is_file() and Path(data.vocab_path).is_file():
        batch = encode_split(load_split(data, "val"), CharTokenizer.load(data.vocab_path), model_config["max_seq_len"],
                             "all")
        return batch.input, batch.attn_pad_mask
    ids = np.random.default_rng(0).integers(0, model_config["vocab_size"], (16, model_config["max_seq_len"]))
    return ids, np.ones(ids.shape, dtype=bool)
