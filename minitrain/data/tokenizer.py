"""Character tokenizer: one token per character, plus three special tokens.

Ids are fixed by position in the vocabulary:

    0 = PAD   fills a batch row after the line ends; never attended to, never counted in the loss
    1 = BOS   starts every line
    2 = EOS   ends every line (the model must learn to emit it after the conjugated form)
    3 ...     the corpus's characters, sorted by code point

so `caminar|P1|camino` becomes `[BOS] + [id(c) for c in text] + [EOS]`. The vocabulary is stored in
`data/processed/vocab.json`; MiniGPT's embedding table has one row per id, hence the hard cap of 64 ids.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_json, read_json

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SPECIALS = (PAD, BOS, EOS)
MAX_VOCAB_SIZE = 64
VOCAB_FORMAT = "minitrain-char-vocab-v1"


class CharTokenizer:
    """Maps text to ids and back; `vocab_size = 3 + len(chars)` and is at most 64."""

    pad_id = 0
    bos_id = 1
    eos_id = 2

    def __init__(self, chars: Sequence[str]) -> None:
        chars = list(chars)
        if any(len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
            raise UserError(f"tokenizer characters must be distinct single characters, got {chars!r}")
        if chars != sorted(chars):
            raise UserError("tokenizer characters must be sorted by code point")
        self.chars = chars
        self.vocab_size = len(SPECIALS) + len(chars)
        if self.vocab_size > MAX_VOCAB_SIZE:
            raise UserError(f"vocab_size {self.vocab_size} exceeds the maximum of {MAX_VOCAB_SIZE}")
        self._id_of = {c: i for i, c in enumerate(chars, start=len(SPECIALS))}

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> CharTokenizer:
        """The vocabulary of a corpus: every character that occurs in `texts`, sorted."""
        return cls(sorted(set().union(*map(set, texts))))

    @classmethod
    def load(cls, path: str | os.PathLike) -> CharTokenizer:
        """Read a `vocab.json` written by `save`."""
        path = Path(path)
        obj = read_json(path, "vocabulary file", limit=1 << 20)
        if not isinstance(obj, dict) or obj.get("format") != VOCAB_FORMAT:
            raise UserError(f"{path}: not a vocabulary file (expected format {VOCAB_FORMAT!r})", 2)
        chars = obj.get("chars")
        if obj.get("specials") != list(SPECIALS) or not isinstance(chars, list):
            raise UserError(f"{path}: expected 'specials' {list(SPECIALS)} and a 'chars' list", 2)
        if not all(isinstance(c, str) for c in chars):
            odd = next(c for c in chars if not isinstance(c, str))
            raise UserError(f"{path}: 'chars' must hold one-character strings, found {odd!r}", 2)
        try:
            tokenizer = cls(chars)
        except UserError as e:
            raise UserError(f"{path}: {e}", 2) from None
        size = obj.get("vocab_size")
        if type(size) is not int or size != tokenizer.vocab_size:
            raise UserError(f"{path}: vocab_size {size!r} != {tokenizer.vocab_size} ids listed", 2)
        return tokenizer

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_json(path, self.as_json())

    def as_json(self) -> dict[str, Any]:
        """What `save` writes (and `load` reads)."""
        return {"format": VOCAB_FORMAT, "specials": list(SPECIALS), "chars": self.chars, "vocab_size": self.vocab_size}

    def encode(self, text: str) -> list[int]:
        """Ids of the characters of `text`, without BOS/EOS. An unknown character is a `UserError`."""
        try:
            return [self._id_of[c] for c in text]
        except KeyError as e:
            c = e.args[0]
            raise UserError(f"unknown character {c!r} (U+{ord(c):04X}) in record {text!r}: it is not in the "
                            "vocabulary") from None

    def encode_line(self, text: str) -> list[int]:
        """`[BOS] + encode(text) + [EOS]`: the token sequence the model trains on."""
        return [self.bos_id, *self.encode(text), self.eos_id]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids`, dropping PAD/BOS/EOS."""
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise UserError(f"token ids {bad} out of range for a vocabulary of {self.vocab_size}")
        first = len(SPECIALS)
        return "".join(self.chars[i - first] for i in ids if i >= first)
