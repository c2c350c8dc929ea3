"""Experiment 24, knowledge distillation (README.md): every number of results.json, from the committed corpus.

    python experiments/24-distillation/run.py              everything, into runs/24-distillation/, then results.json
    python experiments/24-distillation/run.py --quick DIR  3-step runs without plots into DIR (the tests)

1. teacher  lab 01's model (the committed model file of experiment 18) scored on the held-out verbs, and how
            soft its targets are at T 1, 2, 4 (top-1 probability, mass on the 17 ids no text produces)
2. main     the half-size student (student.yaml) with and without distillation (distill.yaml: T 2, alpha 0.5),
            the same 2000 steps, seeds 42, 43 and 44 (the training RNG; the data order is data_seed 7 in all)
3. grid     seed 42 only, after the main runs: T in {1, 2, 4} x alpha in {0.1, 0.5, 0.9}, to show how the
            result moves with the two knobs (not used to choose the headline's setting, which was fixed first)
4. longer   seed 42, both configs at three times the steps (6000, the schedule stretched with them): is the
            result a matter of a student that has not converged?

5. strong   a stronger teacher: lab 01's config trained 6000 steps (seed 42), then the 2000-step student
            distilled from it at T 2 and T 1 (alpha 0.5), seeds 42, 43, 44: is the teacher the limit?
6. progressive  progressive.yaml: lab 01's model teaches an assistant (two blocks, d_ff 128), which teaches the
            student, each 2000 steps, at T 2 and T 1 (alpha 0.5), seeds 42, 43, 44: beside the direct rows of 2, 5

`--stages longer` runs only the stages named and replaces only their part of results.json.

Each run is `minitrain train` in its own process. Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from minitrain.config import load_config
from minitrain.config.datacheck import load_split
from minitrain.data.batch import trim_padding
from minitrain.data.batcher import encode_split
from minitrain.data.tokenizer import CharTokenizer
from minitrain.distillation import soft_targets
from minitrain.hub.sources import load_model
from minitrain.nn import inference
from minitrain.training.scoring import score_records

HERE = Path(__file__).resolve().parent
TEACHER = "models/minigpt-phase18-64ab16764a406b88.safetensors"
SEEDS = (42, 43, 44)
TEMPERATURES = (1.0, 2.0, 4.0)
ALPHAS = (0.1, 0.5, 0.9)
LONGER = 3
SOFTNESS_RECORDS = 2000  # the first training records: enough for the means to settle
STAGES = ("teacher", "main", "grid", "longer", "strong", "progressive")
LAB01_CONFIG = Path("experiments/18-train-mini/config.yaml")
KEPT = ("val_ppl", "val_loss", "val_exact_match", "dev_ppl", "dev_exact_match", "train_ppl", "best_val_ppl",
        "ms_per_step", "wall_seconds", "steps")


def train(config: Path, out: Path, seed: int, quick: bool, extra: tuple[str, ...] = ()) -> dict:
    """`minitrain train` in its own process; the results.json keys the tables read, and the parameter count."""
    sets = ["scheduler.total_steps=3", "scheduler.warmup_steps=1", "training.val_every=2",
            "output.plots=false"] if quick else []
    args = [sys.executable, "-m", "minitrain.cli", "train", str(config), "--out-dir", str(out), "--models-dir",
            str(out / "models"), "--seed", str(seed), "--quiet", "--overwrite",
            *(a for s in [*sets, *extra] for a in ("--set", s))]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    results = json.loads((out / "results.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    return {**{k: results[k] for k in KEPT if k in results}, "parameters": manifest["parameters"]}


def score_teacher() -> dict:
    """Lab 01's model on the same held-out verbs (val) and dev split the students are scored on, and how soft its
    targets are at each temperature (`softness`)."""
    cfg = load_config(HERE / "student.yaml")
    model, _ = load_model(TEACHER)
    tokenizer = CharTokenizer.load(cfg.data.vocab_path)
    scores = {"parameters": model.num_parameters()}
    for split in ("val", "dev"):
        found = score_records(model, tokenizer, load_split(cfg.data, split), cfg.data.loss_on)
        scores.update({f"{split}_ppl": found["ppl"], f"{split}_exact_match": found["exact_match"]})
    scores["softness"] = softness(model, tokenizer, load_split(cfg.data, "train")[:SOFTNESS_RECORDS])
    return scores


def softness(model, tokenizer: CharTokenizer, records: list[dict]) -> dict:
    """At each temperature, over the answer positions of `records`: the mean probability of the teacher's top id
    and the mean mass on the ids the tokenizer never produces (vocab_size 64 holds 47 real ids)."""
    batch = trim_padding(encode_split(records, tokenizer, model.config["max_seq_len"], "answer"))
    with inference(model):
        logits, _ = model(batch.input, attn_pad_mask=batch.attn_pad_mask)
    z = logits.data.astype(np.float64)[batch.loss_mask]
    found = {}
    for t in TEMPERATURES:
        p = soft_targets([z], [1.0], t)
        found[f"T{t:g}"] = {"top1": float(p.max(axis=-1).mean()),
                            "unused_ids_mass": float(p[:, tokenizer.vocab_size:].sum(axis=-1).mean())}
    return found


def spread(runs: list[dict], key: str) -> dict:
    values = [run[key] for run in runs]
    mean = sum(values) / len(values)
    return {"mean": mean, "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", metavar="DIR", help="3-step runs into DIR; results.json is not written here")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of {', '.join(STAGES)}")
    args = parser.parse_args()
    stages = args.stages.split(",")
    if not set(stages) <= set(STAGES):
        parser.error(f"--stages: choose from {', '.join(STAGES)}")
    quick = args.quick is not None
    root = Path(args.quick) if quick else Path("runs/24-distillation")
    out = root / "results.json" if quick else HERE / "results.json"
    results: dict = json.loads(out.read_text()) if out.is_file() and stages != list(STAGES) else {}
    if "teacher" in stages:
        results["teacher"] = {"source": TEACHER, **score_teacher()}
    if "main" in stages:
        results["main"] = main_runs(root, quick)
    if "grid" in stages:
        results["grid"] = grid_runs(root, quick)
    if "longer" in stages:
        results["longer"] = longer_runs(root, quick)
    if "strong" in stages:
        results["strong"] = strong_teacher_runs(root, quick)
    if "progressive" in stages:
        results["progressive"] = progressive_runs(root, quick)
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def strong_teacher_runs(root: Path, quick: bool) -> dict:
    """Lab 01's model trained LONGER times as long, and the student distilled from it at T 2 and T 1."""
    steps = 6 if quick else 2000 * LONGER
    teacher_dir = root / "strong-teacher"
    strong = {"teacher": train(LAB01_CONFIG, teacher_dir, SEEDS[0], False,
                               (f"scheduler.total_steps={steps}", *(("scheduler.warmup_steps=1",) if quick else ())))}
    print("strong teacher", round(strong["teacher"]["val_ppl"], 4), flush=True)
    seeds = SEEDS[:1] if quick else SEEDS
    for t in (2.0,) if quick else (2.0, 1.0):  # the tests: one distillation from the strong teacher
        runs = [train(HERE / "distill.yaml", root / f"strong-T{t:g}-s{seed}", seed, quick,
                      (f"distillation.teacher={teacher_dir}", f"distillation.temperature={t}")) for seed in seeds]
        strong[f"T{t:g}"] = {"runs": dict(zip(map(str, seeds), runs, strict=True)),
                             **{key: spread(runs, key) for key in ("val_ppl", "val_exact_match")}}
        print("strong", t, [round(r["val_ppl"], 4) for r in runs], flush=True)
    return strong


