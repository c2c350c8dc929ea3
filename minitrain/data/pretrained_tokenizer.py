"""A pretrained model's own tokenizer: the `tokenizers` library, fed from a Hugging Face folder or a GGUF's metadata.

A pretrained model's embedding rows mean the token ids of *its* tokenizer; any other ids would be read as other
words. So a fine-tune always uses the base's tokenizer, and this class only wraps the well-kept implementation
(Hugging Face `tokenizers`, in Rust) with the few things minitrain needs: ids in and out, the special ids, and
the chat template (minitrain/data/chat_template.py).

Two places hold a tokenizer:

    a Hugging Face folder   tokenizer.json (the whole pipeline, read as it is) + tokenizer_config.json (which
                            tokens are BOS/EOS/pad, the chat template; older folders: special_tokens_map.json,
                            chat_template.jinja); or GPT-2's vocab.json + merges.txt, its byte-level BPE
    a GGUF file             `tokenizer.ggml.*` metadata: the token strings, the BPE merges, each token's type,
                            the special ids, `tokenizer.chat_template` (read by minitrain/formats/gguf_read.py and
                            handed here as plain lists)

From a GGUF, the tokenizer is rebuilt by the record of its `tokenizer.ggml.model` in GGUF_TOKENIZER_MODELS, the way
transformers rebuilds it (`integrations/gguf/gguf_tokenizer_mapping.py`); any other model (bert, rwkv, t5) is
refused, naming the file and the value, before a weight is read:

    gpt2    byte-level BPE (GPT-2, SmolLM, Llama 3, Qwen2): a BPE over the GGUF's tokens and merges, GPT-2's
            byte-level pre-tokenizer (or the split regex of the `tokenizer.ggml.pre` families transformers knows),
            the byte-level decoder
    llama   SentencePiece BPE with byte fallback (Llama 2, Mistral, Gemma): data/sentencepiece.py

Either way control tokens (type 3) are special added tokens and user-defined ones (type 4) plain added tokens,
and BOS / EOS go in front / at the end as `tokenizer.ggml.add_bos_token` / `add_eos_token` say (a SentencePiece
file that does not say gets BOS, as in llama.cpp and transformers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers, processors
from tokenizers.models import BPE

from minitrain.common.errors import UserError
from minitrain.common.io import atomic_write_bytes, atomic_write_json, decode_utf8, parse_json, read_bytes
from minitrain.common.registry import Registry
from minitrain.data.chat_template import render_chat
from minitrain.data.sentencepiece import CONTROL, USER_DEFINED, sentencepiece_bpe

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
SPECIAL_NAMES = ("bos_token", "eos_token", "pad_token", "unk_token")
# What a folder's tokenizer is read from, and carried byte for byte into a run and its exports.
FOLDER_FILES = (TOKENIZER_FILE, CONFIG_FILE, "special_tokens_map.json", "chat_template.jinja", "vocab.json",
                "merges.txt")

# The split regexes transformers puts before the byte-level step for these `tokenizer.ggml.pre` values; any
# other value gets GPT-2's own regex (inside `ByteLevel`), as in transformers.
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_TOKENIZER_SPLITS = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "smaug-bpe", "dbrx"), _LLAMA3_SPLIT),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "megrez"), _QWEN2_SPLIT),
}


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> character table: printable bytes stand for themselves, the other 68 are moved to
    U+0100 and up, so every byte string is a string of visible characters (' ' is 'Ġ', '\\n' is 'Ċ')."""
    visible = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in visible}
    moved = (b for b in range(256) if b not in table)
    table.update({b: chr(256 + i) for i, b in enumerate(moved)})
    return dict(sorted(table.items()))


