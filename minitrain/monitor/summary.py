"""`minitrain info RUN_DIR`: a short, readable summary of a run folder.

It reads what exists (manifest.json, config.resolved.yaml, train_log.jsonl, results.json, checkpoints/latest)
and skips what does not, so it also works on a run that is still going or was interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from minitrain.config.yaml_lines import load_yaml_file
from minitrain.errors import UserError
from minitrain.monitor.quality import quality_score
from minitrain.monitor.report import read_log

RUN_FILES = ("manifest.json", "config.resolved.yaml", "train_log.jsonl", "results.json")
# The model keys the config line shows (the family's shape; freeze when some parameters are frozen).
SHAPE_KEYS = ("type", "n_layer", "n_head", "d_model", "d_ff", "context", "d_embed", "hidden", "activation", "freeze")


def _json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not readable JSON ({exc})", 2) from None
    return data if isinstance(data, dict) else None


def _scalars(data: dict[str, Any]) -> list[str]:
    return [f"  {k}: {_fmt(v)}" for k, v in data.items() if not isinstance(v, dict | list)]


def _fmt(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def run_summary(run_dir: str | Path) -> str:
    """The summary text for `run_dir`; a UserError (exit code 2) if it is not a run folder."""
    run = Path(run_dir)
    if not run.is_dir() or not any((run / name).is_file() for name in RUN_FILES):
        raise UserError(f"{run}: not a run folder (none of {', '.join(RUN_FILES)} found)", 2)
    lines = [f"run: {run}"]
    manifest = _json(run / "manifest.json")
    if manifest:
        lines += ["manifest:", *_scalars(manifest)]
    resolved = run / "config.resolved.yaml"
    if resolved.is_file():
        cfg = load_yaml_file(resolved, "resolved config")
        cfg = cfg if isinstance(cfg, dict) else {}
        model = cfg.get("model") if isinstance(cfg.get("model"), dict) else {}
        shape = ", ".join(f"{k} {model[k]}" for k in SHAPE_KEYS if k in model)
        lines += [f"config: {cfg.get('name')} — {shape}"]
    log = run / "train_log.jsonl"
    if log.is_file():
        rows = read_log(log)
        train = [r for r in rows if "loss" in r]
        val = [r for r in rows if "val_loss" in r]
        if train:
            last = train[-1]
            lines.append(f"log: {len(rows)} rows, last step {last['step']}, loss {_fmt(last['loss'])}")
        if val:
            best = min(val, key=lambda r: r["val_loss"])
            lines.append(f"val: last {_fmt(val[-1]['val_loss'])} at step {val[-1]['step']}, "
                         f"best {_fmt(best['val_loss'])} at step {best['step']}")
        if train:
            quality = quality_score(rows)
            lines.append(f"quality: {quality.score:.1f} / 100, grade {quality.grade}")
    results = _json(run / "results.json")
    if results:
        lines += ["results:", *_scalars(results)]
    latest = run / "checkpoints" / "latest"
    if latest.is_file():
        lines.append(f"latest checkpoint: {latest.read_text(encoding='utf-8', errors='replace').strip()}")
    return "\n".join(lines)
