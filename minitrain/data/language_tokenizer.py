"""The tokenizer of a language model on the verb corpus, as `data.tokenizer` says (config/data_section.py).

    tokenizer = language_tokenizer(cfg.data)

`char` (or no `data.tokenizer`): the character vocabulary of data.vocab_path (tokenizer.py). `bpe`: a byte-level
BPE (bpe.py) trained on the `text` of data.train_path's records up to `data.tokenizer.vocab_size` ids, with
tokenizer.py's three special tokens first, so PAD, BOS and EOS keep ids 0, 1 and 2. Training is deterministic, so
the same training file gives the same tokenizer in every run; it is kept per process (by the file's hash), since
the config check and the run both need it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from minitrain.common.io import sha256_of
from minitrain.data.bpe import BPETokenizer
from minitrain.data.corpus import load_records
from minitrain.data.tokenizer import SPECIALS, CharTokenizer


def language_tokenizer(data: Any) -> CharTokenizer | BPETokenizer:
    """The tokenizer `data` (a DataConfig) names; a UserError names the file that cannot be read."""
    if not data.uses_bpe:
        return CharTokenizer.load(data.vocab_path)
    return _trained(data.train_path, sha256_of(data.train_path), data.tokenizer.vocab_size)


@cache
def _trained(train_path: str, sha256: str, vocab_size: int) -> BPETokenizer:
    texts = [record["text"] for record in load_records(train_path)]
    return BPETokenizer.train(texts, vocab_size, SPECIALS)
