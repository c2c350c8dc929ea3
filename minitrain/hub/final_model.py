"""The publish spec's output folder (§4.1): a run trained into `./output` (a spec-shaped manifest's default, or
`training.output_dir: ./output`) also holds the two files the spec's flow names, written once the run finished:

    output/model.safetensors   the run's final model file (results.json's model_path), hard-linked, or copied when
                               it lives on another disk: the whole model, or a LoRA run's adapters alone
    output/final_model.json    what that file is, read from the run's records (results.json, config.resolved.yaml):
                               its sha256, what it holds, the model type, the base (its Hub id, else `shown_path`), the
                               method, the LoRA settings, the PEFT folder, the run's status, steps and losses

Each is written under a temporary name and renamed, so neither is ever half written. `minitrain publish` without
RUN_DIR publishes this folder (commands/publish.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from minitrain.common.io import atomic_write, atomic_write_json
from minitrain.common.paths import shown_path
from minitrain.hub.run_folder import locate
from minitrain.runs.run_files import RESOLVED_CONFIG, RESULTS, read_results, read_run_config

SPEC_RUN_DIR, MODEL_FILE, FINAL_MODEL = Path("output"), "model.safetensors", "final_model.json"
RESULT_KEYS = ("run_id", "status", "steps", "train_loss", "val_loss", "val_ppl")


def is_spec_run_dir(run_dir: str | Path) -> bool:
    return Path(run_dir).resolve() == SPEC_RUN_DIR.resolve()


def write_final_model(run_dir: str | Path) -> list[Path]:
    """Write RUN/model.safetensors and RUN/final_model.json for a finished run (module docstring); return them."""
    run_dir = Path(run_dir)
    results = read_results(run_dir / RESULTS)
    config = read_run_config(run_dir / RESOLVED_CONFIG)
    model, lora = config.get("model") or {}, config.get("lora") or {}
    adapted = bool(lora.get("enabled"))
    source, target = locate(results.get("model_path"), run_dir), run_dir / MODEL_FILE
    if source is not None and not (target.exists() and os.path.samefile(source, target)):
        _link_or_copy(source, target)
    base = model.get("init_from")
    facts = {
        "model_file": MODEL_FILE, "sha256": results.get("model_sha256"),
        "holds": "the LoRA adapters alone (the base stays frozen)" if adapted else "the whole model",
        "model_type": model.get("type", "minigpt"), "base": shown_path(base) if base else None,
        "method": ("qlora" if lora.get("quantize_base") else "lora") if adapted else "full" if base else "scratch",
        "lora": {k: lora.get(k) for k in ("rank", "alpha", "target_modules")} if adapted else None,
        "adapter_dir": "adapter" if (run_dir / "adapter" / "adapter_config.json").is_file() else None,
        **{key: results.get(key) for key in RESULT_KEYS},
    }
    atomic_write_json(run_dir / FINAL_MODEL, facts)
    return [target, run_dir / FINAL_MODEL]


def _link_or_copy(source: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.link.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
        os.replace(tmp, target)
    except OSError:  # another disk (MINITRAIN_MODELS_DIR), or links not allowed: a copy, written whole
        tmp.unlink(missing_ok=True)
        with open(source, "rb") as f:
            atomic_write(target, lambda out: shutil.copyfileobj(f, out))
