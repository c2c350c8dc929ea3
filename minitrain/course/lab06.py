"""Lab 06's checker: a byte-level BPE tokenizer (minitrain/data/bpe.py: `pretokenize`, `bytes_to_unicode`,
`BPETokenizer`), graded against the `tokenizers` library trained on the same corpus with the same settings.

The checks run in the checker's process and call the student's code in the child (checks.py `here`). The
training checks each use a corpus of a few words built so that one typical mistake (merging across word edges,
counting each distinct word once, another tie-break, counting `aaa`'s pair once) learns a different first merge,
and the reason names the mistake. Training is also compared with the library merge by merge on words where
nothing but the counting of pairs, merges and ids can differ (a word's last pair never counted, one merge too
many or too few, an id that never advances), naming the first differing merge; a first-merge check that sees a
wrong merge asks it first, so that its reason and hint name an off-by-one rather than the item's own mistake.
Then the whole of training is compared with `tokenizers`' BpeTrainer (the verb corpus, and a corpus of ties and
multi-byte UTF-8), encoding with `tokenizers`' BPE model, decoding by a round trip of seeded random UTF-8
strings, and saving by `tokenizers.Tokenizer.from_file` reading the file.
"""

from __future__ import annotations

import json
import random
import tempfile
from functools import cache
from pathlib import Path

from minitrain.common.paths import course_file
from minitrain.course.checks import Checklist, Failed
from minitrain.data.bpe import BPETokenizer as Reference  # the library's: the yardstick for the unit checks
from minitrain.data.bpe import bytes_to_unicode as reference_stand_ins
from minitrain.data.bpe import pretokenize as reference_pretokenize
from minitrain.data.bpe_json import WORD, save_bpe

CHECKS = Checklist(here=True)
BPE = "minitrain/data/bpe.py"
SPECIALS = ["<pad>", "<bos>", "<eos>"]
BASE = len(SPECIALS) + 256  # the ids before the first merge
VERB_LINES = 4000  # the first lines of the training split: every tense of the first verbs, ~1 s to train
VERB_MERGES = 60
ADVERSARIAL = ["aaa aaaa aaaaa", "ba ab ba ab", "à é à é", "ñandú ñu ñoño", "日本語 日本 本日", "🙂🙂 🙃🙂",
               "a,b;c:d", "  \t\nx\r\n", "zz yy xx ww", "AB ab Ab aB"]
PROBES = ["hablar|P1|hablo", "comer|I3|comía", "¿qué tal? ñandú 日本🙂 aaa", "a  b\t\nc", "<bos>vivir|P2|vives<eos>",
          "x<eos>y<bos", "<pad><pad>", ""]


def _tokenizer(lab):
    return lab.module(BPE).BPETokenizer


def _shown(pairs) -> list[str]:
    """Merges as `'a' + 'b'`: a byte as itself, a merged token by its bytes' stand-ins; each id read as `pairs`
    (the merges in order, from the library's fresh vocabulary) makes it, `id N` for an id none makes."""
    vocab, spell = list(Reference([], SPECIALS).vocab), reference_stand_ins()
    for pair in pairs:
        vocab.append(b"".join(vocab[i] if 0 <= i < len(vocab) else b"?" for i in pair))

    def name(i: int) -> str:
        if not 0 <= i < len(vocab):
            return f"id {i}"
        return repr(bytes(vocab[i]).decode("utf-8", "replace")) if i < BASE else \
            repr("".join(spell[b] for b in vocab[i]))

    return [" + ".join(map(name, pair)) for pair in pairs]


def _first_merge(lab, texts: list[str], merges: int = 1) -> tuple[list, list]:
    """The student's first `merges` merges on `texts`, and the library's."""
    theirs = [tuple(p) for p in _tokenizer(lab).train(texts, BASE + merges, SPECIALS).merges]
    ours = Reference.train(texts, BASE + merges, SPECIALS).merges
    if theirs != ours:
        _miscounted(lab)
    return theirs, ours