def progressive_runs(root: Path, quick: bool) -> dict:
    """At T 2 and T 1, every seed: progressive.yaml (the student's scores and its assistant's) beside distill.yaml,
    the same student taught by lab 01's model directly (at T 2 the main rows again: the same numbers)."""
    progressive: dict = {}
    seeds = SEEDS[:1] if quick else SEEDS
    for t in (2.0,) if quick else (2.0, 1.0):
        runs, direct = [], []
        for seed in seeds:
            out = root / f"progressive-T{t:g}-s{seed}"
            student = train(HERE / "progressive.yaml", out, seed, quick, (f"distillation.temperature={t}",))
            assistant = json.loads((out / "stages" / "1-assistant" / "results.json").read_text())
            runs.append({**student, "assistant": {k: assistant[k] for k in KEPT if k in assistant}})
            if not quick:
                direct.append(train(HERE / "distill.yaml", root / f"direct-T{t:g}-s{seed}", seed, quick,
                                    (f"distillation.temperature={t}",)))
        progressive[f"T{t:g}"] = {"runs": dict(zip(map(str, seeds), runs, strict=True)),
                                  **{key: spread(runs, key) for key in ("val_ppl", "val_exact_match")}}
        if direct:
            progressive[f"direct-T{t:g}"] = {"runs": dict(zip(map(str, seeds), direct, strict=True)),
                                             **{key: spread(direct, key) for key in ("val_ppl", "val_exact_match")}}
        print("progressive", t, [(round(r["assistant"]["val_ppl"], 4), round(r["val_ppl"], 4)) for r in runs],
              "direct", [round(r["val_ppl"], 4) for r in direct], flush=True)
    return progressive


def main_runs(root: Path, quick: bool) -> dict:
    """Both configs at every seed, with the spread of val PPL and exact match."""
    main: dict = {}
    seeds = SEEDS[:2] if quick else SEEDS
    for name in ("student", "distill"):
        runs = [train(HERE / f"{name}.yaml", root / f"{name}-s{seed}", seed, quick) for seed in seeds]
        main[name] = {"runs": dict(zip(map(str, seeds), runs, strict=True)),
                      **{key: spread(runs, key) for key in ("val_ppl", "val_exact_match")}}
        print(name, [round(r["val_ppl"], 4) for r in runs], flush=True)
    return main


def grid_runs(root: Path, quick: bool) -> dict:
    """distill.yaml at seed 42 for every temperature and alpha of the grid."""
    grid = {}
    for t in TEMPERATURES[:1] if quick else TEMPERATURES:
        for alpha in ALPHAS[:1] if quick else ALPHAS:
            key = f"T{t:g}-alpha{alpha:g}"
            grid[key] = train(HERE / "distill.yaml", root / f"grid-{key}", SEEDS[0], quick,
                              (f"distillation.temperature={t}", f"distillation.alpha={alpha}"))
            print(key, round(grid[key]["val_ppl"], 4), flush=True)
    return grid


def longer_runs(root: Path, quick: bool) -> dict:
    """Both configs at seed 42 with LONGER times the steps (the warm-up unchanged, the cosine stretched)."""
    steps = 6 if quick else 2000 * LONGER
    longer = {}
    for name in ("distill",) if quick else ("student", "distill"):  # the tests: the longer schedule once
        longer[name] = train(HERE / f"{name}.yaml", root / f"longer-{name}", SEEDS[0], False,
                             (f"scheduler.total_steps={steps}", *(("scheduler.warmup_steps=1",) if quick else ())))
        print("longer", name, round(longer[name]["val_ppl"], 4), flush=True)
    return longer


if __name__ == "__main__":
    main()
