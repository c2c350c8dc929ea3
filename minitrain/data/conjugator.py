"""A Spanish conjugator for six tenses and six persons (current RAE orthography).

A form is `stem + ending`. The stem is the infinitive minus -ar/-er/-ir (`camin-ar`); the endings depend on
the conjugation (table `ENDINGS`); the future and conditional add their endings to the whole infinitive
(`caminar-é`). On top of that, three layers of irregularity:

1. **Stem changes** (the verb's class): the stem's last e/o/u/i changes where the stress falls on the stem,
   i.e. in the present singular and 3rd plural of the indicative and subjunctive (the "boot" cells):

       e-ie   cerrar: cierro, cerramos        o-ue   contar: cuento, contamos
       e-i    pedir: pido, pedimos            u-ue   jugar: juego, jugamos
       i-ie   adquirir: adquiero              i-í / u-ú   enviar: envío, continuar: continúo (accent only)

   -ir verbs also raise e -> i and o -> u where the ending is stressed and starts with a diphthong or a
   (preterite 3rd persons, subjunctive nosotros/vosotros): sintió, durmieron, sintamos.
2. **Stem endings with their own rules** (also classes): `zc` (conocer: conozco, conozca), `uir`
   (construir: construyo; y before a, e, o), `ducir` (conducir: conduzco, conduje, condujeron).
3. **Irregular model verbs** from `irregular.py` (ser, ir, tener, ...), and verbs built on them by a prefix.

Spelling changes (buscar -> busqué, coger -> cojo, seguir -> sigo, leer -> leyó) are not classes: they follow
from the sound of the stem and are applied everywhere by `orthography.join`.
"""

from __future__ import annotations

from minitrain.data.corpus import PERSONS, TENSES
from minitrain.data.irregular import IRREGULAR, Irregular
from minitrain.data.orthography import add_prefix, adjust_preterite_ending, join, strip_accents

Paradigm = dict[tuple[str, int], str]  # (tense, person) -> form, 36 entries

_ER_IR_PRETERITE = ("í", "iste", "ió", "imos", "isteis", "ieron")
_ER_IR_IMPERFECT = ("ía", "ías", "ía", "íamos", "íais", "ían")
_ER_IR_SUBJUNCTIVE = ("a", "as", "a", "amos", "áis", "an")
ENDINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "ar": {
        "P": ("o", "as", "a", "amos", "áis", "an"),
        "R": ("é", "aste", "ó", "amos", "asteis", "aron"),
        "I": ("aba", "abas", "aba", "ábamos", "abais", "aban"),
        "S": ("e", "es", "e", "emos", "éis", "en"),
    },
    "er": {
        "P": ("o", "es", "e", "emos", "éis", "en"),
        "R": _ER_IR_PRETERITE,
        "I": _ER_IR_IMPERFECT,
        "S": _ER_IR_SUBJUNCTIVE,
    },
    "ir": {
        "P": ("o", "es", "e", "imos", "ís", "en"),
        "R": _ER_IR_PRETERITE,
        "I": _ER_IR_IMPERFECT,
        "S": _ER_IR_SUBJUNCTIVE,
    },
}
# The future and the conditional put these on the whole infinitive (the conditional's are the -er/-ir imperfect's).
ON_INFINITIVE = {"F": ("é", "ás", "á", "emos", "éis", "án"), "C": _ER_IR_IMPERFECT}
STRONG_PRETERITE = ("e", "iste", "o", "imos", "isteis", "ieron")

# class -> (vowel, where the stem is stressed, where an -ir verb's ending starts with a diphthong or a)
STEM_CHANGES = {
    "e-ie": ("e", "ie", "i"),
    "o-ue": ("o", "ue", "u"),
    "e-i": ("e", "i", "i"),
    "u-ue": ("u", "ue", "u"),
    "i-ie": ("i", "ie", "i"),
    "i-í": ("i", "í", "i"),
    "u-ú": ("u", "ú", "u"),
}
PATTERNS = ("regular", *STEM_CHANGES, "zc", "uir", "ducir")
STRESSED_STEM = {("P", 1), ("P", 2), ("P", 3), ("P", 6), ("S", 1), ("S", 2), ("S", 3), ("S", 6)}
IR_RAISED_STEM = {("R", 3), ("R", 6), ("S", 4), ("S", 5)}