def _byte(b: int) -> int:
    return Reference([], SPECIALS)._byte_id[b]


@CHECKS.check("pretokenize cuts text into whitespace runs, single punctuation marks and runs of anything else",
              hint=f"re.findall(r'{WORD}', text): a merge never crosses the edge of one of these words")
def _pretokenize(lab):
    cut = lab.module(BPE).pretokenize
    for text in ["caminar|P1|camino", "¿Qué tal?  Bien.\n", "a,,b 日本語", ""]:
        got, want = list(cut(text)), reference_pretokenize(text)
        if got != want:
            raise Failed(f"pretokenize({text!r}) gave {got}; expected {want}")


@CHECKS.check("bytes_to_unicode gives GPT-2's printable stand-in for each of the 256 bytes",
              hint="bytes 33..126, 161..172 and 174..255 stand for chr(b); the 68 others, in increasing order, get "
                   "chr(256), chr(257), ...")
def _stand_ins(lab):
    got, want = dict(lab.module(BPE).bytes_to_unicode()), reference_stand_ins()
    wrong = sorted(b for b in range(256) if got.get(b) != want[b])
    if wrong:
        b = wrong[0]
        raise Failed(f"byte {b} stands for {got.get(b)!r}; expected {want[b]!r} ({len(wrong)} bytes are wrong)")


@CHECKS.check("a tokenizer with no merges: the special tokens, then the 256 bytes in the order of their stand-ins",
              hint="vocab = [each special's UTF-8 bytes] + [bytes([b]) for b sorted by bytes_to_unicode()[b]]: the "
                   "order tokenizers gives its alphabet, so the ids agree")
def _fresh(lab):
    tokenizer = _tokenizer(lab)([], SPECIALS)
    want = Reference([], SPECIALS)
    if tokenizer.vocab_size != want.vocab_size or [bytes(v) for v in tokenizer.vocab] != want.vocab:
        got = [bytes(v) for v in tokenizer.vocab][:8]
        raise Failed(f"vocab_size {tokenizer.vocab_size}, vocab starts {got}; expected {want.vocab_size} ids "
                     f"starting {want.vocab[:8]}")
    if list(tokenizer.special_tokens) != SPECIALS or list(tokenizer.merges) != []:
        raise Failed(f"special_tokens {tokenizer.special_tokens}, merges {tokenizer.merges}; expected {SPECIALS}, []")


@CHECKS.check("train merges only inside words: it pretokenizes first", needs=(_fresh,),
              hint="count pairs inside each word of pretokenize(text), never over a whole line: `x|` can never be a "
                   "token, since `x` and `|` are two words")
def _inside_words(lab):
    got, want = _first_merge(lab, ["x|x|x|x", "ab ab"])
    if got != want:
        shown = _shown(got)
        why = ": it joins `x` and `|`, two words" if any("|" in name for name in shown) else ""
        raise Failed(f"on ['x|x|x|x', 'ab ab'] the first merge is {shown}; expected 'a' + 'b', the only pair inside "
                     f"a word{why}")


@CHECKS.check("train weights each word's pairs by how often the word occurs", needs=(_fresh,),
              hint="count the words first (Counter of pretokenize over the corpus), then add the word's COUNT to "
                   "each of its pairs: counting each distinct word once ignores the corpus's frequencies")
def _weighted(lab):
    got, want = _first_merge(lab, ["yz yz yz ab"])
    if got != want:
        once = [(_byte(ord("a")), _byte(ord("b")))]
        why = ": 'yz' occurs 3 times and 'ab' once, so your counts took each distinct word once" if got == once else ""
        raise Failed(f"on 'yz yz yz ab' the first merge is {_shown(got)}; expected 'y' + "
                     f"'z'{why}")


TIE_BREAK = ("on equal counts the pair with the smallest (left id, right id) wins — min over (−count, pair) — ids, not "
             "byte values, and not the pair seen first: that is tokenizers' rule")


