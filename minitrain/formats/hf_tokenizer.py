"""The character vocabulary in the Hugging Face `tokenizers` format, written by hand (no new dependency).

A `tokenizer.json` is a pipeline of named parts; a character tokenizer needs only four of them:

    pre_tokenizer   Split on the regex [\\s\\S] (any one character), keeping each piece: "comí" -> c o m í
    model           WordLevel: a piece's id is its entry in the vocab, the same ids as `CharTokenizer`
    post_processor  TemplateProcessing: put <bos> in front, as minitrain's prompts start with BOS
    decoder         Fuse: join the pieces back with nothing between them

There is no normalizer (the text is used as it is) and no unknown token: `unk_token` names a token that is not
in the vocabulary, so an unknown character is an error, exactly as in `CharTokenizer.encode`.
`tokenizer_config.json` tells `transformers.AutoTokenizer` which tokens are special.
"""

from __future__ import annotations

from typing import Any

from minitrain.data.tokenizer import BOS, EOS, PAD, SPECIALS, CharTokenizer

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
