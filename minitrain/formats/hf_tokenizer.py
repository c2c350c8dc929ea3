"""The character vocabulary in the Hugging Face `tokenizers` format, written by hand (no new dependency).

A `tokenizer.json` is a pipeline of named parts; a character tokenizer needs only four of them:

    pre_tokenizer   Split on the regex [\\s\\S] (any one character), keeping each piece: "comí" -> c o m í
    model           WordLevel: a piece's id is its entry in the vocab, the same ids as `CharTokenizer`
    post_processor  TemplateProcessing: put <bos> in front, as minitrain's prompts start with BOS
    decoder         Fuse: join the pieces back with nothing between them

There is no normalizer (the text is used as it is) and no unknown token: `unk_token` names a token that is not
in the vocabulary, so an unknown character is an error, exactly as in `CharTokenizer.encode`.
`tokenizer_config.json` tells `transformers.AutoTokenizer` which tokens are special. `char_pretrained` holds the
three files of an export (vocab.json, tokenizer.json, tokenizer_config.json) as the `PretrainedTokenizer` a Hugging
Face folder of the Llama family is written with (hub/pretrained.export_hf_folder) and read back as;
`char_tokenizer_of` finds the character vocabulary in such a tokenizer again.
"""

from __future__ import annotations

import json
from typing import Any

from tokenizers import Tokenizer

from minitrain.common.errors import UserError
from minitrain.data.pretrained_tokenizer import CONFIG_FILE, TOKENIZER_FILE, PretrainedTokenizer
from minitrain.data.tokenizer import BOS, EOS, PAD, SPECIALS, VOCAB_FORMAT, CharTokenizer

UNKNOWN = "<unk>"  # deliberately absent from the vocabulary: encoding an unknown character fails loudly


def tokenizer_json(tokenizer: CharTokenizer) -> dict[str, Any]:
    """The contents of tokenizer.json for `tokenizer`."""
    vocab = {token: i for i, token in enumerate([*SPECIALS, *tokenizer.chars])}
    bos = {"SpecialToken": {"id": BOS, "type_id": 0}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for t in SPECIALS
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": r"[\s\S]"}, "behavior": "Isolated",
                          "invert": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {BOS: {"id": BOS, "ids": [vocab[BOS]], "tokens": [BOS]}},
        },
        "decoder": {"type": "Fuse"},
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": UNKNOWN},
    }


def tokenizer_config(max_length: int) -> dict[str, Any]:
    """tokenizer_config.json: the fast tokenizer class and its special tokens."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "model_max_length": max_length,
        "clean_up_tokenization_spaces": False,
    }


def char_pretrained(tokenizer: CharTokenizer, max_length: int) -> PretrainedTokenizer:
    """`tokenizer` as a PretrainedTokenizer over tokenizer.json, whose `save` writes the export's three files."""
    spec = tokenizer_json(tokenizer)
    files = {name: (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
             for name, obj in (("vocab.json", tokenizer.as_json()), (TOKENIZER_FILE, spec),
                               (CONFIG_FILE, tokenizer_config(max_length)))}  # the bytes atomic_write_json writes
    return PretrainedTokenizer(Tokenizer.from_str(json.dumps(spec)), {"bos_token": BOS, "eos_token": EOS,
                               "pad_token": PAD}, files=files, where="minitrain's character vocabulary")


def char_tokenizer_of(tokenizer: Any) -> CharTokenizer | None:
    """The character vocabulary a PretrainedTokenizer carries in its vocab.json (`char_pretrained`), else None."""
    try:
        obj = json.loads(getattr(tokenizer, "files", {}).get("vocab.json", b"null"))
        return CharTokenizer(obj["chars"]) if isinstance(obj, dict) and obj.get("format") == VOCAB_FORMAT else None
    except (ValueError, KeyError, TypeError, UserError):  # GPT-2's vocab.json, or a damaged one: not ours
        return None