@CHECKS.check("train breaks a tie by the smallest (left id, right id), as tokenizers does", needs=(_fresh,),
              hint=TIE_BREAK)
def _ties(lab):
    for text, first, why in [("ba ab", "'a' + 'b'", "'b' + 'a' was seen first, but ids (a, b) < (b, a)"),
                             ("à é", "the two bytes of 'é'", "as bytes C3 A0 < C3 A9, but byte A0's id comes after "
                                                             "A9's (it has no printable stand-in of its own)")]:
        got, want = _first_merge(lab, [text])
        if got != want:
            raise Failed(f"on {text!r} both pairs occur once and your first merge is "
                         f"{_shown(got)}; expected {first}: {why}")


@CHECKS.check("train counts overlapping pairs (aaa holds a + a twice) and merges left to right",
              needs=(_fresh,),
              hint="count every adjacent pair, pairwise(word), so `aaa` adds 2 to (a, a); merge left to right "
                   "without overlap, so `aaa` becomes `aa a`")
def _overlap(lab):
    got, want = _first_merge(lab, ["aaa AB"])
    if got != want:
        raise Failed(f"on 'aaa AB' the first merge is {_shown(got)}; expected 'a' + 'a': "
                     "(a, a) occurs twice in 'aaa', (A, B) once; counted once per word they tie and (A, B) wins")
    got, want = _first_merge(lab, ["aaa"], merges=2)
    if got != want:
        raise Failed(f"on 'aaa' the merges are {_shown(got)}; expected 'a' + 'a', then "
                     "'aa' + 'a': merging left to right makes 'aaa' into 'aa a'")


STEPS = ["abcde", "abcd", "abc", "ab"]  # one word each, no pair twice in a word, no tie at any merge
LAST_PAIR = ("count every adjacent pair of a word, its LAST one too: a word of n symbols has n − 1 pairs "
             "(pairwise(word), or i in range(len(word) − 1)); `ab` has one, (a, b)")
MERGE_COUNT = ("stop when the vocabulary has vocab_size ids: specials + 256 bytes + merges = vocab_size, so "
               "merges = vocab_size − S − 256 (a loop `while S + 256 + len(merges) < vocab_size`, `<` and not `<=`)")
NEXT_ID = ("each merge makes a NEW id, S + 256 + k for merge k: the merged symbol written into the words must take "
           "the next id every time (next_id += 1 after each merge)")
STEP_HINT = ("at every step count the pairs of every word afresh, merge the most frequent into a NEW id (S + 256 + "
             "the merges so far), and stop at vocab_size ids or when no pair is left")


def _named(merges: list, k: int) -> str:
    """Merge k of `merges`, spelled and by its ids: `'ab' + 'c' (ids 259, 69)`."""
    return f"{_shown(merges[: k + 1])[-1]} (ids {merges[k][0]}, {merges[k][1]})"


def _first_difference(got: list, want: list, size: int) -> tuple[str, str]:
    """The reason naming the first merge where `got` differs from `want` on STEPS, and the hint for its cause."""
    k = next((i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w), min(len(got), len(want)))
    if k >= len(want):
        return (f"on {STEPS} with vocab_size {size}, your merge {k} (new id {BASE + k}) is {_named(got, k)}: one "
                f"merge too many, since vocab_size {size} = {len(SPECIALS)} specials + 256 bytes + {len(want)} "
                "merges"), MERGE_COUNT
    if k >= len(got):
        last = size > BASE + len(want)  # the library stopped for want of a pair: so did theirs, too early
        why = f": {_shown(want)[-1]} is the last pair of {STEPS[0]!r}, the only one left" if last else \
            ": one merge too few"
        return (f"on {STEPS} with vocab_size {size}, your train made no merge {k} (new id {BASE + k}); expected "
                f"{_named(want, k)}{why}"), LAST_PAIR if last else MERGE_COUNT
    fixed = got == [tuple(min(i, BASE) for i in pair) for pair in want]
    why = f": id {BASE} is merge 0's, and every merge of yours wrote id {BASE} into the words" if fixed else ""
    return (f"on {STEPS} with vocab_size {size}, your merge {k} (new id {BASE + k}) is {_named(got, k)}; expected "
            f"{_named(want, k)}{why}"), NEXT_ID if fixed else STEP_HINT


