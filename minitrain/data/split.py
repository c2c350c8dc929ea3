"""Held-out verbs (`heldout_policy: verbs_4`): which verbs go to train, dev and val.

`val` holds every form of four verbs the model never sees in training: three regular verbs, one per
conjugation, and one stem-changing verb. To get them right the model has to copy an unseen stem from the
prompt and attach the right ending, which attention can do and an n-gram cannot. `dev` holds four other
verbs, chosen the same way, for tuning (n-gram order, hyper-parameters) so that `val` is only ever scored.

No other verb of the list may contain a held-out verb's stem (`encerrar` would leak `cerr-`, `revender`
would leak `vend-`): `split_verbs` refuses such a list rather than silently dropping verbs.
"""

from __future__ import annotations

from collections.abc import Sequence

from minitrain.common.errors import UserError
from minitrain.data.orthography import strip_accents
from minitrain.data.verbs import Verb

HELDOUT_POLICY = "verbs_4"
VAL_VERBS = ("caminar", "vender", "dividir", "cerrar")
DEV_VERBS = ("trabajar", "aprender", "recibir", "pensar")
SPLITS = ("train", "dev", "val")


def stem(infinitive: str) -> str:
    """The infinitive without -ar/-er/-ir: `cerrar` -> `cerr`."""
    return strip_accents(infinitive)[:-2]


def split_verbs(verbs: Sequence[Verb]) -> dict[str, list[Verb]]:
    """{"train": [...], "dev": [...], "val": [...]}; dev and val in the order of DEV_VERBS / VAL_VERBS."""
    by_name = {v.infinitive: v for v in verbs}
    missing = [name for name in (*VAL_VERBS, *DEV_VERBS) if name not in by_name]
    if missing:
        raise UserError(f"the verb list lacks the held-out verbs {missing}")
    held_out = (*VAL_VERBS, *DEV_VERBS)
    for name in held_out:
        leaks = [v.infinitive for v in verbs if v.infinitive != name and stem(name) in strip_accents(v.infinitive)]
        if leaks:
            raise UserError(f"held-out verb {name!r}: {leaks} contain its stem {stem(name)!r}; remove them")
    return {
        "train": [v for v in verbs if v.infinitive not in held_out],
        "dev": [by_name[name] for name in DEV_VERBS],
        "val": [by_name[name] for name in VAL_VERBS],
    }