def conjugation(infinitive: str) -> str:
    """ "ar", "er" or "ir" (oír, reír count as -ir)."""
    ending = strip_accents(infinitive[-2:])
    if len(infinitive) < 2 or ending not in ENDINGS:
        raise ValueError(f"{infinitive!r} is not an infinitive")
    return ending


def verb_classes() -> tuple[str, ...]:
    """Every class a verb may have: the regular patterns and the irregular model verbs."""
    return (*PATTERNS, *IRREGULAR)


def conjugate(infinitive: str, verb_class: str) -> Paradigm:
    """All 36 forms of `infinitive`, conjugated as `verb_class` (a pattern or an irregular model verb)."""
    if verb_class in IRREGULAR:
        if not infinitive.endswith(verb_class):
            raise ValueError(f"{infinitive!r} cannot be conjugated like {verb_class!r}: it does not end in it")
        prefix = infinitive[: len(infinitive) - len(verb_class)]
        forms = _conjugate(verb_class, IRREGULAR[verb_class])
        return {cell: add_prefix(prefix, form) for cell, form in forms.items()}
    if verb_class not in PATTERNS:
        raise ValueError(f"unknown verb class {verb_class!r}")
    return _conjugate(infinitive, Irregular(pattern=verb_class))


def _conjugate(infinitive: str, verb: Irregular) -> Paradigm:
    conj = conjugation(infinitive)
    stem = infinitive[:-2]
    forms: Paradigm = {}
    for tense in TENSES:
        written = verb.tenses.get(tense, "").split()
        for person in PERSONS:
            cell = f"{tense}{person}"
            if cell in verb.cells:
                form = verb.cells[cell]
            elif written:
                form = written[person - 1]
            else:
                form = _form(infinitive, conj, stem, verb, tense, person)
            forms[tense, person] = form
    return forms


def _form(infinitive: str, conj: str, stem: str, verb: Irregular, tense: str, person: int) -> str:
    i = person - 1
    if tense in ON_INFINITIVE:
        return (verb.future_stem or strip_accents(infinitive)) + ON_INFINITIVE[tense][i]
    if tense == "R" and (verb.preterite_stem or verb.pattern == "ducir"):
        strong = verb.preterite_stem or stem[:-1] + "j"  # conduc- -> conduj-
        ending = STRONG_PRETERITE[i]
        return strong + (ending[1:] if strong.endswith("j") and ending == "ieron" else ending)
    ending = ENDINGS[conj][tense][i]
    if tense == "P" and person == 1 and verb.yo_stem:
        return verb.yo_stem + ending
    if tense == "S" and (verb.subj_stem or verb.yo_stem):
        return (verb.subj_stem or verb.yo_stem) + ending
    stem = _changed_stem(stem, conj, verb.pattern, tense, person)
    if verb.pattern == "uir" and ending[0] in "aeoáéó":
        stem += "y"  # construyo, construyes, construya
    if tense == "R" and conj != "ar":
        ending = adjust_preterite_ending(stem, ending)
    return join(stem, ending, conj, soft_c="zc" if verb.pattern in ("zc", "ducir") else "z")


def _changed_stem(stem: str, conj: str, pattern: str, tense: str, person: int) -> str:
    """The stem after the class's vowel change (if any) in this cell."""
    if pattern not in STEM_CHANGES:
        return stem
    vowel, stressed, raised = STEM_CHANGES[pattern]
    if (tense, person) in STRESSED_STEM:
        new = stressed
    elif conj == "ir" and (tense, person) in IR_RAISED_STEM:
        new = raised
    else:
        return stem
    at = stem.rindex(vowel)
    return stem[:at] + new + stem[at + 1 :]
