"""What a training run leaves behind, besides checkpoints: the manifest, the loss curve and results.json.

- `manifest.json` answers "what exactly ran, where?": seeds, library versions, the config, the git commit, the
  hash of the data manifest and the hardware. It is written before the first step (status "running") and
  completed when the run ends, however it ends (completed, early_stopped, diverged, interrupted), with the wall
  time and the peak resident memory.
- `loss_curve.png` plots the logged train and val perplexities against the step, with the n-gram baseline of
  experiments/14-ngram-baseline as a dashed horizontal line (lab 01's definition of done is val below it).
- `results.json` holds the headline numbers, including the comparison with that baseline.

Perplexity is exp(mean negative log-likelihood per counted token), so on a log-scaled axis a PPL curve has
exactly the shape of the loss curve; plotting PPL lets the baseline, which is a PPL, sit on the same axis.
"""

from __future__ import annotations

import math
import os
import platform
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

from minitrain import seam
from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.figures import save_figure, subplots
from minitrain.common.io import atomic_write_json, read_json_object
from minitrain.common.paths import PACKAGE, course_file
from minitrain.common.versions import library_versions
from minitrain.config import Config, resolved_dict
from minitrain.data.build import MANIFEST
from minitrain.data.build import data_manifest_hash as corpus_manifest_hash
from minitrain.evaluation.metrics import perplexity
from minitrain.monitor.report import read_log

DEFAULT_BASELINE_PATH = course_file("experiments/14-ngram-baseline/results.json")

# The libraries whose behaviour shapes a run's numbers (manifest.json "versions").
_LIBRARIES = ("numpy", "numba", "pydantic", "safetensors", "matplotlib", "pyyaml", "tqdm")


def models_dir(configured: str | os.PathLike | None, run_dir: str | os.PathLike) -> Path:
    """Where final model files go: `configured` (the config's output.models_dir, or `--models-dir`) if given,
    else $MINITRAIN_MODELS_DIR if set (tests, scratch runs), else the run folder's models/. Never the package's
    own folder: a run started anywhere writes only where it was told or into its run folder."""
    return Path(configured or os.environ.get("MINITRAIN_MODELS_DIR") or Path(run_dir) / "models")


# ----------------------------------------------------------------------------------------------------------------
# Facts about the machine and the code


