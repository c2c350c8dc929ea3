"""Build the Spanish verb-conjugation corpus: data/processed/{train,dev,val}.jsonl, vocab.json, manifest.json.

    python scripts/build_corpus.py [--verbs data/raw/verbs.tsv] [--out-dir data/processed]

A thin wrapper around `minitrain.data.build.build_corpus`. Deterministic: running it again rewrites the same
bytes, so the committed files can be checked against a fresh build.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from minitrain.common.errors import UserError
from minitrain.data.build import build_corpus

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbs", default=str(ROOT / "data" / "raw" / "verbs.tsv"), help="the verb list (TSV)")
    parser.add_argument("--out-dir", default=str(ROOT / "data" / "processed"), help="folder for the corpus files")
    args = parser.parse_args(argv)
    try:
        manifest = build_corpus(args.verbs, args.out_dir)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    for name, info in manifest["files"].items():
        if "records" in info:
            print(f"{name:12s} {info['verbs']:4d} verbs {info['records']:6d} records {info['characters']:7d} chars")
    print(
        f"vocab_size {manifest['vocab_size']}, longest line {manifest['max_line_tokens']} tokens, "
        f"val verbs {', '.join(manifest['val_verbs'])}; dev verbs {', '.join(manifest['dev_verbs'])}; "
        f"wrote {args.out_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
