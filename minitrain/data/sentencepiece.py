"""A SentencePiece BPE vocabulary as a GGUF stores it (`tokenizer.ggml.model = llama`: Llama 2, Mistral, Gemma),
rebuilt as a `tokenizers` pipeline (the library does the encoding; nothing here tokenizes).

SentencePiece's BPE turns a text into pieces in three steps; each is one part of the pipeline:

    spaces         every ' ' is written '▁' (U+2581); with `add_space_prefix` one '▁' goes in front of the text
                   (not after a special token): "el sol" -> "▁el▁sol"                       (Metaspace)
    merges         adjacent pieces are joined, the pair whose joined piece ranks best first, until none joins
    byte fallback  a character no piece spells becomes its UTF-8 bytes, the pieces <0x00> .. <0xFF>:
                   '🙂' -> <0xF0> <0x9F> <0x99> <0x82>; without byte pieces, the unknown piece  (BPE byte_fallback)

A GGUF lists no merges for it: every cut of a piece p into two pieces of the vocabulary, l + r = p, is a merge,
and the merges rank by p's position in the file (SentencePiece writes its pieces best first, so for every
normal piece the position is the order of the scores), a longer l first among p's own cuts. The position, not
the score, because Gemma's GGUF scores its user-defined pieces of spaces ("  ", ids 138-167) -1000 though they
rank among the first (transformers ranks Gemma's by position too). Those pieces are stored with real spaces;
the text reaches the merges spelled with '▁', so they are spelled so too.

Decoding reverses it: '▁' -> ' ', byte pieces -> their UTF-8 text, joined, the prefix space dropped.
Unknown and control pieces (types 2, 3: <unk>, <bos>, <start_of_turn>) are special added tokens, matched whole in a
text; user-defined ones (type 4: '\\n', '[multimodal]') plain added tokens, matched whole too.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers
from tokenizers.models import BPE

from minitrain.common.errors import UserError

SPACE = "\u2581"  # '▁', SentencePiece's visible space
UNKNOWN, CONTROL, USER_DEFINED = 2, 3, 4  # llama.cpp's token types (1 normal, 5 unused, 6 byte)


def cut_merges(pieces: Sequence[str]) -> list[tuple[str, str]]:
    """Every (l, r) with l, r and l + r all pieces, best first: by the position of l + r, then longer l first."""
    known = set(pieces)
    return [(piece[:cut], piece[cut:]) for piece in pieces for cut in range(len(piece) - 1, 0, -1)
            if piece[:cut] in known and piece[cut:] in known]


def sentencepiece_bpe(tokens: Sequence[str], token_types: Sequence[int], unk: str | None, add_space_prefix: bool,
                      where: str) -> Tokenizer:
    """The pipeline of the module docstring over `tokens` (one per id) and their llama.cpp types."""
    pieces = [token.replace(" ", SPACE) if not token.strip(" ") else token for token in tokens]
    try:
        model = BPE(vocab={piece: i for i, piece in enumerate(pieces)}, merges=cut_merges(pieces), unk_token=unk,
                    fuse_unk=True, byte_fallback=True, dropout=None)
    except Exception as e:  # the Rust side raises a bare Exception
        raise UserError(f"{where}: not a vocabulary the `tokenizers` library can build ({e})", 2) from None
    tokenizer = Tokenizer(model)
    scheme = "first" if add_space_prefix else "never"
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme=scheme, split=False)
    steps = [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    tokenizer.decoder = decoders.Sequence([*steps, *[decoders.Strip(" ", 1, 0)] * add_space_prefix])
    tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True)
                                  for t, kind in zip(tokens, token_types, strict=True) if kind in (UNKNOWN, CONTROL)])
    user = [AddedToken(t, normalized=False, special=False)  # a piece of spaces is matched by the merges instead
            for t, p, kind in zip(tokens, pieces, token_types, strict=True) if kind == USER_DEFINED and t == p]
    if user:
        tokenizer.add_tokens(user)
    return tokenizer
