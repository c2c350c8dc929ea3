"""The verb corpus in chat form: data/chat/verbs/{train,val,test}.jsonl and a README.md that pins them.

    python scripts/verbs_to_chat.py [--corpus data/processed] [--out-dir data/chat/verbs]

Each corpus record `vender|C4|venderíamos` becomes one conversation, the question as a Spanish teacher would ask it
and the bare form as the answer:

    {"messages": [{"role": "user", "content": "Conjuga «vender» en condicional, primera persona del plural."},
                  {"role": "assistant", "content": "venderíamos"}]}

The splits are the corpus's own, under the names the text readers know (`locate.split_of`):

    corpus file   verbs                                    chat file    used for
    train.jsonl   the 448 others                           train.jsonl  training
    dev.jsonl     trabajar, aprender, recibir, pensar      val.jsonl    the run's validation loss, tuning
    val.jsonl     caminar, vender, dividir, cerrar         test.jsonl   the held-out score, and nothing else

so the held-out verbs stay held out, and a chat score on test.jsonl is comparable with the corpus's val numbers.
Line i of each chat file is line i of its corpus file. The output is a pure function of the corpus: running the
script again writes the same bytes. train.jsonl (2.7 MB) is not committed; the README's sha256 pins it, and
tests/data/test_verbs_chat.py rebuilds all three and compares.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_text
from minitrain.data.corpus import load_records

ROOT = Path(__file__).resolve().parents[1]
SPLITS = {"train": "train", "dev": "val", "val": "test"}  # corpus split -> chat split
TENSES = {
    "P": "presente de indicativo",
    "R": "pretérito perfecto simple",
    "I": "pretérito imperfecto de indicativo",
    "F": "futuro simple",
    "C": "condicional",
    "S": "presente de subjuntivo",
}
PERSONS = {
    1: "primera persona del singular", 2: "segunda persona del singular", 3: "tercera persona del singular",
    4: "primera persona del plural", 5: "segunda persona del plural", 6: "tercera persona del plural",
}  # fmt: skip


def question(verb: str, tense: str, person: int) -> str:
    """`Conjuga «vender» en condicional, primera persona del plural.`"""
    return f"Conjuga «{verb}» en {TENSES[tense]}, {PERSONS[person]}."


def conversation(record: dict) -> dict:
    """The chat record of one corpus record."""
    return {"messages": [{"role": "user", "content": question(record["verb"], record["tense"], record["person"])},
                         {"role": "assistant", "content": record["form"]}]}


def chat_jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(conversation(r), ensure_ascii=False) + "\n" for r in records)


def readme(files: dict[str, str]) -> str:
    rows = "".join(f"| {name} | {text.count(chr(10))} | {hashlib.sha256(text.encode()).hexdigest()} |\n"
                   for name, text in files.items())
    return (
        "# The verb corpus in chat form\n\n"
        "Written by `scripts/verbs_to_chat.py` from `data/processed/` (see its docstring): one conversation per "
        "corpus record, a question in Spanish and the conjugated form as the answer. `val.jsonl` holds the dev "
        "verbs (trabajar, aprender, recibir, pensar), `test.jsonl` the held-out verbs (caminar, vender, dividir, "
        "cerrar). `train.jsonl` is not committed: run the script to write it.\n\n"
        "| file | records | sha256 |\n| --- | --- | --- |\n" + rows
    )


def write_chat_corpus(corpus: Path, out_dir: Path) -> dict[str, str]:
    """Write the three chat files and README.md into `out_dir`; returns {file name: text}."""
    files = {f"{chat}.jsonl": chat_jsonl(load_records(corpus / f"{split}.jsonl")) for split, chat in SPLITS.items()}
    for name, text in files.items():
        atomic_write_text(out_dir / name, text)
    atomic_write_text(out_dir / "README.md", readme(files))
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(ROOT / "data" / "processed"), help="the corpus folder")
    parser.add_argument("--out-dir", default=str(ROOT / "data" / "chat" / "verbs"), help="folder for the chat files")
    args = parser.parse_args(argv)
    try:
        Path(args.out_dir).mkdir(parents=True, exist_ok=True)
        files = write_chat_corpus(Path(args.corpus), Path(args.out_dir))
    except (UserError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return getattr(e, "exit_code", 1)
    for name, text in files.items():
        print(f"{name:12s} {text.count(chr(10)):6d} conversations {len(text.encode()):9,d} bytes")
    print(f"wrote {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
