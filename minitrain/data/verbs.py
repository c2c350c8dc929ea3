"""The verb list, `data/raw/verbs.tsv`: one `infinitive<TAB>class` per line, `#` comments and blank lines allowed.

The class is a pattern of `conjugator.py` (regular, e-ie, o-ue, ...) or an irregular model verb of
`irregular.py`; a verb built on a model by a prefix names the model (`mantener<TAB>tener`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from minitrain.common.errors import UserError
from minitrain.common.io import read_text
from minitrain.data.conjugator import verb_classes
from minitrain.data.irregular import IRREGULAR

MAX_INFINITIVE_LETTERS = 10  # 10 letters + "|C4|" + "-íamos" conditional + BOS/EOS = 32 tokens at most
_INFINITIVE = re.compile(r"^[a-zñ]*[aeií]r$")  # ir, oír, reír are infinitives too


class Verb(NamedTuple):
    infinitive: str
    verb_class: str


def load_verbs(path: str | os.PathLike) -> list[Verb]:
    """Read and check the verb list; any bad line is a `UserError` naming the file and line number."""
    path = Path(path)
    lines = read_text(path, "verb list").splitlines()
    verbs: list[Verb] = []
    seen: set[str] = set()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        where = f"{path}:{lineno}"
        if len(fields) != 2:
            raise UserError(f"{where}: expected 'infinitive<TAB>class', got {line!r}")
        infinitive, verb_class = fields
        if not _INFINITIVE.match(infinitive):
            raise UserError(f"{where}: {infinitive!r} is not a lower-case Spanish infinitive")
        if len(infinitive) > MAX_INFINITIVE_LETTERS:
            raise UserError(f"{where}: {infinitive!r} is longer than {MAX_INFINITIVE_LETTERS} letters")
        if verb_class not in verb_classes():
            raise UserError(f"{where}: unknown class {verb_class!r} (one of {', '.join(verb_classes())})")
        if verb_class in IRREGULAR and not infinitive.endswith(verb_class):
            raise UserError(f"{where}: {infinitive!r} cannot follow the model {verb_class!r}: it does not end in it")
        if infinitive in seen:
            raise UserError(f"{where}: {infinitive!r} is listed twice")
        seen.add(infinitive)
        verbs.append(Verb(infinitive, verb_class))
    if not verbs:
        raise UserError(f"{path}: the verb list is empty")
    return verbs
