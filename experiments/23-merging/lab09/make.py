"""Lab 09's fixed models and reference numbers (lab/09-model-merging.md), from experiment 23's lr1e-2 fine-tunes.

    python experiments/23-merging/run.py                          # trains the fine-tunes (runs/23-merging/lr1e-2/)
    python experiments/23-merging/lab09/make.py [--runs DIR]      # this folder: models and results.json

writes here `present.safetensors` and `subjunctive.safetensors` (each fine-tune with its LoRA adapters folded into
lab 01's model, `base.safetensors`, a copy of models/minigpt-phase18-64ab16764a406b88.safetensors), then merges
them with the library by this folder's `ties.yaml`, `dare_linear.yaml` and `dare_ties.yaml` (the experiment's
merges/ configs, naming these files) and scores every model on the held-out verbs' present and subjunctive (24
forms each: val PPL over the answer, greedy exact match) into `results.json`, which lab 09's checker compares the
student's merges with. Committed so that the lab needs no training: the fine-tunes retrained elsewhere differ in
their last digits (numba's sums), and so would every merge of them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from minitrain.data.corpus import load_records
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.sources import load_model, load_pretrained
from minitrain.merging import merge_models
from minitrain.runs.model_files import save_model_file
from minitrain.training.scoring import score_records

HERE = Path(__file__).resolve().parent
LAB01_MODEL = Path("models/minigpt-phase18-64ab16764a406b88.safetensors")
METHODS = ("ties", "dare_linear", "dare_ties")
TENSES = {"present": "P", "subjunctive": "S"}


def held_out() -> dict[str, list[dict]]:
    """{present_val, subjunctive_val}: the four held-out verbs' forms of each tense (experiment 23's val splits)."""
    records = load_records(Path("data/processed/val.jsonl"))
    return {f"{name}_val": [r for r in records if r["tense"] == code] for name, code in TENSES.items()}


def score(source: str) -> dict[str, dict[str, float]]:
    tokenizer = CharTokenizer.load(Path("data/processed/vocab.json"))
    model, _ = load_model(source)
    return {split: {k: round(v, 4) for k, v in score_records(model, tokenizer, records).items() if k != "loss"}
            for split, records in held_out().items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="runs/23-merging/lr1e-2", help="the folder of the two fine-tune runs")
    args = parser.parse_args()
    shutil.copyfile(LAB01_MODEL, HERE / "base.safetensors")
    for name in TENSES:
        tuned = load_pretrained(str(Path(args.runs) / name))  # its adapters folded into lab 01's model
        save_model_file(HERE / f"{name}.safetensors", tuned.state, tuned.model_config,
                        {"what": f"experiment 23's lr1e-2 LoRA fine-tune on the {name}, adapters folded in"})
    results = {name: score(str(HERE / f"{name}.safetensors")) for name in ("base", *TENSES)}
    with tempfile.TemporaryDirectory() as scratch:
        for method in METHODS:
            out = Path(scratch) / f"{method}.safetensors"
            merge_models(HERE / f"{method}.yaml", out)
            results[method] = score(str(out))
    (HERE / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
