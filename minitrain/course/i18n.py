"""The course in the student's language: the checker's messages, the workspace README, the starter's header.

    tr = translator(language(), "lab03")   # "es" from MINITRAIN_LANG=es, LC_ALL, LC_MESSAGES or LANG = es_*
    tr("val PPL ended within 25 % of its best: this run does not overfit")
    # -> "la PPL de validación terminó a menos del 25 % de su mínimo: esta ejecución no sobreajusta"

The English text stays in the code, where it is written, and is the key: the checks raise, and `grade`
returns, English; only what is printed is translated, in the process that prints it. A catalogue is
minitrain/course/<language>/<name>.yaml (`common` for the checker's machinery and the `lab` command, `labNN`
for each lab), a list of entries

    - en: "val PPL ended within {} % of its best: this run does not overfit"
      es: "la PPL de validación terminó a menos del {} % de su mínimo: esta ejecución no sobreajusta"

where `{}` stands for a value the code puts in (a number, a path, another message). A printed text is matched
against the English templates (the longest literal text wins), and each value found in it is translated in
turn when it is a message too, so "not run: fix first: <item>; <item>" names the items in Spanish. In the
translation `{}` takes the values in order; `{0}`, `{1}`... take them in another order, when Spanish needs it.
A text no template matches is printed as it is (scripts/lab_messages.py lists what a catalogue lacks).
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
_DEPTH = 4  # how deeply values are translated inside values: messages nest two or three levels at most


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


class Translator:
    """A callable text -> text over a set of entries (see the module docstring); without entries, the identity."""

    def __init__(self, entries: dict[str, str]) -> None:
        self.entries = entries
        by_length = sorted(entries, key=lambda en: -len(en.replace("{}", "")))
        self.patterns = [(re.compile("(.*?)".join(map(re.escape, en.split("{}"))), re.DOTALL), entries[en],
                          [i for i, literal in enumerate(en.split("{}")[1:-1], 1) if not literal])
                         for en in by_length if "{}" in en]
        # How a message that fills a `{}{}` can start: its own first words (": it ", " (the last step)").
        self.starts = tuple({en.split("{}")[0] for en in entries} - {""})

    def __call__(self, text: str, depth: int = _DEPTH) -> str:
        if not self.entries or not text:
            return text
        if text in self.entries:
            return self.entries[text]
        for pattern, translation, adjacent in self.patterns:
            match = pattern.fullmatch(text)
            if match is not None:
                values = list(match.groups())
                for i in adjacent:  # `{}{}`: the second value is an optional message added at the end, or ""
                    values[i - 1], values[i] = self._split(values[i - 1] + values[i])
                return _fill(translation, [self._value(v, depth - 1) for v in values])
        return text

    def _split(self, joined: str) -> tuple[str, str]:
        """Two values written side by side: the longest tail that is a message of its own goes second."""
        for k in range(len(joined)):
            tail = joined[k:]
            if tail.startswith(self.starts) and self(tail, 1) != tail:
                return joined[:k], tail
        return joined, ""

    def _value(self, value: str, depth: int) -> str:
        """A value found in a message: translated when it is a message, or a `; ` list of them."""
        if depth <= 0:
            return value
        translated = self(value, depth)
        if translated != value:  # " in moving_average (...)": an entry of its own, spaces included
            return translated
        before, core, after = _EDGES.fullmatch(value).groups()
        if len(core) > 1 and core[0] == core[-1] and core[0] in "'\"":  # a quoted message: 'item name'
            before, core, after = before + core[0], core[1:-1], core[-1] + after
        translated = self(core, depth)
        if translated == core and "; " in core:
            translated = "; ".join(self._list(core.split("; "), depth))
        return before + translated + after

    def _list(self, parts: list[str], depth: int) -> list[str]:
        """The items of a `; ` list translated, an item that holds `; ` itself included (the longest first)."""
        out, i = [], 0
        while i < len(parts):
            for j in range(len(parts), i, -1):
                item = "; ".join(parts[i:j])
                translated = self(item, depth)
                if translated != item or j == i + 1:
                    out.append(translated)
                    i = j
                    break
        return out


def _fill(translation: str, values: list[str]) -> str:
    """`translation` with its `{}` (in order) or `{N}` fields replaced by `values`."""
    order = iter(range(len(values)))
    return _FIELD.sub(lambda m: values[int(m[1]) if m[1] else next(order)], translation)


def translator(lang: str, *names: str) -> Callable[[str], str]:
    """The translator into `lang` over the catalogues `names` and `common` (English: the identity)."""
    entries: dict[str, str] = {}
    if lang != "en":
        for name in ("common", *names):
            entries.update(catalogue(name, lang))
    return Translator(entries)
