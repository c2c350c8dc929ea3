"""A model's tokenizer as a GGUF's `tokenizer.ggml.*` fields, and minitrain's character vocabulary back from them.

The fields are the keyword arguments of `PretrainedTokenizer.from_gguf_fields` (what formats/gguf_read.py reads):

    tokens         one string per id, 0 .. V-1 (V = the embedding's rows; unused rows padded as [PAD{i}])
    merges         the BPE merges, "left right", in rank order
    token_types    per id: 1 normal, 3 control (special), 4 user-defined (an added token), 5 unused
    scores         per id, SentencePiece's (kept as read; minitrain writes none for a byte-level BPE)
    bos_id, eos_id, pad_id, unk_id, chat_template, model ("gpt2": byte-level BPE, "llama": SentencePiece), pre,
    add_bos, add_eos, add_space_prefix (None: the file does not say)

A pretrained base's byte-level BPE (a `tokenizers` BPE model under a ByteLevel pre-tokenizer) gives them directly.
minitrain's character vocabulary ([<pad>, <bos>, <eos>, then the corpus's characters]) is written as a byte-level
BPE too, so that llama.cpp tokenizes text with it: a character is spelled in GPT-2's byte alphabet ('é' is the two
bytes C3 A9, spelled 'Ã©'), and a merge joins the bytes of each character of two or more bytes back into its one
token. Reading such a file, `char_vocab` recognises the layout and gives back the same `CharTokenizer`
(`gguf_tokenizer`: of any architecture). add_bos_token is written true: the model was trained with BOS first.
"""

from __future__ import annotations

import json
from typing import Any

from minitrain.common.errors import UserError
from minitrain.data.pretrained_tokenizer import (
    CONTROL,
    PRE_TOKENIZER_SPLITS,
    USER_DEFINED,
    PretrainedTokenizer,
    bytes_to_unicode,
)
from minitrain.data.tokenizer import SPECIALS, CharTokenizer
from minitrain.formats.hf_tokenizer import char_pretrained

NORMAL, UNUSED = 1, 5  # llama.cpp's token types (CONTROL 3 and USER_DEFINED 4 come from the tokenizer module)
_SPELLING = bytes_to_unicode()
_BYTES = {c: b for b, c in _SPELLING.items()}


def spell(text: str) -> str:
    """`text` in GPT-2's byte alphabet: each UTF-8 byte as its visible stand-in (' ' -> 'Ġ')."""
    return "".join(_SPELLING[b] for b in text.encode("utf-8"))


def char_fields(tokenizer: CharTokenizer, vocab_size: int) -> dict[str, Any]:
    """The fields of a character vocabulary; `vocab_size` is the model's (rows beyond the vocabulary are unused).
    add_bos_token is true: a character model trains on [BOS] + characters + [EOS] (`CharTokenizer.encode_line`),
    so llama.cpp must put BOS in front of a prompt as minitrain does."""
    tokens = [*SPECIALS, *(spell(c) for c in tokenizer.chars)]
    merges = []
    for c in tokenizer.chars:  # 'é' = 'Ã' + '©': one merge; a 3-byte character needs two, left to right
        spelled = spell(c)
        merges += [f"{spelled[:i]} {spelled[i]}" for i in range(1, len(spelled))]
    # llama.cpp refuses a BPE vocabulary without the merges key, and the writer drops an empty list: an ASCII-only
    # vocabulary gets one merge of two specials, which the tokenizer never meets (specials are matched whole).
    merges = merges or [f"{SPECIALS[1]} {SPECIALS[2]}"]
    types = [CONTROL] * len(SPECIALS) + [NORMAL] * len(tokenizer.chars)
    return _padded({"tokens": tokens, "merges": merges, "token_types": types, "bos_id": tokenizer.bos_id,
                    "eos_id": tokenizer.eos_id, "pad_id": tokenizer.pad_id, "unk_id": None, "chat_template": None,
                    "model": "gpt2", "pre": "gpt-2", "add_bos": True}, vocab_size)


