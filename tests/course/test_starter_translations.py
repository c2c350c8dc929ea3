"""The Spanish starters (minitrain/course/es/labNN-starter.yaml): every docstring a starter keeps is translated,
each translation was reviewed against the library's docstring of today (the sha256 of the English text stored
beside it), a Spanish starter is its English one but for the comments and the docstrings, and a translation keeps
the code spans, the numbers and the shapes of its English (the glossary and «» are checked with every Spanish
text, tests/course/test_course_i18n.py)."""

from __future__ import annotations

import ast
import hashlib
import inspect
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from minitrain.common.paths import course_file
from minitrain.course.labs import LABS, start
from minitrain.course.starter import stub_module

REPO = Path(__file__).resolve().parents[2]
CODE = re.compile(r"`[^`]*`")
# a shape or a tuple of names: (B, T, C), (G, g, C), (..., in), (x₁[i], x₂[i]), (loss, grad_norm); not an option
# (--seed), nor words (format, checksum): every item is short or more than lowercase letters
TUPLE = re.compile(r"\([^\s(),-][^\s(),]*(?:, [^\s(),-][^\s(),]*)+\)")


def spans(text: str) -> Counter:
    """The code spans of a text, each as one line (a docstring may wrap one)."""
    return Counter(" ".join(span.split()) for span in CODE.findall(text))


def shapes(text: str) -> Counter:
    found = TUPLE.findall(text)
    return Counter(t for t in found if all(re.search(r"[^a-z]|^.{1,4}$", item) for item in t[1:-1].split(", ")))


def yaml_of(lab: str) -> dict[str, dict[str, dict[str, str]]]:
    return yaml.safe_load((REPO / f"minitrain/course/es/lab{lab}-starter.yaml").read_text(encoding="utf-8"))


def docstrings(text: str) -> dict[str, str]:
    """{"<module>" | "name" | "Class.method": its docstring} of a Python text."""
    tree = ast.parse(text)
    found = {"<module>": ast.get_docstring(tree)}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            found[node.name] = ast.get_docstring(node)
            for method in node.body if isinstance(node, ast.ClassDef) else ():
                if isinstance(method, ast.FunctionDef):
                    found[f"{node.name}.{method.name}"] = ast.get_docstring(method)
    return {name: doc for name, doc in found.items() if doc}


def english_starter(lab: str, path: str) -> str:
    return stub_module(course_file(path).read_text(encoding="utf-8"), LABS[lab].pieces[path], lab, LABS[lab].text)


def translations(lab: str) -> list[tuple[str, str, str, str]]:
    """(file, name, English docstring, Spanish docstring as it reads in the starter) of each entry of a lab."""
    out = []
    for path, entries in yaml_of(lab).items():
        english = docstrings(english_starter(lab, path))
        for name, entry in entries.items():
            out.append((path, name, english.get(name, ""), inspect.cleandoc(ast.literal_eval(f'"""{entry["es"]}"""'))))
    return out


@pytest.mark.parametrize("lab", list(LABS))
def test_every_docstring_of_a_starter_is_translated_against_its_english_of_today(lab):
    """The library's docstring changed and its Spanish was not reviewed: review it, then write the new hash."""
    entries = yaml_of(lab)
    assert set(entries) == set(LABS[lab].pieces), f"lab {lab}: the files translated are not the lab's"
    for path in LABS[lab].pieces:
        english = docstrings(english_starter(lab, path))
        assert set(entries[path]) == set(english), f"{path}: translated {sorted(entries[path])}, kept {sorted(english)}"
        for name, text in english.items():
            today = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
            assert entries[path][name]["en_hash"] == today, (
                f"minitrain/course/es/lab{lab}-starter.yaml: {path} {name}: the English docstring changed since its "
                f"translation was reviewed; review the Spanish, then set en_hash: \"{today}\"")


@pytest.mark.parametrize("lab", list(LABS))
def test_a_spanish_starter_is_the_english_one_with_spanish_comments_and_docstrings(lab, tmp_path):
    start(lab, tmp_path / "en")
    start(lab, tmp_path / "es", lang="es")
    for path in LABS[lab].pieces:
        english, spanish = ((tmp_path / lang / path).read_text(encoding="utf-8") for lang in ("en", "es"))
        assert spanish.startswith(f"# Punto de partida del lab {lab}: escribe cada función marcada con TODO.")
        english_docs, spanish_docs = docstrings(english), docstrings(spanish)
        assert set(spanish_docs) == set(english_docs), path
        left = [name for name in english_docs if spanish_docs[name] == english_docs[name]]
        assert not left, f"{path}: English docstrings left in the Spanish starter: {left}"
        stubs = re.findall(r'raise NotImplementedError\("([^"]*)"\)', spanish)
        assert stubs and all(s.startswith(f"TODO lab {lab}: escribe ") for s in stubs), stubs
        long = [line for line in spanish.splitlines() if len(line) > 120]
        assert not long, f"{path}: lines longer than 120 characters: {long}"

        def code(text: str) -> str:  # the tree with every docstring and TODO message blanked out
            tree = ast.parse(text)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    node.value = ""
            return ast.dump(tree)

        assert code(spanish) == code(english), f"{path}: the Spanish starter's code is not the English one's"


@pytest.mark.parametrize("lab", list(LABS))
def test_a_translation_keeps_the_code_spans_numbers_and_shapes_and_writes_the_decimal_comma(lab):
    for path, name, english, spanish in translations(lab):
        where = f"lab{lab}-starter.yaml {path} {name}"
        assert spans(spanish) == spans(english), f"{where}: the code spans differ"
        english_prose, spanish_prose = (" ".join(CODE.sub(" ", text).split()) for text in (english, spanish))
        assert shapes(spanish_prose) == shapes(english_prose), f"{where}: the shapes differ"
        english_numbers = re.findall(r"\d+(?:\.\d+)?", re.sub(r"(?<=\d),(?=\d{3}\b)", "", english_prose))
        spanish_numbers = re.findall(r"\d+(?:\.\d+)?", re.sub(r"(?<=\d),(?=\d)", ".",
                                                               re.sub(r"(?<=\d) (?=\d{3}\b)", "", spanish_prose)))
        assert Counter(spanish_numbers) == Counter(english_numbers), f"{where}: the numbers differ"
        assert not re.search(r"(?<![\w.])\d+\.\d+(?![\w.])", re.sub(r"\w+\(.*?\)|\w+=\S+", "", spanish_prose)), \
            f"{where}: Spanish prose writes the decimal comma"


def test_a_docstring_whose_english_changed_stays_in_english():
    """The translation replaces a docstring only while its hash is that of the English it was made from."""
    source = 'def f(x):\n    """Twice x.\n\n    (B, T) -> (B, T).\n    """\n    return 2 * x\n'
    english = hashlib.sha256(b"Twice x.\n\n(B, T) -> (B, T).").hexdigest()[:12]
    spanish = stub_module(source, ["f"], "00", "x", docs={"f": (english, "El doble de x.\n\n(B, T) -> (B, T).")})
    assert '    """El doble de x.\n\n    (B, T) -> (B, T).\n    """\n    raise NotImplementedError' in spanish
    stale = stub_module(source, ["f"], "00", "x", docs={"f": ("0" * 12, "El doble de x.")})
    assert stale == stub_module(source, ["f"], "00", "x") and '"""Twice x.' in stale
