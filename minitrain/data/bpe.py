"""Byte-level BPE tokenizer (lab 06): learn merges from a corpus, encode text to ids, decode ids to text.

Text is first cut into words (`pretokenize`), with this rule, written as one regular expression:

    [ \\t\\n\\r]+  |  [!-/:-@\\[-`{-~]  |  [^ \\t\\n\\r!-/:-@\\[-`{-~]+

a run of spaces, tabs and newlines; one ASCII punctuation character; or a run of anything else (letters,
digits, every non-ASCII character). `caminar|P1|camino` is `caminar`, `|`, `P1`, `|`, `camino`. A merge never
crosses a word's edge, so `|camino` can never become one token. Each word is then its UTF-8 BYTES: the 256
byte values are the alphabet, so any text at all can be encoded, and nothing is ever unknown.

Ids, in this order:

    0 .. S-1          the special tokens as given (`<pad>`, `<bos>`, `<eos>`): never split, never merged
    S .. S+255        the 256 bytes, in the order of their printable stand-ins (`bytes_to_unicode`): bytes
                      33..126 ('!'..'~'), 161..172, 174..255 first, then 0..32, 127..160, 173
    S+256 ...         one id per merge, in the order the merges were learned

Training counts every pair of adjacent symbols inside each distinct word, weighted by how often the word
occurs (a word seen 40 times adds 40 to each of its pairs; `aaa` holds the pair (a, a) twice). The most
frequent pair becomes a new symbol, merged everywhere left to right without overlap (`aaa` -> `aa a`), and the
counting starts again, until the vocabulary has `vocab_size` ids or no pair is left. A tie between pairs
with the same count goes to the pair with the smallest (left id, right id): the rule of the `tokenizers`
library's BpeTrainer, so the two learn the same merges and give the same ids.

Encoding a word applies the learned merges by rank: merge the adjacent pair learned earliest, everywhere left
to right, and repeat until no learned pair is left. Decoding joins the tokens' BYTES and only then reads them
as UTF-8 (one character may be split across tokens), replacing a broken sequence by U+FFFD.

minitrain/data/bpe_json.py saves and loads a tokenizer as the `tokenizers` library's own `tokenizer.json`, so
`tokenizers.Tokenizer.from_file(path)` reads ours and encodes alike.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise

from minitrain.common.errors import UserError

WORD = r"[ \t\n\r]+|[!-/:-@\[-`{-~]|[^ \t\n\r!-/:-@\[-`{-~]+"


def pretokenize(text: str) -> list[str]:
    """The words of `text` (the rule in the module docstring); joined, they give `text` back."""
    return re.findall(WORD, text)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte: bytes 33..126, 161..172 and 174..255 stand for themselves
    (`chr(b)`); the other 68 bytes, in increasing order, get chr(256), chr(257), ... (tokenizer.json spells
    tokens with these)."""
    kept = [*range(33, 127), *range(161, 173), *range(174, 256)]
    others = [b for b in range(256) if b not in kept]
    return {**{b: chr(b) for b in kept}, **{b: chr(256 + n) for n, b in enumerate(others)}}