def hardware_info() -> dict[str, Any]:
    """CPU model, logical core count and total RAM of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass  # not Linux: keep platform's answer
    try:
        ram_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        ram_gb = None
    return {
        "cpu_model": cpu,
        "cpu_cores": os.cpu_count(),
        "ram_gb": None if ram_gb is None else round(ram_gb, 1),
        "platform": platform.platform(),
    }


def git_sha(repo: Path = PACKAGE) -> str | None:
    """The commit the code ran from, with "-dirty" appended when tracked files differ from it; None outside git, and
    where git does not track the code (a site-packages in a virtual environment inside another project's checkout)."""
    try:
        subprocess.run(["git", "ls-files", "--error-unmatch", "."], cwd=repo, capture_output=True, check=True)
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo, capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return sha + ("-dirty" if dirty else "")


def data_manifest_hash(train_path: str | os.PathLike) -> str | None:
    """sha256 of the corpus manifest (data/processed/manifest.json) beside the training file; None without one."""
    folder = Path(train_path).parent
    return corpus_manifest_hash(folder) if (folder / MANIFEST).is_file() else None


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB.

    On Linux, /proc/self/status's VmHWM is exact; getrusage's ru_maxrss is not, because Linux carries it across
    exec, so a process started by a big parent (a test runner) would report the parent's peak."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 2**10, 1)  # the value is in kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux reports KiB, macOS bytes
    scale = 1 / 2**20 if sys.platform == "darwin" else 1 / 2**10
    return round(peak * scale, 1)


# ----------------------------------------------------------------------------------------------------------------
# manifest.json


def new_manifest(cfg: Config) -> dict:
    """The manifest of `cfg` as it is before training: everything needed to say what ran (the seeds, the resolved
    config), status "running".

    A run that trained with a student's lab files (MINITRAIN_LAB_DIR, minitrain/seam.py) says which, under
    "lab_files": {"lab_dir", "files", "sha256": {file: digest of its bytes}}.
    """
    lab_files = seam.replaced()
    recorded = {"lab_dir": str(seam.lab_dir()), "files": lab_files,
                "sha256": seam.file_digests(seam.lab_dir(), lab_files)} if lab_files else None
    return {
        "seed": cfg.training.rng_seed,
        "data_seed": cfg.training.data_seed,
        "versions": library_versions(_LIBRARIES),
        "config": resolved_dict(cfg),
        "git_sha": git_sha(),
        "data_manifest_hash": data_manifest_hash(cfg.data.train_path),
        "hardware": hardware_info(),
        **({"lab_files": recorded} if recorded else {}),
        "status": "running",
    }


def write_manifest(path: str | os.PathLike, manifest: dict[str, Any]) -> None:
    atomic_write_json(path, manifest)


def complete_manifest(path: str | os.PathLike, manifest: dict[str, Any], **outcome: Any) -> dict[str, Any]:
    """Record how the run ended (status, step, wall time, ...) plus the peak RSS, and rewrite the file."""
    manifest.update(outcome)
    manifest["peak_rss_mb"] = peak_rss_mb()
    write_manifest(path, manifest)
    return manifest


# ----------------------------------------------------------------------------------------------------------------
# The n-gram baseline and results.json


def load_baseline_ppl(
    path: str | os.PathLike = DEFAULT_BASELINE_PATH, *, data_manifest_hash: str | None, loss_on: str
) -> float | None:
    """The n-gram baseline's val PPL from its results.json, or None when there is nothing to compare with.

    Two perplexities compare only on the same tokens, so a baseline that records the corpus it scored
    (`data_manifest_hash`) or the positions it counted (`loss_on`) counts only for a run with the same: the
    lab's verb-corpus baseline says nothing about a run on other data (plain text, another corpus).
    None also when the baseline has not been run.
    """
    path = Path(path)
    if not os.path.lexists(path):
        return None
    baseline = read_json_object(path, "n-gram baseline results")
    val_ppl = baseline.get("val_ppl")
    if isinstance(val_ppl, bool) or not isinstance(val_ppl, int | float) or not math.isfinite(val_ppl):
        raise UserError(f"{path}: not an n-gram baseline results.json with a val_ppl (a number); found "
                        f"{val_ppl!r}", BAD_INPUT)
    val_ppl = float(val_ppl)
    run = {"data_manifest_hash": data_manifest_hash, "loss_on": loss_on}
    return None if any(key in baseline and baseline[key] != run[key] for key in run) else val_ppl


def build_results(outcome: dict[str, Any], *, train_loss: float, train_ppl: float, val_exact_match: float | None,
                  baseline_ppl: float | None = None, compares: bool = True, **after_train_loss: Any) -> dict[str, Any]:
    """results.json of a language model run from its train scores and the loop's `outcome` (wall_seconds and
    model_path are the caller's to fill in; `after_train_loss` are keys that follow train_loss).
    `ppl_improvement_pct` = 100·(baseline − val)/baseline: how much lower the model's PPL is. The course's
    comparison with the n-gram baseline (its val PPL, beats_baseline, ppl_improvement_pct; None when it scored other
    tokens) is left out where there is none to make (`compares` False: a fine-tune of a pretrained base)."""
    val_ppl = outcome["val_ppl"]
    beats = None if baseline_ppl is None else bool(val_ppl < baseline_ppl)
    improvement = None if baseline_ppl is None else round(100.0 * (baseline_ppl - val_ppl) / baseline_ppl, 2)
    comparison = {"ngram_baseline_val_ppl": baseline_ppl, "beats_baseline": beats, "ppl_improvement_pct": improvement}
    return {
        "train_ppl": train_ppl,
        "val_ppl": val_ppl,
        "best_val_step": outcome["best_val_step"],
        "best_val_ppl": outcome["best_val_ppl"],
        **(comparison if compares else {}),
        "val_exact_match": val_exact_match,
        "wall_seconds": None,
        "peak_rss_mb": peak_rss_mb(),
        "model_path": "",
        "status": outcome["status"],
        "steps": outcome["steps_done"],
        "train_loss": train_loss,
        **after_train_loss,
        "val_loss": outcome["val_loss"],
        "ms_per_step": outcome["ms_per_step"],
    }


def non_finite_scores(results: dict[str, Any]) -> str:
    """The losses and perplexities in `results` that are NaN or infinite, as "key value, ..." ("" when none): a
    model whose final scores these are diverged, whatever its training loop saw."""
    return ", ".join(f"{key} {value}" for key, value in results.items()
                     if key.endswith(("_loss", "_ppl")) and isinstance(value, float) and not math.isfinite(value))


# ----------------------------------------------------------------------------------------------------------------
# loss_curve.png


def baseline_line(ax: Any, baseline_ppl: float) -> None:
    """The n-gram baseline's val PPL as a dashed horizontal line, labelled with its value."""
    ax.axhline(baseline_ppl, color="tab:gray", linestyle="--", linewidth=1.5,
               label=f"n-gram baseline val ({baseline_ppl:.2f})")


def log_axis(ax: Any) -> None:
    """A log-scaled y axis labelled 2, 3, 5, 10 rather than 2×10⁰."""
    from matplotlib.ticker import FuncFormatter

    ax.set_yscale("log")
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)


def plot_loss_curve(
    png_path: str | os.PathLike, log_path: str | os.PathLike, baseline_ppl: float | None, model_name: str = "MiniGPT",
    val_label: str = "val (held-out verbs)",
) -> None:
    """Train and val perplexity against the step (log scale), with the n-gram baseline dashed; `val_label` names
    what the val split holds."""
    rows = read_log(log_path)
    train = [r for r in rows if "loss" in r]
    val = [r for r in rows if "val_loss" in r]
    fig, ax = subplots(figsize=(8, 4.8), dpi=100)
    if train:
        ax.plot([e["step"] for e in train], [perplexity(e["loss"]) for e in train],
                color="tab:blue", linewidth=1, alpha=0.8, label="train (one batch)")
    if val:
        ax.plot([e["step"] for e in val], [e["val_ppl"] for e in val],
                color="tab:orange", linewidth=2, marker="o", markersize=3, label=val_label)
    if baseline_ppl is not None:
        baseline_line(ax, baseline_ppl)
    log_axis(ax)
    ax.set_xlabel("step (optimizer updates)")
    ax.set_ylabel("perplexity per counted token (log scale)")
    ax.set_title(f"{model_name} training: perplexity vs. step")
    ax.grid(True, which="both", alpha=0.3)
    if train or val or baseline_ppl is not None:  # a log with no rows (a resume that kept none) has nothing to label
        ax.legend()
    fig.tight_layout()
    save_figure(fig, png_path)
