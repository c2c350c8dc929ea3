"""Build `data/processed/` from `data/raw/verbs.tsv`: train/dev/val JSONL, vocab.json, manifest.json.

The build is a pure function of the verb list and the code: the same inputs give the same bytes (records in
verb-list order, then tense P R I F C S, then person 1-6; JSON with fixed key order; no timestamps). The
manifest records what a run needs to know it trains on exactly this data:

    generator_version   bumped whenever the conjugator or the format changes the output
    source              the verb list's sha256
    files               sha256, records, verbs and characters of each file
    val_verbs, dev_verbs, heldout_policy, vocab_size, max_line_tokens

Runs identify the data by the sha256 of manifest.json (`data_manifest_hash`).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_json, atomic_write_text, sha256_of
from minitrain.data.conjugator import conjugate
from minitrain.data.corpus import MAX_LINE_TOKENS, PERSONS, TENSES, make_record, records_to_jsonl
from minitrain.data.split import DEV_VERBS, HELDOUT_POLICY, SPLITS, VAL_VERBS, split_verbs
from minitrain.data.tokenizer import CharTokenizer
from minitrain.data.verbs import Verb, load_verbs

GENERATOR_VERSION = "1.1.0"
MANIFEST = "manifest.json"
VOCAB = "vocab.json"


def data_manifest_hash(data_dir: str | os.PathLike) -> str:
    """The sha256 of `data_dir/manifest.json`: one hash that pins every file of the corpus."""
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        raise UserError(f"{path}: corpus manifest not found (run scripts/build_corpus.py)")
    return sha256_of(path)


def verb_records(verb: Verb) -> list[dict]:
    """The 36 records of one verb, tense-major."""
    forms = conjugate(verb.infinitive, verb.verb_class)
    return [make_record(verb.infinitive, t, p, forms[t, p]) for t in TENSES for p in PERSONS]


def build_splits(verbs: list[Verb]) -> dict[str, list[dict]]:
    """Records per split, each checked to fit in MAX_LINE_TOKENS."""
    splits = {name: [r for v in vs for r in verb_records(v)] for name, vs in split_verbs(verbs).items()}
    for records in splits.values():
        for r in records:
            if len(r["text"]) + 2 > MAX_LINE_TOKENS:
                raise UserError(f"record {r['text']!r} needs {len(r['text']) + 2} tokens, more than {MAX_LINE_TOKENS}")
    return splits


def build_corpus(verbs_path: str | os.PathLike, out_dir: str | os.PathLike) -> dict:
    """Write the corpus files into `out_dir` and return the manifest."""
    out_dir = Path(out_dir)
    verbs = load_verbs(verbs_path)
    splits = build_splits(verbs)
    # The vocabulary is the training split's; a dev/val character the model never trained on is an error.
    tokenizer = CharTokenizer.from_texts(r["text"] for r in splits["train"])
    for name in ("dev", "val"):
        for r in splits[name]:
            tokenizer.encode(r["text"])
    files = {}
    for name in SPLITS:
        path = out_dir / f"{name}.jsonl"
        atomic_write_text(path, records_to_jsonl(splits[name]))
        files[path.name] = {
            "sha256": sha256_of(path),
            "records": len(splits[name]),
            "verbs": len({r["verb"] for r in splits[name]}),
            "characters": sum(len(r["text"]) for r in splits[name]),
        }
    tokenizer.save(out_dir / VOCAB)
    files[VOCAB] = {"sha256": sha256_of(out_dir / VOCAB)}
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "heldout_policy": HELDOUT_POLICY,
        "val_verbs": list(VAL_VERBS),
        "dev_verbs": list(DEV_VERBS),
        "source": {"file": Path(verbs_path).name, "sha256": sha256_of(verbs_path), "verbs": len(verbs)},
        "verb_classes": dict(sorted(Counter(v.verb_class for v in verbs).items())),
        "files": files,
        "vocab_size": tokenizer.vocab_size,
        "max_line_tokens": max(len(r["text"]) + 2 for rs in splits.values() for r in rs),
    }
    atomic_write_json(out_dir / MANIFEST, manifest)
    return manifest