class BPETokenizer:
    """Special tokens, the 256 bytes and the merges (the ids in the module docstring).

    Attributes (minitrain/data/bpe_json.py and the checker read them): `special_tokens`, the list given;
    `vocab[i]`, the bytes of id i (a special token's: its UTF-8 text); `merges[k] = (left_id, right_id)`, the
    pair that made id `S + 256 + k`; `vocab_size = S + 256 + len(merges)`.
    """

    def __init__(self, merges: Sequence[tuple[int, int]], special_tokens: Sequence[str] = ()) -> None:
        """A tokenizer with these `merges` (in the order learned) and `special_tokens`; a merge must name ids
        that exist before it (bytes or earlier merges), and the specials must be distinct and non-empty."""
        self.special_tokens = list(special_tokens)
        if len(set(self.special_tokens)) != len(self.special_tokens) or "" in self.special_tokens:
            raise UserError(f"special tokens must be distinct and non-empty, got {self.special_tokens!r}")
        order = sorted(range(256), key=lambda b: bytes_to_unicode()[b])
        self.vocab: list[bytes] = [s.encode() for s in self.special_tokens] + [bytes([b]) for b in order]
        self.merges = [(int(a), int(b)) for a, b in merges]
        for left, right in self.merges:
            if not (len(self.special_tokens) <= left < len(self.vocab) and len(self.special_tokens) <= right
                    < len(self.vocab)):
                raise UserError(f"merge ({left}, {right}) names an id that is not a byte or an earlier merge")
            self.vocab.append(self.vocab[left] + self.vocab[right])
        self.rank = {pair: k for k, pair in enumerate(self.merges)}
        self.vocab_size = len(self.vocab)
        self._byte_id = {b: len(self.special_tokens) + i for i, b in enumerate(order)}
        longest_first = sorted(self.special_tokens, key=len, reverse=True)
        self._specials = re.compile("|".join(map(re.escape, longest_first))) if self.special_tokens else None

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, special_tokens: Sequence[str] = ()) -> BPETokenizer:
        """Learn merges from `texts` until there are `vocab_size` ids (or no pair is left): count the pairs
        inside each word weighted by the word's count, merge the most frequent, ties to the smallest
        (left id, right id). `vocab_size` must hold the specials and the 256 bytes."""
        tokenizer = cls([], special_tokens)
        if vocab_size < tokenizer.vocab_size:
            raise UserError(f"vocab_size {vocab_size} is below the {len(special_tokens)} special tokens + 256 bytes "
                            f"= {tokenizer.vocab_size}")
        counts = Counter(word for text in texts for word in pretokenize(text))
        words = [[tokenizer._byte_id[b] for b in word.encode()] for word in counts]
        frequency = list(counts.values())
        merges: list[tuple[int, int]] = []
        while tokenizer.vocab_size + len(merges) < vocab_size:
            pairs: Counter[tuple[int, int]] = Counter()
            for word, n in zip(words, frequency, strict=True):
                for pair in pairwise(word):
                    pairs[pair] += n
            if not pairs:
                break
            best = min(pairs, key=lambda pair: (-pairs[pair], pair))
            new_id = tokenizer.vocab_size + len(merges)
            merges.append(best)
            words = [_merge(word, best, new_id) for word in words]
        return cls(merges, special_tokens)

    def encode(self, text: str) -> list[int]:
        """The ids of `text`: special tokens whole, every other word's bytes merged by rank."""
        ids: list[int] = []
        start = 0
        for special in self._specials.finditer(text) if self._specials else ():
            ids += self._encode_ordinary(text[start : special.start()])
            ids.append(self.special_tokens.index(special.group()))
            start = special.end()
        return ids + self._encode_ordinary(text[start:])

    def _encode_ordinary(self, text: str) -> list[int]:
        ids: list[int] = []
        for word in pretokenize(text):
            symbols = [self._byte_id[b] for b in word.encode()]
            while len(symbols) > 1:
                ranked = [pair for pair in pairwise(symbols) if pair in self.rank]
                if not ranked:
                    break
                best = min(ranked, key=self.rank.__getitem__)
                symbols = _merge(symbols, best, len(self.special_tokens) + 256 + self.rank[best])
            ids += symbols
        return ids

    def encode_line(self, text: str) -> list[int]:
        """`[<bos>] + encode(text) + [<eos>]` (the line a language model trains on; needs those two specials)."""
        return [self.bos_id, *self.encode(text), self.eos_id]

    @property
    def pad_id(self) -> int:
        """The id of the special token `<pad>` (a UserError when there is none)."""
        return self._special_id("<pad>")

    @property
    def bos_id(self) -> int:
        """The id of the special token `<bos>` (a UserError when there is none)."""
        return self._special_id("<bos>")

    @property
    def eos_id(self) -> int:
        """The id of the special token `<eos>` (a UserError when there is none)."""
        return self._special_id("<eos>")

    def _special_id(self, token: str) -> int:
        if token not in self.special_tokens:
            raise UserError(f"this tokenizer has no {token} special token (it has {self.special_tokens})")
        return self.special_tokens.index(token)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids`: every token's bytes (a special token's own text) joined, then read as UTF-8."""
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise UserError(f"token ids {bad} out of range for a vocabulary of {self.vocab_size}")
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")


def _merge(symbols: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """`symbols` with every occurrence of `pair` replaced by `new_id`, left to right, without overlap."""
    out: list[int] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out