class PretrainedTokenizer:
    """A `tokenizers.Tokenizer` with its special tokens and chat template.

    `files` holds the bytes of the files it was read from ({name: bytes}); `save` writes those back unchanged,
    so an exported model carries the base's tokenizer byte for byte.
    """

    def __init__(self, tokenizer: Tokenizer, special: Mapping[str, str | None], chat_template: str | None = None,
                 files: Mapping[str, bytes] | None = None, where: str = "tokenizer",
                 template_where: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.special = {name: special.get(name) for name in SPECIAL_NAMES}
        self.chat_template = chat_template
        self.files = dict(files or {})
        self.where = where
        self.template_where = template_where or f"{where}: chat_template"  # where the template came from
        ids = {name: None if token is None else tokenizer.token_to_id(token) for name, token in self.special.items()}
        for name, token in self.special.items():
            if token is not None and ids[name] is None:
                raise UserError(f"{where}: {name} {token!r} is not in the vocabulary", 2)
        self.bos_id: int | None = ids["bos_token"]  # None where the tokenizer names no such token
        self.eos_id: int | None = ids["eos_token"]
        self.pad_id: int | None = ids["pad_token"]

    # --- ids ----------------------------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Every id the tokenizer can produce, added tokens included (the model may have more rows)."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of `text`; with `add_special_tokens`, the tokenizer's post-processor adds what it adds
        (BOS for Llama 3, nothing for SmolLM2). Special tokens written in the text are matched whole."""
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = False) -> str:
        """The conversation as the text the model was trained on (its own template; see chat_template.py)."""
        if self.chat_template is None:
            raise UserError(f"{self.where}: this tokenizer has no chat template, so chat data cannot be written for "
                            "it; use text or prompt/completion records", 2)
        return render_chat(self.chat_template, messages, add_generation_prompt, self.special, self.template_where)

    def turn_end_id(self) -> int | None:
        """The special token the chat template closes an assistant turn with (ChatML's <|im_end|>, Gemma's
        <end_of_turn>, Llama 3's <|eot_id|>), found by rendering a one-answer conversation: a chat answer ends
        there, which is EOS for some templates and not for others (Gemma's EOS is <eos>). None without a template
        or where the template writes no special token after the answer."""
        if self.chat_template is None:
            return None
        chat = [{"role": "user", "content": "?"}, {"role": "assistant", "content": "!"}]
        try:
            answer = self.apply_chat_template(chat)[len(self.apply_chat_template(chat[:1], True)):]
        except UserError:  # a template that wants another conversation (a system turn first)
            return None
        special = {i for i, t in self.tokenizer.get_added_tokens_decoder().items() if t.special}
        return next((i for i in self.encode(answer) if i in special), None)

    # --- reading ------------------------------------------------------------------------------------------------

    @classmethod
    def from_folder(cls, path: str | Path, defaults: Mapping[str, str] | None = None) -> PretrainedTokenizer:
        """The tokenizer of a Hugging Face model folder, as transformers reads it: tokenizer.json, or GPT-2's
        vocab.json + merges.txt (a byte-level BPE). `defaults`: special tokens the folder's files do not name
        (GPT-2's `<|endoftext|>`, transformers' GPT2Tokenizer default)."""
        folder = Path(path)
        files = {name: read_bytes(folder / name, "tokenizer file") for name in FOLDER_FILES
                 if (folder / name).is_file()}
        config = _json_object(files, CONFIG_FILE, folder)
        special_map = _json_object(files, "special_tokens_map.json", folder)
        special = {name: _token_text(config.get(name, special_map.get(name, (defaults or {}).get(name))))
                   for name in SPECIAL_NAMES}
        where = str(folder / TOKENIZER_FILE)
        if TOKENIZER_FILE in files:
            try:
                tokenizer = Tokenizer.from_str(decode_utf8(files[TOKENIZER_FILE], where, "tokenizer file"))
            except Exception as e:  # the Rust side raises a bare Exception for a malformed pipeline
                raise UserError(f"{where}: not a tokenizer the `tokenizers` library can read ({e})", 2) from None
        elif {"vocab.json", "merges.txt"} <= files.keys():
            where = str(folder / "merges.txt")
            vocab = _json_object(files, "vocab.json", folder)
            if not all(isinstance(i, int) and not isinstance(i, bool) for i in vocab.values()):
                raise UserError(f"{folder / 'vocab.json'}: must map tokens to integer ids", 2)
            lines = decode_utf8(files["merges.txt"], where, "merges file").splitlines()
            tokenizer = byte_level_bpe(vocab, [m for m in lines if m and not m.startswith("#version")], where)
            tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True)
                                          for t in dict.fromkeys(special.values()) if t in vocab])
        else:
            raise UserError(f"{folder}: no tokenizer.json (nor GPT-2's vocab.json + merges.txt). A fine-tune must "
                            "use the base's own tokenizer (save it with transformers' "
                            "`AutoTokenizer.from_pretrained(...).save_pretrained(folder)`)", 2)
        template, template_where = config.get("chat_template"), f"{folder / CONFIG_FILE}: chat_template"
        if isinstance(template, list):  # several named templates: transformers' default is "default"
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default")
        if "chat_template.jinja" in files:  # newer transformers save the template beside the config
            template_where = str(folder / "chat_template.jinja")
            template = decode_utf8(files["chat_template.jinja"], template_where, "chat template")
        if template is not None and not isinstance(template, str):
            raise UserError(f"{folder / CONFIG_FILE}: chat_template must be a string", 2)
        return cls(tokenizer, special, template, files, where, template_where)

    @classmethod
    def from_gguf_fields(cls, tokens: Sequence[str], merges: Sequence[str], token_types: Sequence[int],
                         bos_id: int | None, eos_id: int | None, pad_id: int | None, chat_template: str | None,
                         model: str | None = "gpt2", pre: str | None = None, unk_id: int | None = None,
                         add_bos: bool | None = None, add_eos: bool = False, add_space_prefix: bool | None = None,
                         scores: Sequence[float] = (), where: str = "GGUF tokenizer") -> PretrainedTokenizer:
        """The tokenizer a GGUF's `tokenizer.ggml.*` fields describe, built by the record of its `model` in
        GGUF_TOKENIZER_MODELS (see the module docstring); `add_bos` / `add_space_prefix` None: the file does not
        say, and the record's default (llama.cpp's) holds. `scores` are not used (SentencePiece's merges rank by
        position, data/sentencepiece.py): they are read so that a GGUF written again keeps them."""
        if model not in GGUF_TOKENIZER_MODELS:
            raise UserError(f"{where}: tokenizer.ggml.model = {model!r}: minitrain builds the tokenizers of "
                            f"{' and '.join(map(repr, GGUF_TOKENIZER_MODELS))} GGUF files only (byte-level BPE, "
                            "SentencePiece); a Hugging Face folder's tokenizer.json is read as it is", 2)
        kind = GGUF_TOKENIZER_MODELS[model]
        types = list(token_types) or [1] * len(tokens)  # no types given: every token is a normal one
        if len(types) != len(tokens):
            raise UserError(f"{where}: {len(types)} token types for {len(tokens)} tokens", 2)

        def token(i: int | None, name: str) -> str | None:
            if i is None:
                return None
            if not 0 <= i < len(tokens):
                raise UserError(f"{where}: tokenizer.ggml.{name} {i} is outside the vocabulary ({len(tokens)})", 2)
            return tokens[i]

        special = {"bos_token": token(bos_id, "bos_token_id"), "eos_token": token(eos_id, "eos_token_id"),
                   "pad_token": token(pad_id, "padding_token_id"), "unk_token": token(unk_id, "unknown_token_id")}
        prefix = kind.add_space_prefix if add_space_prefix is None else add_space_prefix
        tokenizer = kind.build(tokens, merges, types, pre, special["unk_token"], prefix, where)
        bos = special["bos_token"] if (kind.add_bos if add_bos is None else add_bos) else None
        eos = special["eos_token"] if add_eos else None
        if bos is not None or eos is not None:  # transformers' template: [BOS] $A [EOS], each end if the file says
            single = " ".join(t for t in (bos, "$A", eos) if t is not None)
            tokenizer.post_processor = processors.TemplateProcessing(
                single=single, pair=f"{single} {single.replace('$A', '$B')}",
                special_tokens=[(t, tokenizer.token_to_id(t)) for t in dict.fromkeys((bos, eos)) if t is not None])
        return cls(tokenizer, special, chat_template, None, where, f"{where}: tokenizer.chat_template")

    # --- writing ------------------------------------------------------------------------------------------------

    def save(self, folder: str | Path) -> None:
        """tokenizer.json + tokenizer_config.json (and the other files it was read from), for transformers'
        `AutoTokenizer.from_pretrained(folder)`. Files read from a folder are written back byte for byte."""
        folder = Path(folder)
        for name, data in self.files.items():
            atomic_write_bytes(folder / name, data)
        if TOKENIZER_FILE not in self.files:
            atomic_write_bytes(folder / TOKENIZER_FILE, self.tokenizer.to_str(pretty=True).encode("utf-8"))
        if CONFIG_FILE not in self.files:
            config: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast",
                                      "clean_up_tokenization_spaces": False,
                                      **{k: v for k, v in self.special.items() if v is not None}}
            if self.chat_template is not None:
                config["chat_template"] = self.chat_template
            atomic_write_json(folder / CONFIG_FILE, config)


def byte_level_bpe(vocab: dict[str, int], merges: Sequence[str], where: str, split: str | None = None) -> Tokenizer:
    """A byte-level BPE over `vocab` and `merges` ("a b" lines) as transformers builds GPT-2's: no prefix space,
    GPT-2's own split regex inside the byte-level step unless `split` replaces it, the byte-level decoder."""
    pairs = []
    for line, merge in enumerate(merges):
        parts = merge.split(" ")
        if len(parts) != 2:
            raise UserError(f"{where}: merge {line} is {merge!r}, not two tokens separated by a space", 2)
        pairs.append((parts[0], parts[1]))
    try:
        tokenizer = Tokenizer(BPE(vocab=vocab, merges=pairs, dropout=None, continuing_subword_prefix="",
                                  end_of_word_suffix="", fuse_unk=False))
    except Exception as e:  # the Rust side raises a bare Exception ("Token `x` out of vocabulary")
        raise UserError(f"{where}: tokens and merges do not fit together ({e})", 2) from None
    if split is None:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def _byte_level_from_gguf(tokens: Sequence[str], merges: Sequence[str], types: Sequence[int], pre: str | None,
                         unk: str | None, add_space_prefix: bool, where: str) -> Tokenizer:
    """`tokenizer.ggml.model = gpt2`: the byte-level BPE over the GGUF's tokens and merges (module docstring)."""
    if not merges:
        raise UserError(f"{where}: a byte-level BPE GGUF without tokenizer.ggml.merges", 2)
    spelling = bytes_to_unicode()
    alphabet = set(spelling.values())
    # A token written in plain text (not in the byte alphabet) is spelled in it, as transformers does.
    vocab = {}
    for i, token in enumerate(tokens):
        key = token if set(token) <= alphabet else "".join(spelling[b] for b in token.encode("utf-8"))
        vocab[key] = i
    tokenizer = byte_level_bpe(vocab, merges, where, PRE_TOKENIZER_SPLITS.get(pre or ""))
    # A "control" token outside the byte alphabet is a llama.cpp mislabel; transformers skips it too.
    tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True)
                                  for t, kind in zip(tokens, types, strict=True) if kind == CONTROL
                                  and set(t) <= alphabet])
    user = [AddedToken(t, normalized=False, special=False)
            for t, kind in zip(tokens, types, strict=True) if kind == USER_DEFINED and t in vocab]
    if user:
        tokenizer.add_tokens(user)
    return tokenizer


