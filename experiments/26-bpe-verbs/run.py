"""MiniGPT on BPE tokens against MiniGPT on characters, on the verb corpus (README.md): results.json here.

    python experiments/26-bpe-verbs/run.py                      every run into runs/26-bpe-verbs/, then results.json
    python experiments/26-bpe-verbs/run.py --steps 5 --out DIR  the same pipeline with 5-step runs (the tests)
    python experiments/26-bpe-verbs/run.py --sizes 320          characters against one BPE size only

Each tokenizer trains lab 01's MiniGPT (experiments/18-train-mini/config.yaml) with the same steps, batch of 8
records, schedule and seeds: `char` is that config itself; `bpe-N` is bpe.yaml, the same with `data.tokenizer: {type:
bpe, vocab_size: N}` (a byte-level BPE trained on the training split, minitrain/data/bpe.py) and an embedding of N
rows.

Perplexities per token do not compare across tokenizers (a BPE token holds more text than a character), so the
held-out verbs are scored in BITS PER CHARACTER: over the val split,

    bits/char = Σ −log2 p(token) over the answer's tokens and its end token / Σ (characters of the answer + 1)

which charges each tokenizer for exactly the same text (the answer, then its end), whatever its tokens. Exact match
is greedy decoding from `verb|TP|`, the answer compared as text. With MINITRAIN_LAB_DIR set to a lab 06
workspace, the BPE is the student's (minitrain/seam.py). Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))

from minitrain.autograd import functional as F  # noqa: E402
from minitrain.data.batcher import EvalBatcher, encode_split  # noqa: E402
from minitrain.data.bpe_json import load_bpe  # noqa: E402
from minitrain.data.corpus import load_records  # noqa: E402
from minitrain.data.tokenizer import CharTokenizer  # noqa: E402
from minitrain.hub.sources import load_model  # noqa: E402
from minitrain.nn import inference  # noqa: E402
from minitrain.training.scoring import exact_match  # noqa: E402

CHAR_CONFIG = "experiments/18-train-mini/config.yaml"
BPE_CONFIG = "experiments/26-bpe-verbs/bpe.yaml"  # the same, with data.tokenizer: bpe
BPE_SIZES = (320, 384, 512)  # 61, 125 and 253 merges
VAL = REPO / "data" / "processed" / "val.jsonl"


def train(name: str, steps: int, out: Path) -> Path:
    """Train one run into out/name (its own process); the run folder."""
    run = out / name
    config, settings = CHAR_CONFIG, ["--set", f"scheduler.total_steps={steps}", "--set",
                                     f"scheduler.warmup_steps={min(100, steps // 2)}"]
    if name.startswith("bpe-"):
        size = int(name[len("bpe-"):])
        config = BPE_CONFIG
        settings += ["--set", f"model.vocab_size={size}", "--set", f"data.tokenizer.vocab_size={size}"]
    command = [sys.executable, "-m", "minitrain.cli", "train", config, "--out-dir", str(run), "--models-dir",
               str(run / "models"), "--overwrite", "--quiet", *settings]
    subprocess.run(command, cwd=REPO, check=True)
    return run


def bits_per_character(model, tokenizer, records: list[dict]) -> tuple[float, int, int]:
    """(bits/char, answer tokens + ends, answer characters + ends) over `records` (the formula above)."""
    batches = EvalBatcher(encode_split(records, tokenizer, model.config["max_seq_len"], "answer"), 64)
    bits, tokens = 0.0, 0
    with inference(model):
        for batch in batches:
            logits, _ = model(batch.input, attn_pad_mask=batch.attn_pad_mask)
            log_p = F.log_softmax(logits).data.astype(np.float64)
            b, t = np.nonzero(batch.loss_mask)
            bits -= float(log_p[b, t, batch.target[b, t]].sum()) / math.log(2)
            tokens += int(b.size)
    characters = sum(len(r["form"]) + 1 for r in records)
    return bits / characters, tokens, characters


def score(run: Path) -> dict:
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    bpe = (run / "tokenizer.json").is_file()
    tokenizer = load_bpe(run / "tokenizer.json") if bpe else CharTokenizer.load(REPO / "data/processed/vocab.json")
    model, _ = load_model(results["model_path"])
    records = load_records(VAL)
    bpc, tokens, characters = bits_per_character(model, tokenizer, records)
    return {"tokenizer_ids": tokenizer.vocab_size, "parameters": sum(p.data.size for p in model.parameters()),
            "val_bits_per_char": round(bpc, 4), "val_answer_tokens": tokens, "val_answer_chars": characters,
            "val_chars_per_token": round(characters / tokens, 3),
            "val_exact_match": round(exact_match(model, tokenizer, records), 4),
            "val_ppl_per_token": round(results["val_ppl"], 4), "steps": results["steps"],
            "ms_per_step": results["ms_per_step"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="training steps of every run (default 2000)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "26-bpe-verbs", help="where the runs go")
    parser.add_argument("--results", type=Path, default=HERE / "results.json", help="the results file")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(BPE_SIZES), metavar="N",
                        help=f"the BPE vocabulary sizes, each above the 259 specials and bytes (default "
                             f"{' '.join(map(str, BPE_SIZES))})")
    args = parser.parse_args(argv)
    if min(args.sizes) < 260:
        parser.error(f"--sizes: {min(args.sizes)} leaves no merge (3 specials + 256 bytes = 259 ids)")
    names = ["char", *(f"bpe-{n}" for n in args.sizes)]
    table = {name: score(train(name, args.steps, args.out)) for name in names}
    text = json.dumps({"steps": args.steps, "config": CHAR_CONFIG, "runs": table}, indent=2) + "\n"
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
