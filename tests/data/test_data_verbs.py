"""The verb list loader and the held-out split rules."""

from __future__ import annotations

import pytest

from minitrain.common.errors import UserError
from minitrain.data.split import DEV_VERBS, VAL_VERBS, split_verbs, stem
from minitrain.data.verbs import Verb, load_verbs

HELD_OUT = [Verb(v, "e-ie" if v in ("cerrar", "pensar") else "regular") for v in (*VAL_VERBS, *DEV_VERBS)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("hablar regular", "expected 'infinitive<TAB>class'"),
        ("hablar\tregular\textra", "expected 'infinitive<TAB>class'"),
        ("Hablar\tregular", "not a lower-case Spanish infinitive"),
        ("hablo\tregular", "not a lower-case Spanish infinitive"),
        ("desaparecer\tzc", "longer than 10 letters"),
        ("hablar\tirregular", "unknown class 'irregular'"),
        ("mantener\tponer", "does not end in it"),
        ("comer\tregular", "listed twice"),
    ],
)
def test_bad_verb_line_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "verbs.tsv"
    path.write_text(f"# a comment\ncomer\tregular\n\n{line}\n", encoding="utf-8")
    with pytest.raises(UserError, match=message) as info:
        load_verbs(path)
    assert str(info.value).startswith(f"{path}:4: ")


def test_good_verb_list(tmp_path):
    path = tmp_path / "verbs.tsv"
    path.write_text("# comment\ncomer\tregular\n\nmantener\ttener\noír\toír\nir\tir\n", encoding="utf-8")
    assert load_verbs(path) == [
        Verb("comer", "regular"), Verb("mantener", "tener"), Verb("oír", "oír"), Verb("ir", "ir"),
    ]


def test_missing_or_empty_verb_list(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_verbs(tmp_path / "nope.tsv")
    (tmp_path / "empty.tsv").write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(UserError, match="empty"):
        load_verbs(tmp_path / "empty.tsv")


def test_stem():
    assert [stem(v) for v in ("cerrar", "vender", "dividir", "oír")] == ["cerr", "vend", "divid", "o"]


@pytest.mark.lab00
def test_split_puts_held_out_verbs_aside():
    verbs = [Verb("hablar", "regular"), *HELD_OUT, Verb("comer", "regular")]
    splits = split_verbs(verbs)
    assert [v.infinitive for v in splits["val"]] == list(VAL_VERBS)
    assert [v.infinitive for v in splits["dev"]] == list(DEV_VERBS)
    assert [v.infinitive for v in splits["train"]] == ["hablar", "comer"]


@pytest.mark.lab00
@pytest.mark.parametrize("leaky", ["encerrar", "revender", "subdividir", "compensar"])
def test_split_refuses_a_verb_that_contains_a_held_out_stem(leaky):
    with pytest.raises(UserError, match=f"'{leaky}'"):
        split_verbs([*HELD_OUT, Verb(leaky, "regular")])


def test_split_needs_every_held_out_verb():
    with pytest.raises(UserError, match="caminar"):
        split_verbs(HELD_OUT[1:])