def _merge_by_merge(lab) -> tuple[str, str] | None:
    """(reason, hint) for the first merge where the student's train differs from the library's on STEPS; None
    when none does."""
    for size in (BASE + 3, BASE + 10):  # three merges; then as many as there are pairs (four)
        got = [tuple(pair) for pair in _tokenizer(lab).train(STEPS, size, SPECIALS).merges]
        want = Reference.train(STEPS, size, SPECIALS).merges
        if got != want:
            return _first_difference(got, want, size)
    return None


def _miscounted(lab) -> None:
    """Fail with the merge-by-merge reason when it names a cause (a pair, a merge or an id miscounted): a first
    merge can be off for that reason as well as for the item's own. A train that crashes on STEPS is left to the
    merge-by-merge item, which reports it."""
    try:
        found = _merge_by_merge(lab)
    except Exception:
        return
    if found is not None and found[1] != STEP_HINT:
        raise Failed(*found)


@CHECKS.check("train, merge by merge: the most frequent pair each time, a new id for each, vocab_size ids in all",
              needs=(_fresh,), hint=STEP_HINT)
def _step_by_step(lab):
    found = _merge_by_merge(lab)
    if found is not None:
        raise Failed(*found)


@cache
def _corpora() -> dict[str, list[str]]:
    lines = course_file("data/processed/train.jsonl").read_text(encoding="utf-8").splitlines()
    return {"the verb corpus": [json.loads(line)["text"] for line in lines[:VERB_LINES]], "ties and UTF-8": ADVERSARIAL}


