"""The pruning experiment (README.md): every number of results.json, from lab 01's committed model and corpus.

    python experiments/25-pruning/run.py               everything, into runs/25-pruning/, then results.json here
    python experiments/25-pruning/run.py --quick DIR   3-step fine-tunes, sparsity 0.5, no plots, no lottery, into
                                                       DIR (tests)

1. one-shot   lab 01's model pruned by `minitrain prune`'s code (minitrain/training/prune_run.py) at 30 / 50 / 70 %,
              magnitude (|W|, per layer), Wanda (|W|·‖X‖, per output, 128 training records) and SparseGPT (OBS
              updates with the same records' XᵀX), and 2:4 with each; val PPL and exact match of each (val: the
              held-out verbs), every layer's zeros checked
2. recovery   each unstructured file fine-tuned 300 steps with its mask held (recovery.yaml), each in its own
              process; the mask after the fine-tune checked against the file's, weight for weight
3. controls   the same 300 steps from the dense model, nothing pruned (what the extra training alone does), and
              from the dense model with the sparsity rising on Zhu & Gupta's cubic schedule over steps 0..200
4. ablation   which half of Wanda does the work: magnitude compared per output, and |W|·‖X‖ compared over the
              whole layer; Wanda with two other draws of its 128 calibration records (seeds 1, 2); and how
              uneven the inputs are (max / median of ‖X_i‖ per layer: the outlier features the Wanda paper finds
              in LLMs)
5. lottery    lab 01's run trained again with a checkpoint every 100 steps (its weights checked against the
              committed model's), then `minitrain prune --method lottery` at 30 / 50 / 70 %: 3 rounds each of
              magnitude pruning, rewinding to step 100 (the end of the warm-up) and retraining the 1,900 steps after it;
              and its dense control: rewound to step 100 and retrained once with nothing pruned

Run from the repository root; about 10 minutes of one core.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from minitrain.config.datacheck import load_split
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.run_folder import read_run
from minitrain.models.registry import build_model
from minitrain.pruning.masks import apply_masks, keep_mask, prunable_paths
from minitrain.pruning.scores import input_norms, magnitude_scores, wanda_scores
from minitrain.runs.model_files import load_model_file
from minitrain.training.prune_run import prune_run
from minitrain.training.ptq import calibration_batches
from minitrain.training.scoring import score_records

HERE = Path(__file__).resolve().parent
LAB01_MODEL = "models/minigpt-phase18-64ab16764a406b88.safetensors"
SPARSITIES = (0.3, 0.5, 0.7)
METHODS = ("magnitude", "wanda", "sparsegpt")
LAB01_CONFIG = "experiments/18-train-mini/config.yaml"
LOTTERY_ROUNDS, REWIND_STEP = 3, 100


def linear_zeros(path: Path) -> dict[str, np.ndarray]:
    """{name: W == 0} of every linear weight (2-D, not an embedding) of a model file."""
    state, _, _ = load_model_file(path)
    return {name: state[name] == 0 for name in sorted(state)
            if state[name].ndim == 2 and not name.startswith(("transformer.wte", "transformer.wpe"))}


def largest_difference(a: Path, b: Path) -> float:
    """max |a − b| over every weight of two model files of one architecture."""
    first, second = load_model_file(a)[0], load_model_file(b)[0]
    return max(float(np.abs(first[name] - second[name]).max()) for name in second)


def one_shot(root: Path) -> dict:
    """Step 1: {name: the row prune_run returns, with `exact` (each layer's zeros what was asked)}."""
    rows = {}
    for method in METHODS:
        for structure, sparsities in (("unstructured", SPARSITIES), ("2:4", (0.5,))):
            for sparsity in sparsities:
                name = f"{method}-{structure.replace(':', 'of')}-{round(100 * sparsity)}"
                row = prune_run(LAB01_MODEL, root / f"{name}.safetensors", method, sparsity, structure)
                layers = row["layers"].values()
                row["exact"] = all(layer["zeros"] == round(sparsity * layer["size"]) for layer in layers)
                rows[name] = row
    return rows


def fine_tune(out: Path, init_from: str, quick: bool, extra: tuple[str, ...]) -> dict:
    """`minitrain train recovery.yaml` from `init_from`, in its own process; results.json."""
    sets = [f"model.init_from={init_from}", *extra]
    if quick:
        sets += ["scheduler.total_steps=3", "scheduler.warmup_steps=1", "training.val_every=2",
                 "output.plots=false"]
    args = [sys.executable, "-m", "minitrain.cli", "train", str(HERE / "recovery.yaml"), "--out-dir", str(out),
            "--models-dir", str(out / "models"), "--quiet", "--overwrite", *(a for s in sets for a in ("--set", s))]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "results.json").read_text())