@dataclass(frozen=True)
class GGUFTokenizerModel:
    """How the tokenizer of one `tokenizer.ggml.model` is rebuilt: `build(tokens, merges, types, pre, unk,
    add_space_prefix, where)` gives the pipeline with its added tokens; `add_bos` and `add_space_prefix` are what
    llama.cpp assumes where the file has no tokenizer.ggml.add_bos_token / add_space_prefix."""

    name: str
    build: Callable[..., Tokenizer]
    add_bos: bool
    add_space_prefix: bool


GGUF_TOKENIZER_MODELS: Registry[GGUFTokenizerModel] = Registry("GGUF tokenizer model", [
    GGUFTokenizerModel("gpt2", _byte_level_from_gguf, add_bos=False, add_space_prefix=False),  # GPT-2, Llama 3
    GGUFTokenizerModel("llama", lambda tokens, merges, types, pre, unk, prefix, where: sentencepiece_bpe(
        tokens, types, unk, prefix, where), add_bos=True, add_space_prefix=True),  # SentencePiece: Llama 2, Gemma
])


def _json_object(files: Mapping[str, bytes], name: str, folder: Path) -> dict[str, Any]:
    if name not in files:
        return {}
    where = str(folder / name)
    value = parse_json(decode_utf8(files[name], where, "tokenizer file"), where, "tokenizer file")
    if not isinstance(value, dict):
        raise UserError(f"{where}: must hold a JSON object", 2)
    return value


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or an AddedToken object {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None

