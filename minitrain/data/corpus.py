"""The corpus records: one JSON object per line, one line per (verb, tense, person).

A record looks like

    {"verb": "caminar", "tense": "P", "person": 1, "form": "camino", "text": "caminar|P1|camino"}

`text` is the training line, `verb|<tense><person>|form`:

    tense   P present indicative, R preterite (pretérito perfecto simple), I imperfect indicative,
            F future, C conditional, S present subjunctive
    person  1 yo, 2 tú, 3 él/ella/usted, 4 nosotros, 5 vosotros, 6 ellos/ellas/ustedes

Everything up to the last `|` is the prompt (`caminar|P1|`); the form after it is the answer the model must
produce, followed by EOS. With BOS and EOS a line is at most 32 tokens (`MAX_LINE_TOKENS`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from minitrain.common.errors import UserError
from minitrain.common.io import read_bytes

TENSES = ("P", "R", "I", "F", "C", "S")
PERSONS = (1, 2, 3, 4, 5, 6)
FIELDS = ("verb", "tense", "person", "form", "text")
SEPARATOR = "|"
MAX_LINE_TOKENS = 32  # BOS + text + EOS, one token per character


def format_text(verb: str, tense: str, person: int, form: str) -> str:
    """The training line `verb|<tense><person>|form`, e.g. `caminar|P1|camino`."""
    return f"{verb}{SEPARATOR}{tense}{person}{SEPARATOR}{form}"


def make_record(verb: str, tense: str, person: int, form: str) -> dict:
    """One record with its fields in the canonical order."""
    text = format_text(verb, tense, person, form)
    return {"verb": verb, "tense": tense, "person": person, "form": form, "text": text}


def check_record(record: object) -> str | None:
    """Why `record` is not a valid record, or None when it is."""
    if not isinstance(record, dict):
        return "expected a JSON object"
    if set(record) != set(FIELDS):
        return f"expected the fields {list(FIELDS)}, got {sorted(record)}"
    verb, tense, person, form, text = (record[k] for k in FIELDS)
    if not (isinstance(verb, str) and verb and isinstance(form, str) and form and isinstance(text, str)):
        return "verb, form and text must be non-empty strings"
    if SEPARATOR in verb or SEPARATOR in form:
        return f"verb and form must not contain {SEPARATOR!r}"
    if tense not in TENSES:
        return f"tense {tense!r} is not one of {''.join(TENSES)}"
    if type(person) is not int or person not in PERSONS:
        return f"person {person!r} is not an integer 1-6"
    if text != format_text(verb, tense, person, form):
        return f"text {text!r} does not match its fields ({format_text(verb, tense, person, form)!r})"
    if len(text) + 2 > MAX_LINE_TOKENS:
        return f"BOS + text + EOS is {len(text) + 2} tokens, more than {MAX_LINE_TOKENS}"
    return None


def records_to_jsonl(records: Iterable[dict]) -> str:
    """The JSONL text of `records`: compact, UTF-8 characters kept as they are, one record per line."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def load_records(path: str | os.PathLike) -> list[dict]:
    """Read and validate a JSONL split; any bad line is a `UserError` naming the file and line number."""
    path = Path(path)
    if not os.path.lexists(path):
        raise UserError(f"{path}: corpus file not found (run scripts/build_corpus.py)", 2)
    raw = read_bytes(path, "corpus file")
    lines = raw.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the empty string after the final newline
    records = []
    for lineno, line in enumerate(lines, start=1):
        try:
            record = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise UserError(f"{path}:{lineno}: not valid UTF-8", 2) from None
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{lineno}: invalid JSON ({e.msg} at column {e.colno})", 2) from None
        except (ValueError, RecursionError):  # a number of thousands of digits, nesting past the stack
            raise UserError(f"{path}:{lineno}: invalid JSON (a number too long or nesting too deep)", 2) from None
        problem = check_record(record)
        if problem:
            raise UserError(f"{path}:{lineno}: bad record: {problem}", 2)
        records.append(record)
    if not records:
        raise UserError(f"{path}: corpus file holds no records", 2)
    return records
