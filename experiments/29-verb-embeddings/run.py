"""Verb-form embeddings (README.md): an encoder of a word's character n-grams trained so that the forms of one verb
land close together and other verbs' far away, with the triplet margin loss or NT-Xent
(minitrain/autograd/embedding_losses.py); scored by retrieval with the ranking metrics
(minitrain/evaluation/ranking.py). Every number of results.json:

    python experiments/29-verb-embeddings/run.py                  3 seeds, results.json here
    python experiments/29-verb-embeddings/run.py --steps 20 --seeds 1 --out DIR    a smoke run

The corpus is lab 01's training split (data/processed/train.jsonl: 448 verbs, 36 forms each). Its verbs are split
once (seed 0) into 358 for training and 90 held out; nothing of a held-out verb is seen in training. The task, on
the held-out verbs only: each of their 3,240 forms is a query, every other held-out form a candidate (3,239), and
the relevant ones are the 35 other forms of its verb (hablábamos -> hablo, habló, hablarán, ...; a form spelled
like another of its verb, hablaba for P1 and P3, counts too). recall@35 (35 = the relevant count, so it is also
the R-precision) is the share of a form's verb-mates among its 35 nearest, recall@100 among its 100 nearest, MRR
the mean of 1 / the rank of the nearest verb-mate, NDCG@10 over the top 10 (binary relevance).

A word is its hashed character 1-, 2- and 3-grams of "^word$" (512 buckets, counts, unit length); the encoder is
Linear(512, 128) -> tanh -> Linear(128, 32). Training draws 64 training verbs a step and two different words of
each (its 36 forms and its infinitive): NT-Xent (τ = 0.1) takes the two words as the two views; the triplet loss
takes them as anchor and positive and a word of the next verb in the batch as the negative (margin 0.5, on unit
vectors). AdamW, lr 3e-3, 500 steps. Similarity: cosine, for every row.
"""

from __future__ import annotations

import argparse
import json
import time
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np

from minitrain.autograd.embedding_losses import nt_xent_loss, triplet_margin_loss
from minitrain.autograd.tensor import Tensor, no_grad
from minitrain.evaluation.ranking import mean_reciprocal_rank, ndcg_at_k, recall_at_k
from minitrain.nn import Linear, Module
from minitrain.optim import build_optimizer

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parents[1] / "data" / "processed" / "train.jsonl"
BUCKETS, HIDDEN, WIDTH = 512, 128, 32
BATCH, LR, TEMPERATURE, MARGIN = 64, 3e-3, 0.1, 0.5


def verbs() -> dict[str, list[str]]:
    """Each verb's words: its infinitive, then its forms in corpus order (duplicates kept: hablaba is P1 and P3)."""
    words = defaultdict(list)
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        words[record["verb"]] = words[record["verb"]] or [record["verb"]]
        words[record["verb"]].append(record["form"])
    return dict(words)


def features(words: list[str]) -> np.ndarray:
    """(len(words), BUCKETS): hashed character 1-3-gram counts of ^word$, each row of unit length (crc32: the same
    buckets on every machine and Python)."""
    out = np.zeros((len(words), BUCKETS), np.float32)
    for row, word in enumerate(words):
        padded = f"^{word}$"
        for n in (1, 2, 3):
            for i in range(len(padded) - n + 1):
                out[row, zlib.crc32(padded[i:i + n].encode()) % BUCKETS] += 1
    return out / np.linalg.norm(out, axis=1, keepdims=True)


class Encoder(Module):
    def __init__(self, rng: np.random.Generator) -> None:
        super().__init__()
        self.hidden, self.out = Linear(BUCKETS, HIDDEN, rng=rng), Linear(HIDDEN, WIDTH, rng=rng)

    def __call__(self, x: Tensor) -> Tensor:
        return self.out(self.hidden(x).tanh())


def unit(z: Tensor) -> Tensor:
    return z / (z * z).sum(axis=1, keepdims=True).sqrt()


def retrieval(embeddings: np.ndarray, owner: np.ndarray) -> dict[str, float]:
    """The metrics of ranking every other row for each row of `embeddings` (N, D) by cosine; owner[i]: its verb."""
    u = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    scores = u @ u.T
    np.fill_diagonal(scores, -np.inf)  # a form does not retrieve itself
    relevance = (owner[:, None] == owner[None, :]).astype(np.float64)
    np.fill_diagonal(relevance, 0.0)
    return {"recall@35": recall_at_k(relevance, scores, 35), "recall@100": recall_at_k(relevance, scores, 100),
            "mrr": mean_reciprocal_rank(relevance, scores), "ndcg@10": ndcg_at_k(relevance, scores, 10)}


def embed(model: Encoder, x: np.ndarray) -> np.ndarray:
    with no_grad():
        return model(Tensor(x)).data


def train(loss_name: str, words: dict[str, np.ndarray], seed: int, steps: int) -> tuple[Encoder, list[float]]:
    rng = np.random.default_rng(seed)
    model = Encoder(rng)
    opt = build_optimizer("adamw", model.named_parameters(), lr=LR, weight_decay=0.01)
    names, losses = list(words), []
    for _ in range(steps):
        batch = rng.choice(len(names), size=BATCH, replace=False)
        pairs = [words[names[v]][rng.choice(len(words[names[v]]), size=2, replace=False)] for v in batch]
        z1, z2 = (unit(model(Tensor(np.stack([p[i] for p in pairs])))) for i in (0, 1))
        if loss_name == "nt_xent":
            loss = nt_xent_loss(z1, z2, TEMPERATURE)
        else:  # the negative: the next verb's second word (another verb: the batch's verbs are distinct)
            negative = unit(model(Tensor(np.roll(np.stack([p[1] for p in pairs]), 1, axis=0))))
            loss = triplet_margin_loss(z1, z2, negative, margin=MARGIN)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    start = time.perf_counter()
    paradigms = verbs()
    order = np.random.default_rng(0).permutation(sorted(paradigms))
    held_out, trained = sorted(order[:90]), sorted(order[90:])
    words = {v: features(paradigms[v]) for v in paradigms}
    forms = np.concatenate([words[v][1:] for v in held_out])  # the 36 forms of each, not the infinitives
    owner = np.repeat(np.arange(len(held_out)), [len(paradigms[v]) - 1 for v in held_out])
    rows = {"character n-grams, no training": retrieval(forms, owner)}
    for seed in range(args.seeds):
        rows[f"untrained encoder, seed {seed}"] = retrieval(embed(Encoder(np.random.default_rng(seed)), forms), owner)
        for loss_name in ("triplet", "nt_xent"):
            model, losses = train(loss_name, {v: words[v] for v in trained}, seed, args.steps)
            row = retrieval(embed(model, forms), owner)
            rows[f"{loss_name}, seed {seed}"] = {**row, "first_loss": losses[0], "last_loss": float(np.mean(
                losses[-50:]))}
            print(f"{loss_name} seed {seed}: {row}", flush=True)
    results = {"held_out_verbs": len(held_out), "queries": len(forms), "candidates": len(forms) - 1,
               "training_verbs": len(trained), "steps": args.steps, "seconds": round(time.perf_counter() - start, 1),
               "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
