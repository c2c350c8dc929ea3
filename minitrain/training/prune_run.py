"""One-shot pruning of a trained model, end to end: what `minitrain prune` runs.

`prune_run(SOURCE, OUT, method, sparsity, ...)` reads a run folder or model file, zeros the chosen share of each
linear layer's weights (minitrain/pruning/), writes an ordinary model file (the zeros are stored as zeros, so
`minitrain sample`, `eval` and `quantize` read it like any other) and scores the dense and the pruned model on the
run's val split (perplexity, exact match), as `minitrain quantize` does (minitrain/training/ptq.py).

Wanda's calibration inputs are `calibration_samples` records of the run's training split (or of a `calibration`
file of the same kind), drawn without replacement with seed 0, so the same command writes the same bytes.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from minitrain.common.errors import UserError
from minitrain.common.paths import recorded_path
from minitrain.config.datacheck import load_split
from minitrain.pruning.masks import layer_sparsity, prunable_paths
from minitrain.pruning.scores import METHODS, Pruning, prune_model
from minitrain.runs.model_files import save_model_file
from minitrain.training.artifacts import non_finite_scores
from minitrain.training.lottery import lottery_rounds
from minitrain.training.ptq import calibration_batches, whole_model
from minitrain.training.scoring import score_records


def prune_run(
    source: str | Path,
    out: str | Path,
    method: str,
    sparsity: float,
    structure: str = "unstructured",
    exclude: list[str] | tuple[str, ...] = (),
    calibration_samples: int = 128,
    calibration: str | Path | None = None,
    vocab_path: str | Path | None = None,
    rounds: int = 1,
    rewind_step: int | None = None,
) -> dict[str, Any]:
    """Prune the model of a run folder or model file into the file `out` and score both on the run's val split;
    returns the row `minitrain prune` prints (val PPL and exact match of each, every layer's zeros). A method that
    retrains (the lottery ticket) runs its `rounds` of training from the run's checkpoint at `rewind_step`
    (minitrain/training/lottery.py) in the folder `out` names with the suffix ".rounds" for its own."""
    info, model, data, tokenizer = whole_model(source, "prune", vocab_path)
    paths, unmatched = prunable_paths(model, exclude)
    if unmatched:
        raise UserError(f"prune: --exclude {', '.join(unmatched)} names no linear layer", 2)
    batches = []
    if METHODS[method].calibrated:
        split = data if calibration is None else data.model_copy(update={"train_path": str(calibration)})
        batches = calibration_batches(load_split(split, "train"), tokenizer, model.config["max_seq_len"],
                                      data.loss_on, calibration_samples, seed=0)
    val = load_split(data, "val")
    before = score_records(model, tokenizer, val, data.loss_on)
    lottery = {}
    if METHODS[method].retrains:
        lottery = lottery_rounds(info, model, source, paths, sparsity, rounds, rewind_step,
                                 Path(out).with_suffix(".rounds"), list(exclude))
        masks = lottery.pop("masks")
    else:
        try:
            masks = prune_model(model, method, sparsity, paths, structure, batches)
        except ValueError as e:
            raise UserError(f"prune: {e}", 2) from None
    after = score_records(model, tokenizer, val, data.loss_on)
    pruning = Pruning(method, sparsity, structure, paths, masks, sum(len(b.input) for b in batches), list(exclude))
    row = {"method": method, "sparsity": sparsity, "structure": structure,
           "dense_val_ppl": before["ppl"], "val_ppl": after["ppl"],
           "dense_val_exact_match": before.get("exact_match"), "val_exact_match": after.get("exact_match"),
           "layers": layer_sparsity(model, paths), **lottery}
    overflowing = non_finite_scores(row)
    if overflowing:
        raise UserError(f"prune {source}: {overflowing} on the val split; a model whose perplexity is not a "
                        "number is not written", 2)
    save_model_file(out, model.state_dict(), model.config,
                    {"source": recorded_path(info.model_path), "pruning": {**pruning.metadata(), **lottery},
                     "evaluation": copy.deepcopy(row)})
    return row
