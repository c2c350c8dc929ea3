"""Spanish spelling rules that the conjugator applies when it glues a stem to an ending.

Spanish writes sounds, not stems: the consonant at the end of a stem keeps its *sound* in every form, so its
*spelling* changes with the vowel that follows it (current RAE orthography).

    -ar verbs, before e/é:      c -> qu (busqué),  g -> gu (pagué),  gu -> gü (averigüé),  z -> c (empecé)
    -er/-ir verbs, before a/o:  c -> z (venzo),    g -> j (cojo),    gu -> g (sigo),       qu -> c
                                (in -cer/-cir verbs of the `zc` class, c -> zc instead: conozco)

Two more rules concern the preterite endings -ió/-ieron and the endings in unstressed i (-iste, -imos,
-isteis) after a stem that ends in a vowel or in ñ/ll:

    i between vowels is written y:      le + ió -> leyó,  constru + ieron -> construyeron
    a/e/o + unstressed i is a hiatus:   le + iste -> leíste (the í carries the stress, so it takes an accent)
    after ñ and ll the i is absorbed:   gruñ + ió -> gruñó,  riñ + ieron -> riñeron

(-uir stems such as constru- form a diphthong ui, so construiste and construimos keep a plain i.)

A prefix that ends in a vowel meets the same hiatus rule across a silent h (the h does not separate the vowels):

    re + hice -> rehíce,  re + hizo -> rehízo     (stressed i after a/e/o takes the accent, as in prohíbo)
    re + hicimos -> rehicimos                     (the i is not stressed: no accent)
"""

from __future__ import annotations

FRONT_VOWELS = "eéií"
VOWELS = "aeiouáéíóú"

# Respellings of a stem's last letters, tried in order (longest first).
_BEFORE_FRONT_VOWEL = (("gu", "gü"), ("c", "qu"), ("g", "gu"), ("z", "c"))  # hard sounds of -ar verbs
_BEFORE_BACK_VOWEL = (("gu", "g"), ("qu", "c"), ("c", "z"), ("g", "j"))  # soft sounds of -er/-ir verbs
_UNACCENTED = str.maketrans("áéíóú", "aeiou")


def strip_accents(word: str) -> str:
    """`oír` -> `oir` (ü and ñ are letters of their own and stay)."""
    return word.translate(_UNACCENTED)


def join(stem: str, ending: str, conjugation: str, soft_c: str = "z") -> str:
    """`stem + ending`, respelling the stem's last consonant so that it keeps its sound.

    `conjugation` is "ar", "er" or "ir"; `soft_c` is what a soft c becomes before a/o ("z", or "zc" for the
    conocer class).
    """
    if not ending:
        return stem
    if conjugation == "ar":
        rules = _BEFORE_FRONT_VOWEL if ending[0] in FRONT_VOWELS else ()
    else:
        rules = _BEFORE_BACK_VOWEL if ending[0] not in FRONT_VOWELS else ()
        rules = tuple((old, soft_c if old == "c" else new) for old, new in rules)
    for old, new in rules:
        if stem.endswith(old):
            return stem[: -len(old)] + new + ending
    return stem + ending


def add_prefix(prefix: str, form: str) -> str:
    """`prefix + form`, writing the accent a stressed i/u after a silent h needs when the prefix ends in a/e/o.

    Only forms of two syllables with no written accent, ending in a vowel, n or s, are stressed on the h-syllable
    (rehíce, rehízo); longer ones (rehicimos) are stressed later and need nothing."""
    # form[2] a vowel would make hi/hu part of a diphthong (re + huelo): no hiatus there.
    if prefix and prefix[-1] in "aeo" and form[:2] in ("hi", "hu") and form[2:3] not in tuple(VOWELS) \
            and form == strip_accents(form):
        nuclei = sum(1 for i, c in enumerate(form) if c in VOWELS and (i == 0 or form[i - 1] not in VOWELS))
        if nuclei == 2 and form[-1] in "aeiouns":
            form = "h" + {"i": "í", "u": "ú"}[form[1]] + form[2:]
    return prefix + form


def ends_in_vowel_sound(stem: str) -> bool:
    """True for le-, ca-, o-, constru-; False for sigu-, delinqu- (there the u is silent)."""
    return bool(stem) and stem[-1] in VOWELS and not stem.endswith(("gu", "qu"))


def adjust_preterite_ending(stem: str, ending: str) -> str:
    """Apply the y / hiatus / ñ-ll rules to an -er/-ir preterite ending (see the module docstring)."""
    if ends_in_vowel_sound(stem):
        if ending.startswith("i") and ending[1:2] in ("ó", "e"):
            return "y" + ending[1:]  # ió -> yó, ieron -> yeron
        if ending.startswith("i") and stem[-1] in "aeo":
            return "í" + ending[1:]  # iste -> íste, imos -> ímos, isteis -> ísteis
    elif stem.endswith(("ñ", "ll")) and ending.startswith("i") and ending[1:2] in ("ó", "e"):
        return ending[1:]  # ió -> ó, ieron -> eron
    return ending