def reference_tokenizer(texts: list[str], vocab_size: int):
    """`tokenizers`' BPE trained with bpe.py's settings: the same word rule, the 256 bytes as the alphabet,
    the same special tokens, no minimum frequency."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(WORD), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, min_frequency=0,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def _merges_of(tokenizer) -> list[list[str]]:
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [m.split(" ") if isinstance(m, str) else m for m in merges]


@CHECKS.check("train learns tokenizers' merges, in its order, on the verb corpus and on a corpus of ties and UTF-8",
              needs=(_inside_words, _weighted, _ties, _overlap, _step_by_step),
              hint="count the pairs afresh after every merge (or update the counts exactly); stop at vocab_size ids "
                   "or when no pair is left")
def _like_tokenizers(lab):
    for name, texts in _corpora().items():
        size = BASE + VERB_MERGES
        theirs = _tokenizer(lab).train(texts, size, SPECIALS)
        spell = reference_stand_ins()
        names = ["".join(spell[b] for b in bytes(v)) for v in theirs.vocab]
        got = [[names[a], names[b]] for a, b in theirs.merges]
        want = _merges_of(reference_tokenizer(texts, size))
        if got != want:
            k = next((i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w), min(len(got), len(want)))
            yours, theirs = (got[k] if k < len(got) else "missing"), (want[k] if k < len(want) else "none")
            raise Failed(f"on {name} ({len(texts)} lines, vocab_size {size}) your merge {k} is {yours}; tokenizers' "
                         f"is {theirs} ({len(got)} merges against {len(want)})")


@cache
def _verb_merges() -> list[tuple[int, int]]:
    return Reference.train(_corpora()["the verb corpus"], BASE + VERB_MERGES, SPECIALS).merges


def _read_by_tokenizers(tokenizer):
    """`tokenizer` saved as tokenizer.json (bpe_json.save_bpe), and that file read by `tokenizers`."""
    from tokenizers import Tokenizer

    with tempfile.TemporaryDirectory() as folder:
        save_bpe(tokenizer, Path(folder) / "tokenizer.json")
        return Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))


def _with_verb_merges(lab):
    """The student's tokenizer built from the library's merges: encode and decode are graded on their own."""
    return _tokenizer(lab)(_verb_merges(), SPECIALS)


@CHECKS.check("special tokens are whole: never split, never merged, wherever they are in the text", needs=(_fresh,),
              hint="find the special tokens first (the longest first where one starts inside another), encode the "
                   "text between them as usual, and put each special's own id in between")
def _specials(lab):
    tokenizer = _with_verb_merges(lab)
    ordinary = tokenizer.encode  # the text between specials: the encode item grades it
    for text, parts in [("<bos>hablo<eos>", [1, "hablo", 2]), ("a<pad><pad>b", ["a", 0, 0, "b"]),
                        ("<eos", ["<", "eos"])]:
        want = [i for part in parts for i in (ordinary(part) if isinstance(part, str) else [part])]
        got = list(tokenizer.encode(text))
        if got != want:
            raise Failed(f"encode({text!r}) gave {got}; expected {want}")


@CHECKS.check("encode applies the merges by rank inside each word and gives tokenizers' ids", needs=(_fresh,),
              hint="per word: its bytes' ids, then again and again merge the adjacent pair LEARNED EARLIEST "
                   "(lowest rank), everywhere in the word, until no learned pair is left")
def _encode(lab):
    tokenizer = _with_verb_merges(lab)
    theirs = _read_by_tokenizers(Reference(_verb_merges(), SPECIALS))
    for text in [*PROBES, *_corpora()["the verb corpus"][::97]]:
        got, want = list(tokenizer.encode(text)), theirs.encode(text).ids
        if got != want:
            raise Failed(f"encode({text!r}) gave {got}; tokenizers gives {want}")


def random_texts(count: int, seed: int = 6) -> list[str]:
    """`count` seeded strings of 0-12 characters from ASCII, Latin, Greek, CJK, emoji and whitespace."""
    rng = random.Random(seed)
    ranges = [(0x20, 0x7E), (0x09, 0x0D), (0xA0, 0x17F), (0x370, 0x3FF), (0x4E00, 0x4E80), (0x1F600, 0x1F64F),
              (0x00, 0x1F), (0xE000, 0xE010)]
    return ["".join(chr(rng.randint(*rng.choice(ranges))) for _ in range(rng.randint(0, 12))) for _ in range(count)]


@CHECKS.check("decode(encode(s)) == s for 300 random UTF-8 strings: bytes are joined, then decoded once",
              needs=(_fresh,),
              hint="decode = b''.join(vocab[i] for i in ids).decode('utf-8', errors='replace'): a character's bytes "
                   "may lie in two tokens, so decoding each token on its own breaks it into U+FFFD")
def _round_trip(lab):
    tokenizer = _with_verb_merges(lab)
    for text in ["ñandú", "日本", "🙂", *random_texts(300)]:
        ids = list(tokenizer.encode(text))
        back = tokenizer.decode(ids)
        if back != text:
            raise Failed(f"decode(encode({text!r})) gave {back!r} (ids {ids})")
    if tokenizer.decode([1, *tokenizer.encode("ok"), 2]) != "<bos>ok<eos>":
        raise Failed("decode([<bos>] + encode('ok') + [<eos>]) should be '<bos>ok<eos>': a special decodes as its text")


@CHECKS.check("saved as tokenizer.json (bpe_json.save_bpe), your tokenizer is read by tokenizers and encodes alike",
              needs=(_fresh,),
              hint="save_bpe reads your tokenizer's .special_tokens, .vocab (the bytes of each id) and .merges "
                   "((left id, right id) per merge): keep them as the docstring says")
def _saved(lab):
    tokenizer = _tokenizer(lab).train(ADVERSARIAL, BASE + 20, SPECIALS)
    theirs = _read_by_tokenizers(tokenizer)
    for text in [*PROBES, *ADVERSARIAL]:
        got, want = list(tokenizer.encode(text)), theirs.encode(text).ids
        if got != want:
            raise Failed(f"tokenizers reading your file encodes {text!r} as {want}; your encode gives {got}")