def char_vocab(fields: dict[str, Any]) -> CharTokenizer | None:
    """The CharTokenizer a GGUF's tokenizer fields spell (see `char_fields`), or None when they are another vocab."""
    tokens = [t for t, kind in zip(fields["tokens"], fields["token_types"] or [], strict=False) if kind != UNUSED]
    if tuple(tokens[:len(SPECIALS)]) != SPECIALS:
        return None
    chars = []
    for token in tokens[len(SPECIALS):]:
        try:
            text = bytes(_BYTES[c] for c in token).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            return None
        if len(text) != 1:
            return None
        chars.append(text)
    try:
        return CharTokenizer(chars)
    except UserError:  # not sorted, repeated, too many: not a minitrain vocabulary
        return None


def gguf_tokenizer(fields: dict[str, Any], max_length: int) -> PretrainedTokenizer:
    """The tokenizer of a GGUF's fields: its character vocabulary (as its Hugging Face export has it,
    formats/hf_tokenizer.py) when they spell one (a BPE over them would lack the bytes its merges join), else the
    tokenizer of its tokenizer.ggml.model."""
    chars = char_vocab(fields)
    return PretrainedTokenizer.from_gguf_fields(**fields) if chars is None else char_pretrained(chars, max_length)


def bpe_fields(tokenizer: PretrainedTokenizer, vocab_size: int) -> dict[str, Any]:
    """The fields of a pretrained base's byte-level BPE; UserError naming what a GGUF cannot describe."""
    spec = json.loads(tokenizer.tokenizer.to_str())
    model = spec.get("model") or {}
    if model.get("type") != "BPE" or "ByteLevel" not in json.dumps(spec.get("pre_tokenizer")):
        raise UserError(f"export --format gguf: {tokenizer.where}: a {model.get('type')} tokenizer without GPT-2's "
                        "byte-level step; minitrain writes byte-level BPE vocabularies (tokenizer.ggml.model gpt2) "
                        "only: export a Hugging Face folder instead (--format hf)", 2)
    vocab = tokenizer.tokenizer.get_vocab(with_added_tokens=True)
    tokens: list[str | None] = [None] * (max(vocab.values(), default=-1) + 1)
    for token, i in vocab.items():
        tokens[i] = token
    added = {t["content"]: t.get("special", False) for t in spec.get("added_tokens") or []}
    types = [NORMAL if t not in added else CONTROL if added[t] else USER_DEFINED for t in tokens]
    holes = [i for i, t in enumerate(tokens) if t is None]
    for i in holes:  # an id no token has: llama.cpp needs one string per id
        tokens[i], types[i] = f"[PAD{i}]", UNUSED
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    if not merges:
        raise UserError(f"export --format gguf: {tokenizer.where}: a BPE tokenizer without merges", 2)
    probe = tokenizer.tokenizer.encode("a", add_special_tokens=True).ids
    return _padded({"tokens": tokens, "merges": merges, "token_types": types, "bos_id": tokenizer.bos_id,
                    "eos_id": tokenizer.eos_id, "pad_id": tokenizer.pad_id, "unk_id": _unk_id(tokenizer),
                    "chat_template": tokenizer.chat_template, "model": "gpt2", "pre": _pre_name(spec),
                    "add_bos": bool(probe) and probe[0] == tokenizer.bos_id}, vocab_size)


def _unk_id(tokenizer: PretrainedTokenizer) -> int | None:
    token = tokenizer.special["unk_token"]
    return None if token is None else tokenizer.tokenizer.token_to_id(token)


def _pre_name(spec: dict[str, Any]) -> str:
    """llama.cpp's `tokenizer.ggml.pre` for the tokenizer's split: the named regex it uses, SmolLM's digit split,
    else GPT-2's own."""
    text = json.dumps(spec.get("pre_tokenizer"))
    for name, regex in PRE_TOKENIZER_SPLITS.items():
        if json.dumps(regex)[1:-1] in text:
            return name
    return "smollm" if '"Digits"' in text else "gpt-2"


def _padded(fields: dict[str, Any], vocab_size: int) -> dict[str, Any]:
    """One token per embedding row: rows past the vocabulary get unused [PAD{i}] tokens (llama.cpp checks that
    the token list is as long as the embedding)."""
    n = len(fields["tokens"])
    if n > vocab_size:
        raise UserError(f"export --format gguf: the tokenizer has {n} tokens but the model only {vocab_size} "
                        "embedding rows", 2)
    fields["tokens"] = [*fields["tokens"], *(f"[PAD{i}]" for i in range(n, vocab_size))]
    fields["token_types"] = [*fields["token_types"], *[UNUSED] * (vocab_size - n)]
    return fields
