"""The lottery ticket: iterative magnitude pruning with weight rewinding (Frankle & Carbin 2019, "The Lottery Ticket
Hypothesis"; rewinding to an early step k instead of the initialization: Frankle et al. 2020, "Linear Mode
Connectivity and the Lottery Ticket Hypothesis"), what `minitrain prune --method lottery --rounds R` runs.

From a finished run (its config, its final weights and its checkpoint at step k), for rounds r = 1..R:

    prune    each layer to s_r = 1 − (1 − s)^(r/R) of its weights by |W| of the weights the last round ended with,
             what was pruned staying pruned: each round prunes p = 1 − (1 − s)^(1/R) of the weights still there
    rewind   the kept weights to their values at step k (the run's checkpoint), the pruned ones 0
    retrain  the run's own config from there, for the T − k steps after k (scheduler.total_steps T − k, warm-up
             max(0, warm-up − k): with k = the warm-up steps, the default, the learning rate of each step is the
             run's own from step k on), with the mask fixed: a `pruning:` section at s_r whose boundary 0 takes
             the rewound file's zeros as its mask (minitrain/pruning/gradual.py); each update then has no
             gradient for a pruned weight, and the weights are masked again after it.

Only the weights are rewound: each round starts a fresh optimizer state and the run's data order from the start.
Each retraining is an ordinary training run in `<OUT without its suffix>.rounds/round-<r>/` (beside its starting
file `round-<r>-start.safetensors`), checkpointed like any: the same command run again after an interruption
takes the finished rounds as they are (their results.json), resumes the interrupted one from its latest
checkpoint (bit-exact, minitrain/training/resume.py) and writes the same bytes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from minitrain.common.errors import UserError
from minitrain.common.paths import recorded_path
from minitrain.config.loader import config_from_dict
from minitrain.hub.run_folder import read_run
from minitrain.lora import state_digest
from minitrain.nn import Module
from minitrain.pruning.masks import keep_mask, layer_sparsity
from minitrain.pruning.scores import magnitude_scores
from minitrain.runs.checkpoint_manager import CheckpointManager
from minitrain.runs.model_files import load_model_file, save_model_file
from minitrain.training.run import run_training


def round_sparsities(sparsity: float, rounds: int) -> list[float]:
    """s_r = 1 − (1 − s)^(r/R), r = 1..R: the same share p of the weights left pruned each round, s at round R."""
    return [1 - (1 - sparsity) ** (r / rounds) for r in range(1, rounds + 1)]


def rewind_point(info: Any, source: str | Path, rewind_step: int | None) -> tuple[int, Path]:
    """(k, the checkpoint file at step k) of the run `info`: k defaults to its warm-up steps."""
    scheduler = info.section("scheduler")
    total = scheduler.get("total_steps")
    if info.run_dir is None or not isinstance(total, int):
        raise UserError(f"prune {source}: the lottery ticket retrains the run: give a run folder (or its model "
                        "file) of a run with scheduler.total_steps", 2)
    k = scheduler.get("warmup_steps", 0) if rewind_step is None else rewind_step
    checkpoints = CheckpointManager(info.run_dir)
    path = checkpoints.path_for(k)
    if not 0 <= k < total or not path.is_file():
        kept = ", ".join(str(step) for step, _ in checkpoints.step_files()) or "none"
        raise UserError(f"prune {source}: --rewind-step {k}: the run has no checkpoint at step {k} before its end "
                        f"{total} (its checkpoints: {kept}); train it with training.checkpoint.save_every dividing "
                        f"{k} and keep_last null", 2)
    return k, path


def round_config(info: Any, start: Path, sparsity: float, k: int, exclude: list[str]) -> Any:
    """The run's config, retraining from the file `start` for the steps after k with its mask fixed."""
    raw = copy.deepcopy(info.config)
    raw["data"] = info.data_config().model_dump(exclude_unset=True)  # the paths located on this machine
    raw["model"]["init_from"] = str(start)
    scheduler = raw["scheduler"]
    scheduler["warmup_steps"] = max(0, scheduler.get("warmup_steps", 0) - k)
    scheduler["total_steps"] -= k
    raw.get("training", {}).pop("total_steps", None)
    raw["pruning"] = {"enabled": True, "sparsity": sparsity, "start_step": 0, "end_step": 0, "exclude": exclude}
    return config_from_dict(raw)


def retrain(info: Any, folder: Path, start: Path, sparsity: float, k: int, exclude: list[str]) -> dict[str, Any]:
    """One round's training run in `folder`: taken as it is when finished, resumed when it has a checkpoint."""
    if (folder / "results.json").is_file():
        return json.loads((folder / "results.json").read_text(encoding="utf-8"))
    resume = folder if CheckpointManager(folder).latest() is not None else None
    return run_training(round_config(info, start, sparsity, k, exclude), folder, resume=resume,
                        overwrite=resume is None, progress=False, models_dir=folder / "models")


def lottery_rounds(info: Any, model: Module, source: str | Path, paths: list[str], sparsity: float, rounds: int,
                   rewind_step: int | None, rounds_dir: Path, exclude: list[str]) -> dict[str, Any]:
    """Run the rounds (module docstring) from `model`, the run's final weights, and leave the last round's in
    it; return what the pruned file records of them (the rewind point and each round's sparsity and val)."""
    k, checkpoint = rewind_point(info, source, rewind_step)
    rewound, _, _ = load_model_file(checkpoint)
    rounds_dir.mkdir(parents=True, exist_ok=True)
    masks: dict = {}
    done = []
    for r, target in enumerate(round_sparsities(sparsity, rounds), start=1):
        masks = {p: keep_mask(magnitude_scores(model.get_submodule(p).weight.data), target,
                              exclude_pruned=None if p not in masks else ~masks[p]) for p in paths}
        model.load_state_dict(rewound)
        for path, mask in masks.items():
            model.get_submodule(path).weight.data[~mask] = 0.0
        start = rounds_dir / f"round-{r}-start.safetensors"
        if (rounds_dir / f"round-{r}").exists() and not (
                start.is_file() and state_digest(load_model_file(start)[0]) == state_digest(model.state_dict())):
            raise UserError(f"prune: {rounds_dir / f'round-{r}'} holds a round of another lottery (another source, "
                            f"sparsity, rounds, rewind step or exclude): delete {rounds_dir}, or choose another OUT", 2)
        save_model_file(start, model.state_dict(), model.config,
                        {"source": recorded_path(checkpoint), "lottery_round": r, "sparsity": target})
        results = retrain(info, rounds_dir / f"round-{r}", start, target, k, exclude)
        model.load_state_dict(read_run(rounds_dir / f"round-{r}").state)
        zeros = layer_sparsity(model, paths)
        if any(zeros[p]["zeros"] != int((~m).sum()) or model.get_submodule(p).weight.data[~m].any()
               for p, m in masks.items()):
            raise UserError(f"prune: lottery round {r} did not hold its mask ({rounds_dir / f'round-{r}'})", 2)
        done.append({"round": r, "sparsity": target, "val_ppl": results["val_ppl"],
                     "val_exact_match": results.get("val_exact_match")})
    return {"rounds": done, "rewind_step": k, "rewind_checkpoint": recorded_path(checkpoint), "masks": masks}