def recovery(root: Path, quick: bool) -> dict:
    """Steps 2 and 3: {name: val PPL and exact match after the fine-tune (and `mask_held` for the pruned)}."""
    rows = {}
    sparsities = (0.5,) if quick else SPARSITIES  # the tests: every kind of fine-tune once, 4 runs instead of 13
    for method in METHODS[:2] if quick else METHODS:
        for sparsity in sparsities:
            name = f"{method}-unstructured-{round(100 * sparsity)}"
            pruned = root / f"{name}.safetensors"
            results = fine_tune(root / f"recover-{name}", str(pruned), quick, (f"pruning.sparsity={sparsity}",))
            before, after = linear_zeros(pruned), linear_zeros(Path(results["model_path"]))
            rows[name] = {"val_ppl": results["val_ppl"], "val_exact_match": results["val_exact_match"],
                          "mask_held": all(np.array_equal(before[k], after[k]) for k in before)}
    dense = fine_tune(root / "dense-control", LAB01_MODEL, quick, ("pruning.enabled=false",))
    rows["dense-control"] = {"val_ppl": dense["val_ppl"], "val_exact_match": dense["val_exact_match"]}
    for sparsity in sparsities:
        name = f"gradual-{round(100 * sparsity)}"
        schedule = ("pruning.end_step=2", "pruning.every=1") if quick else ("pruning.end_step=200",)
        results = fine_tune(root / name, LAB01_MODEL, quick, (f"pruning.sparsity={sparsity}", *schedule))
        zeros = linear_zeros(Path(results["model_path"]))
        rows[name] = {"val_ppl": results["val_ppl"], "val_exact_match": results["val_exact_match"],
                      "exact": all(int(z.sum()) == round(sparsity * z.size) for z in zeros.values())}
    return rows


def lottery(root: Path) -> dict:
    """Step 5: {name: the row prune_run returns (each round's val, the rewind point), and `exact`}, and
    `source_is_lab01`: the retrained source run's linear weights are the committed model's, bit for bit."""
    source = root / "lab01-source"
    if not (source / "results.json").is_file():
        sets = (f"training.checkpoint.save_every={REWIND_STEP}", "training.checkpoint.keep_last=null",
                "output.plots=false")
        args = [sys.executable, "-m", "minitrain.cli", "train", LAB01_CONFIG, "--out-dir", str(source), "--models-dir",
                str(source / "models"), "--quiet", "--overwrite", *(a for s in sets for a in ("--set", s))]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    results = json.loads((source / "results.json").read_text())
    rows = {"source": {"val_ppl": results["val_ppl"], "val_exact_match": results["val_exact_match"],
                       "largest_weight_difference": largest_difference(Path(results["model_path"]),
                                                                       Path(LAB01_MODEL))}}
    for sparsity in (0.0, *SPARSITIES):  # 0: the dense control, rewound to step 100 and retrained once
        name = f"lottery-{round(100 * sparsity)}"
        row = prune_run(source, root / f"{name}.safetensors", "lottery", sparsity,
                        rounds=LOTTERY_ROUNDS if sparsity else 1, rewind_step=REWIND_STEP)
        row["exact"] = all(layer["zeros"] == round(sparsity * layer["size"]) for layer in row["layers"].values())
        rows[name] = row
    return rows


def ablation() -> dict:
    """Step 4: val PPL and exact match of the two crossed variants at each sparsity, and the inputs' spread. The
    calibration records are prune_run's (128 of train, seed 0)."""
    info = read_run(LAB01_MODEL)
    data = info.data_config()
    tokenizer = CharTokenizer.load(data.vocab_path)
    dense = build_model(info.model_config)
    dense.load_state_dict(info.state)
    paths = prunable_paths(dense)[0]
    batches = calibration_batches(load_split(data, "train"), tokenizer, dense.config["max_seq_len"], data.loss_on,
                                  128, seed=0)
    norms = input_norms(dense, batches, paths)
    val = load_split(data, "val")
    rows = {"input_norm_max_over_median": {p: float(n.max() / np.median(n)) for p, n in norms.items()}}
    variants = {"magnitude-per-output": (lambda w, p: magnitude_scores(w), "output"),
                "wanda-per-layer": (lambda w, p: wanda_scores(w, norms[p]), "layer")}
    for seed in (1, 2):
        drawn = calibration_batches(load_split(data, "train"), tokenizer, dense.config["max_seq_len"], data.loss_on,
                                    128, seed=seed)
        other = input_norms(dense, drawn, paths)
        variants[f"wanda-calibration-seed-{seed}"] = (lambda w, p, n=other: wanda_scores(w, n[p]), "output")
    for name, (score, group) in variants.items():
        for sparsity in SPARSITIES:
            model = build_model(info.model_config)
            model.load_state_dict(info.state)
            apply_masks(model, {p: keep_mask(score(model.get_submodule(p).weight.data, p), sparsity, group=group)
                                for p in paths})
            scores = score_records(model, tokenizer, val, data.loss_on)
            rows[f"{name}-{round(100 * sparsity)}"] = {"val_ppl": scores["ppl"],
                                                       "val_exact_match": scores["exact_match"]}
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", metavar="DIR", help="3-step fine-tunes into DIR (the pipeline's test)")
    args = parser.parse_args()
    root = Path(args.quick or "runs/25-pruning")
    root.mkdir(parents=True, exist_ok=True)
    started = time.time()
    results = {"one_shot": one_shot(root)}
    results["recovery"] = recovery(root, args.quick is not None)
    results["ablation"] = ablation()
    if not args.quick:
        results["lottery"] = lottery(root)
    results["wall_seconds"] = round(time.time() - started, 1)
    target = root / "results.json" if args.quick else HERE / "results.json"
    target.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps({name: {k: v for k, v in row.items() if k != "layers"}
                      for part in ("one_shot", "recovery", "ablation", "lottery") if part in results
                      for name, row in results[part].items()},
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
