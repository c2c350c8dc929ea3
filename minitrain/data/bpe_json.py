"""A byte-level BPE tokenizer (bpe.py) as the `tokenizers` library's `tokenizer.json`, and back.

    save_bpe(tokenizer, "tokenizer.json")      # tokenizers.Tokenizer.from_file reads it and encodes alike
    tokenizer = load_bpe("tokenizer.json")

The file says what bpe.py does in `tokenizers`' words: the special tokens are added tokens (never split); the
pre-tokenizer is a Split with bpe.py's word rule (each match its own word) followed by ByteLevel without its
own regex (bytes to their printable stand-ins, `bytes_to_unicode`); the model is BPE with the vocabulary
(token -> id) and the merges, both spelt in those stand-ins. Only the names bpe.py's lab lists are used, so a
student's tokenizer saves the same way.
"""

from __future__ import annotations

import os

from minitrain.common.errors import BAD_INPUT, UserError
from minitrain.common.io import atomic_write_json, read_json_object
from minitrain.data.bpe import BPETokenizer, bytes_to_unicode

WORD = r"[ \t\n\r]+|[!-/:-@\[-`{-~]|[^ \t\n\r!-/:-@\[-`{-~]+"  # bpe.py's word rule (its docstring)
PRE_TOKENIZER = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": WORD}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
DECODER = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}


def token_names(tokenizer: BPETokenizer) -> list[str]:
    """Each id's name in tokenizer.json: a special token's own text, else its bytes' printable stand-ins."""
    spell = bytes_to_unicode()
    specials = len(tokenizer.special_tokens)
    return [tokenizer.special_tokens[i] if i < specials else "".join(spell[b] for b in token)
            for i, token in enumerate(tokenizer.vocab)]


def save_bpe(tokenizer: BPETokenizer, path: str | os.PathLike) -> None:
    names = token_names(tokenizer)
    atomic_write_json(path, {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, s in enumerate(tokenizer.special_tokens)],
        "normalizer": None, "pre_tokenizer": PRE_TOKENIZER, "post_processor": None, "decoder": DECODER,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {name: i for i, name in enumerate(names)},
                  "merges": [[names[a], names[b]] for a, b in tokenizer.merges]},
    })


def load_bpe(path: str | os.PathLike) -> BPETokenizer:
    """Read a tokenizer.json written by `save_bpe`, or by `tokenizers` with the same pre-tokenizer and ids in
    bpe.py's order (specials, the 256 bytes, one per merge); anything else is a UserError naming the file."""
    obj = read_json_object(path, "tokenizer file")
    model = obj.get("model")
    if not isinstance(model, dict) or model.get("type") != "BPE" or obj.get("pre_tokenizer") != PRE_TOKENIZER:
        raise UserError(f"{path}: not a byte-level BPE tokenizer.json with minitrain's pre-tokenizer (bpe.py)",
                        BAD_INPUT)
    vocab, merges, added = model.get("vocab"), model.get("merges"), obj.get("added_tokens")
    if not isinstance(vocab, dict) or not isinstance(merges, list) or not isinstance(added, list):
        raise UserError(f"{path}: model.vocab must be an object, model.merges and added_tokens lists", BAD_INPUT)
    try:
        specials = [token["content"] for token in added]
        pairs = [(vocab[a], vocab[b]) for a, b in (m.split(" ") if isinstance(m, str) else m for m in merges)]
        tokenizer = BPETokenizer(pairs, specials)
    except (KeyError, TypeError, ValueError, UserError) as error:
        raise UserError(f"{path}: a merge or an added token is not usable ({error})", BAD_INPUT) from None
    if {name: i for i, name in enumerate(token_names(tokenizer))} != vocab:
        raise UserError(f"{path}: its ids are not the special tokens, the 256 bytes, then one per merge", BAD_INPUT)
    return tokenizer
