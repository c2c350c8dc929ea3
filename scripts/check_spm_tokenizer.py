"""Check minitrain's tokenizer of a GGUF (SentencePiece or byte-level BPE) against transformers reading the same file.

    PYTHONPATH=. /tmp/tv/bin/python scripts/check_spm_tokenizer.py GGUF [GGUF ...] [--folder HF_FOLDER ...]

Run it with a scratch environment that has transformers (never a minitrain dependency); minitrain is imported from
the checkout. For each file, minitrain builds its tokenizer from the `tokenizer.ggml.*` fields (formats/gguf_read.py
`tokenizer_fields`, then `PretrainedTokenizer.from_gguf_fields`), timed, with the process's peak memory, before
transformers loads anything; then `AutoTokenizer.from_pretrained(dir, gguf_file=...)` builds its own. Compared on
the mixed texts of scripts/make_spm_fixtures.py, the paragraphs of scripts/fixtures/eval-text.txt and every message
of the verb corpus's chat test set (data/chat/verbs/test.jsonl): ids with and without special tokens, the decode of
the ids, the decode with special tokens skipped. The folder minitrain saves for the tokenizer (what a run keeps
in RUN/tokenizer/ and exports) is loaded back by `AutoTokenizer.from_pretrained(folder)` and compared the same
way against minitrain's ids. A --folder (a Hugging Face folder with tokenizer.json) is compared
the same way through `PretrainedTokenizer.from_folder`. Exit status 0 when every text agrees.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_spm_fixtures import ROOT, TEXTS


def texts(bos: str, eos: str) -> list[str]:
    found = [t.format(bos=bos, eos=eos) for t in TEXTS]
    found += (ROOT / "scripts/fixtures/eval-text.txt").read_text(encoding="utf-8").split("\n\n")
    for row in (ROOT / "data/chat/verbs/test.jsonl").read_text(encoding="utf-8").splitlines():
        found += [m["content"] for m in json.loads(row)["messages"]]
    return found


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def compare(ours, theirs, cases: list[str], label: str) -> bool:
    bad = 0
    for text in cases:
        with_special, plain = ours.encode(text, add_special_tokens=True), ours.encode(text)
        got = (with_special, plain, ours.decode(plain), ours.decode(with_special, skip_special_tokens=True))
        want = (theirs(text)["input_ids"], theirs(text, add_special_tokens=False)["input_ids"],
                theirs.decode(plain), theirs.decode(with_special, skip_special_tokens=True))
        if got != want:
            bad += 1
            if bad <= 5:
                print(f"  differs on {text[:60]!r}:\n    minitrain    {got}\n    transformers {want}")
    print(f"{label}: {len(cases) - bad}/{len(cases)} texts identical (ids with and without special tokens, decodes)")
    return bad == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gguf", nargs="*", type=Path)
    parser.add_argument("--folder", nargs="*", type=Path, default=[])
    args = parser.parse_args()
    from minitrain.data.pretrained_tokenizer import PretrainedTokenizer
    from minitrain.formats.gguf_read import open_gguf, tokenizer_fields

    ours = {}
    for path in args.gguf:
        before, start = peak_mb(), time.perf_counter()
        fields = tokenizer_fields(open_gguf(path), path)
        ours[path] = PretrainedTokenizer.from_gguf_fields(**fields)
        print(f"{path}: tokenizer.ggml.model {fields['model']!r}, {len(fields['tokens'])} tokens, built by minitrain "
              f"in {time.perf_counter() - start:.2f} s, peak memory {before:.0f} -> {peak_mb():.0f} MB")
    folders = {path: PretrainedTokenizer.from_folder(path) for path in args.folder}

    from transformers import AutoTokenizer

    ok = True
    for path, tok in ours.items():
        start = time.perf_counter()
        theirs = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        print(f"  transformers built it in {time.perf_counter() - start:.2f} s")
        cases = texts(theirs.bos_token or "", theirs.eos_token or "")
        ok &= compare(tok, theirs, cases, str(path))
        with tempfile.TemporaryDirectory() as saved:
            tok.save(saved)
            label = f"  minitrain's saved folder of {path.name}"
            ok &= compare(tok, AutoTokenizer.from_pretrained(saved), cases, label)
    for path, tok in folders.items():
        theirs = AutoTokenizer.from_pretrained(str(path))
        ok &= compare(tok, theirs, texts(theirs.bos_token or "", theirs.eos_token or ""), str(path))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
