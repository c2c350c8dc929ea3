"""Make the committed SentencePiece tokenizer fixtures of tests/data/spm/ (the real Gemma GGUF is not in CI).

    PYTHONPATH=. /tmp/tv/bin/python scripts/make_spm_fixtures.py [--out tests/data/spm]

Run it with a scratch environment that has `sentencepiece`, `gguf` and `transformers` (never minitrain
dependencies). Two tiny BPE SentencePiece models with byte fallback are trained on the verb corpus's chat lines
(data/chat/verbs), the Spanish reading text (scripts/fixtures/eval-text.txt) and the English of theory/00 and 01,
640 pieces each, one per style:

    gemma   ids 0-3 <pad> <eos> <bos> <unk>, control <mask> <start_of_turn> <end_of_turn>, user-defined '\\n',
            '\\n\\n' and pieces of 2-4 spaces stored with real spaces and score -1000 (as Gemma 3's GGUF stores
            them), no prefix space, add_bos_token; general.architecture gemma3
    llama   ids 0-2 <unk> <s> </s> (Llama 2's), a prefix space, add_bos_token; general.architecture llama

For each style it writes
    {style}.gguf               a vocabulary-only GGUF in llama.cpp's layout (tokens, scores, token types,
                               the special ids, add_bos / add_eos / add_space_prefix), the gguf package's GGUFWriter
    {style}-hf/                tokenizer.json + tokenizer_config.json as transformers saves them, converted from the
                               SentencePiece model itself (`tokenizer.model`, not from the GGUF), with Gemma's chat
                               template for the gemma style
and ids.json: TEXTS (mixed: English, Spanish with accents, digits, emoji, runs of spaces, tabs and newlines,
special tokens) with, per style, the ids transformers gives from the GGUF (`AutoTokenizer.from_pretrained(dir,
gguf_file=...)`) and from the folder, with and without special tokens, their decodes, sentencepiece's own ids
(a second oracle, for the texts without special tokens) and the chat template's text of a conversation.
tests/data/test_sentencepiece.py checks minitrain against them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STYLES = ("gemma", "llama")
# A text holds {bos} / {eos}: each style's own spelling of them is put in.
TEXTS = [
    "The quick brown fox jumps over the lazy dog. It's 3:45 p.m.; isn't it?",
    "Conjuga «vender» en condicional, primera persona del plural: venderíamos. ¿Dónde está Ñuñoa? ¡Él comió!",
    "Números: 0 7 42 1234567890 3,14159 -2.5e10 2026-12-07 ½",
    "Emoji 🙂🚀, a flag 🇪🇸, a family 👩‍👩‍👧, ☕ and 漢字 Ελληνικά",
    "  two leading spaces, three   inside,\ttab,\t\ttwo tabs\n\nblank line\n\n\n   \n trailing  ",
    "{bos}<start_of_turn>user\nConjuga «comer» en presente.<end_of_turn>\n<start_of_turn>model\n"
    "como<end_of_turn>\n{eos}",
    "hablar|P1|hablo\nvender|C4|venderíamos\nañadir|I6|añadían",
    "", " ", "\n", "a  b", "ñ", "é", "🙂", "<unk> <mask> <pad>",
]
# Gemma 3's chat template as its tokenizer_config.json gives it (a system turn is folded into the first user turn;
# the assistant is "model"; a content may be a list of text and image parts).
GEMMA_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""
CHAT = [{"role": "system", "content": "Eres un profesor de español."},
        {"role": "user", "content": "Conjuga «vender» en condicional, primera persona del plural."},
        {"role": "assistant", "content": "venderíamos"},
        {"role": "user", "content": [{"type": "text", "text": " ¿Y en futuro? "}]},
        {"role": "assistant", "content": "  venderemos\n"}]


def corpus() -> list[str]:
    lines = []
    for split in ("test", "val"):
        for row in (ROOT / "data/chat/verbs" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
            lines += [m["content"] for m in json.loads(row)["messages"]]
    lines += (ROOT / "scripts/fixtures/eval-text.txt").read_text(encoding="utf-8").splitlines()
    for name in ("00-motivation.md", "01-autograd.md"):
        lines += (ROOT / "theory" / name).read_text(encoding="utf-8").splitlines()[:150]
    return [line for line in lines if line.strip()]


def train(style: str, folder: Path):
    import sentencepiece as spm

    gemma = style == "gemma"
    ids = dict(pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>",
               unk_piece="<unk>") if gemma else dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    extra = dict(control_symbols=["<mask>", "<start_of_turn>", "<end_of_turn>"],
                 user_defined_symbols=["\n", "\n\n", "▁▁", "▁▁▁", "▁▁▁▁"]) if gemma else {}
    prefix = str(folder / style)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus()), model_prefix=prefix, model_type="bpe", vocab_size=640,
        byte_fallback=True, character_coverage=1.0, split_digits=True, add_dummy_prefix=not gemma,
        remove_extra_whitespaces=False, normalization_rule_name="identity", allow_whitespace_only_pieces=True,
        num_threads=1, minloglevel=2, **ids, **extra)
    return spm.SentencePieceProcessor(model_file=prefix + ".model"), prefix + ".model"


def write_gguf(sp, style: str, path: Path) -> None:
    """The vocabulary as llama.cpp's converter writes a SentencePiece model (tokenizer.ggml.model = llama)."""
    import gguf

    gemma = style == "gemma"
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        piece, score = sp.id_to_piece(i), sp.get_score(i)
        kind = (gguf.TokenType.UNKNOWN if sp.is_unknown(i) else gguf.TokenType.CONTROL if sp.is_control(i)
                else gguf.TokenType.UNUSED if sp.is_unused(i) else gguf.TokenType.BYTE if sp.is_byte(i)
                else gguf.TokenType.NORMAL)
        if gemma and (piece in ("\n", "\n\n") or (set(piece) == {"▁"} and len(piece) > 1)):
            kind, score = gguf.TokenType.USER_DEFINED, -1000.0
            piece = piece.replace("▁", " ")  # Gemma 3's GGUF stores its pieces of spaces with real spaces
        if gemma and kind in (gguf.TokenType.CONTROL, gguf.TokenType.UNKNOWN):
            kind, score = gguf.TokenType.CONTROL, -1000.0  # Gemma 3's GGUF: <pad> <eos> <bos> <unk> are control
        tokens.append(piece)
        scores.append(score)
        types.append(int(kind))
    arch = "gemma3" if gemma else "llama"
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"minitrain spm fixture ({style})")
    # The few model fields transformers reads to pick a config class (no tensor is written).
    writer.add_context_length(128)
    writer.add_embedding_length(8)
    writer.add_block_count(1)
    writer.add_feed_forward_length(16)
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(sp.bos_id())
    writer.add_eos_token_id(sp.eos_id())
    writer.add_unk_token_id(sp.unk_id())
    if sp.pad_id() >= 0:
        writer.add_pad_token_id(sp.pad_id())
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(not gemma)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_folder(model_file: str, style: str, folder: Path) -> None:
    """tokenizer.json + tokenizer_config.json, converted by transformers from the SentencePiece model."""
    from transformers import GemmaTokenizer, LlamaTokenizer

    cls = GemmaTokenizer if style == "gemma" else LlamaTokenizer
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(model_file, Path(tmp) / "tokenizer.model")
        tok = cls.from_pretrained(tmp, add_bos_token=True, add_eos_token=False)
    if style == "gemma":
        tok.add_special_tokens({"additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]})
        tok.chat_template = GEMMA_TEMPLATE
    tok.save_pretrained(str(folder))
    for name in ("tokenizer.model", "special_tokens_map.json"):  # the folder is read from tokenizer.json
        (folder / name).unlink(missing_ok=True)
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config.pop("vocab_file", None)  # the temporary folder it was converted in
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def oracle(tok, sp, texts: list[str]) -> dict:
    rows = []
    for text in texts:
        with_special = tok(text)["input_ids"]
        plain = tok(text, add_special_tokens=False)["input_ids"]
        rows.append({"ids": with_special, "plain": plain, "decode": tok.decode(plain),
                     "decode_skip": tok.decode(with_special, skip_special_tokens=True)})
    return {"rows": rows}


def main() -> None:
    from transformers import AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests/data/spm")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"texts": TEXTS, "chat": CHAT}
    with tempfile.TemporaryDirectory() as tmp:
        for style in STYLES:
            sp, model_file = train(style, Path(tmp))
            write_gguf(sp, style, out / f"{style}.gguf")
            folder = out / f"{style}-hf"
            shutil.rmtree(folder, ignore_errors=True)
            write_folder(model_file, style, folder)
            specials = {"bos": sp.id_to_piece(sp.bos_id()), "eos": sp.id_to_piece(sp.eos_id())}
            texts = [t.format(**specials) for t in TEXTS]
            from_gguf = AutoTokenizer.from_pretrained(str(out), gguf_file=f"{style}.gguf")
            from_folder = AutoTokenizer.from_pretrained(str(folder))
            entry = {"specials": specials, "gguf": oracle(from_gguf, sp, texts),
                     "folder": oracle(from_folder, sp, texts),
                     "sentencepiece": [None if "<" in t else sp.encode(t) for t in texts]}
            if style == "gemma":
                entry["chat"] = from_folder.apply_chat_template(CHAT, tokenize=False)
                entry["chat_prompt"] = from_folder.apply_chat_template(CHAT[:4], tokenize=False,
                                                                       add_generation_prompt=True)
            result[style] = entry
    (out / "ids.json").write_text(json.dumps(result, ensure_ascii=False) + "\n", encoding="utf-8")
    for style in STYLES:
        same = [a == b for a, b in zip(result[style]["gguf"]["rows"], result[style]["folder"]["rows"], strict=True)]
        agree = [s is None or s == r["plain"] for s, r in zip(result[style]["sentencepiece"],
                                                              result[style]["gguf"]["rows"], strict=True)]
        print(f"{style}: GGUF and folder agree on {sum(same)}/{len(same)} texts, sentencepiece on "
              f"{sum(agree)}/{len(agree)}")


if __name__ == "__main__":
    main()
