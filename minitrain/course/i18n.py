"""The course in the student's language: the checker's messages, the workspace README, the starters.

    tr = translator(language(), "lab03")   # "es" from MINITRAIN_LANG=es, LC_ALL, LC_MESSAGES or LANG = es_*
    tr("val PPL ended within 25 % of its best: this run does not overfit")
    # -> "la PPL de validación terminó a menos de un 25 % de su mejor valor: esta ejecución no sobreajusta"

The English text stays in the code, where it is written, and is the key: the checks raise, and `grade`
returns, English; only what is printed is translated, in the process that prints it. A catalogue is
minitrain/course/<language>/<name>.yaml (`common` for the checker's machinery and the `lab` command, `labNN`
for each lab), a list of entries

    - en: "val PPL ended within {} % of its best: this run does not overfit"
      es: "la PPL de validación terminó a menos de un {} % de su mejor valor: esta ejecución no sobreajusta"

where `{}` stands for a value the code puts in (a number, a path, another message). A printed text is matched
against the English templates, and each value found in it is translated in turn when it is a message too, so
"not run: fix first: <item>; <item>" names the items in Spanish. Of the templates that match, the first
(longest literal text first) that leaves no value in English wins. In the translation `{}` takes the values
in order; `{0}`, `{1}`... take them in another order, when Spanish needs it. A text no template matches is
printed as it is (scripts/lab_messages.py lists what a catalogue lacks). A lab's starter takes its docstrings
from <language>/labNN-starter.yaml, `{lab file: {name: {en_hash, <language>}}}` (`starter_docs`, starter.py).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from pathlib import Path

import yaml

LANGUAGES = ("en", "es")
VARIABLE = "MINITRAIN_LANG"
_FIELD = re.compile(r"\{(\d*)\}")
_EDGES = re.compile(r"(\s*)(.*?)(\s*)", re.DOTALL)
_WORDS = re.compile(r"[A-Za-z]{2,} [A-Za-z]{2,}")  # a value that holds words may be a message left in English
_DEPTH = 4  # how deeply values are translated inside values: messages nest two or three levels at most
_NUMBER = re.compile(r"(\s*[−-]?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(\s*)")  # 1,299.5: English's marks


def language(flag: str | None = None) -> str:
    """The language to print in: `flag` (`--lang`), else MINITRAIN_LANG, else the locale (LC_ALL, then
    LC_MESSAGES, then LANG, as POSIX orders them); "es" when the first one set starts with `es`, else "en"."""
    for value in (flag, *(os.environ.get(name) for name in (VARIABLE, "LC_ALL", "LC_MESSAGES", "LANG"))):
        if value:
            return "es" if value.lower().startswith("es") else "en"
    return "en"


@functools.cache
def catalogue(name: str, lang: str = "es") -> dict[str, str]:
    """{English template: translation} of minitrain/course/<lang>/<name>.yaml; {} when there is none."""
    path = Path(__file__).parent / lang / f"{name}.yaml"
    if not path.is_file():
        return {}
    entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    return {entry["en"]: entry[lang] for entry in entries}


@functools.cache
def starter_docs(lab: str, lang: str = "es") -> dict[str, dict[str, tuple[str, str]]]:
    """{lab file: {name: (en_hash, translation)}} of <lang>/labNN-starter.yaml (starter.py); {} when none."""
    path = Path(__file__).parent / lang / f"lab{lab}-starter.yaml"
    files = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return {f: {name: (e["en_hash"], e[lang]) for name, e in entries.items()} for f, entries in files.items()}


class Translator:
    """A callable text -> text over a set of entries (see the module docstring); without entries, the identity."""

    def __init__(self, entries: dict[str, str], numbers: Callable[[str], str] = str) -> None:
        self.entries, self.numbers = entries, numbers  # numbers: how a value that is a number is written
        by_length = sorted(entries, key=lambda en: -len(en.replace("{}", "")))
        self.patterns = [(re.compile("(.*?)".join(map(re.escape, en.split("{}"))), re.DOTALL), entries[en],
                          [i for i, literal in enumerate(en.split("{}")[1:-1], 1) if not literal])
                         for en in by_length if "{}" in en]
        # How a message that fills a `{}{}` can start: its own first words (": it ", " (the last step)").
        self.starts = tuple({en.split("{}")[0] for en in entries} - {""})

    def __call__(self, text: str) -> str:
        return self._translate(text, _DEPTH)[0] if self.entries and text else text

    def _translate(self, text: str, depth: int) -> tuple[str, int]:
        """(`text` translated, how many of the values in it are left in English); unchanged when no template
        matches. Of the templates that match, the first (longest literal text first) that leaves the fewest
        values in English wins: "<path> does not import: <message>" must not be read as "<...> — look for ..."."""
        if text in self.entries:
            return self.entries[text], 0
        best, left = text, None
        for pattern, translation, adjacent in self.patterns:
            match = pattern.fullmatch(text)
            if match is None:
                continue
            values = list(match.groups())
            for i in adjacent:  # `{}{}`: the second value is an optional message added at the end, or ""
                values[i - 1], values[i] = self._split(values[i - 1] + values[i])
            translated = [self._value(v, depth - 1) for v in values]
            english = sum(n for _, n in translated)
            if left is None or english < left:
                best, left = _fill(translation, [t for t, _ in translated]), english
            if not english:
                break
        return best, (1 if left is None and _WORDS.search(text) else left or 0)

    def _split(self, joined: str) -> tuple[str, str]:
        """Two values written side by side: the longest tail that is a message of its own goes second."""
        for k in range(len(joined)):
            tail = joined[k:]
            if tail.startswith(self.starts) and self._translate(tail, 1)[0] != tail:
                return joined[:k], tail
        return joined, ""

    def _value(self, value: str, depth: int) -> tuple[str, int]:
        """A value found in a message, translated when it is a message or a `; ` list of them; (text, how many
        pieces of it are left in English)."""
        if depth <= 0:
            return value, 0
        if _NUMBER.fullmatch(value):
            return self.numbers(value), 0
        translated, english = self._translate(value, depth)
        if translated != value:  # " in moving_average (...)": an entry of its own, spaces included
            return translated, english
        before, core, after = _EDGES.fullmatch(value).groups()
        if len(core) > 1 and core[0] == core[-1] and core[0] in "'\"":  # a quoted message: 'item name'
            before, core, after = before + core[0], core[1:-1], core[-1] + after
        translated, english = self._translate(core, depth)
        if translated == core and "; " in core:
            items = self._list(core.split("; "), depth)
            translated, english = "; ".join(t for t, _ in items), sum(n for _, n in items)
        return before + translated + after, english

    def _list(self, parts: list[str], depth: int) -> list[tuple[str, int]]:
        """The items of a `; ` list translated, an item that holds `; ` itself included (the longest first)."""
        out, i = [], 0
        while i < len(parts):
            for j in range(len(parts), i, -1):
                item = "; ".join(parts[i:j])
                translated = self._translate(item, depth)
                if translated[0] != item or j == i + 1:
                    out.append(translated)
                    i = j
                    break
        return out


def _fill(translation: str, values: list[str]) -> str:
    """`translation` with its `{}` (in order) or `{N}` fields replaced by `values`."""
    order = iter(range(len(values)))
    return _FIELD.sub(lambda m: values[int(m[1]) if m[1] else next(order)], translation)


def decimal_comma(number: str) -> str:
    """A number as Spanish writes it: "66.34" -> "66,34", "1,299" -> "1299", "49,152.5" -> "49 152,5" (the RAE
    groups digits by a space from five digits on, and marks the decimals with a comma)."""
    sign, whole, decimals, after = _NUMBER.fullmatch(number).groups()
    digits = whole.replace(",", "")
    if len(digits) > 4:
        digits = f"{int(digits):,}".replace(",", " ")
    return sign + digits + ("," + decimals if decimals is not None else "") + after


def translator(lang: str, *names: str) -> Callable[[str], str]:
    """The translator into `lang` over the catalogues `names` and `common` (English: the identity)."""
    entries: dict[str, str] = {}
    if lang != "en":
        for name in ("common", *names):
            entries.update(catalogue(name, lang))
    return Translator(entries, decimal_comma if lang == "es" else str)
