"""The course in Spanish (minitrain/course/i18n.py): the language is chosen as documented, a translation carries
the values of its message across, every message a checker can print has a Spanish entry, and `lab start` /
`lab check` speak Spanish when asked."""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import pytest

from minitrain import cli
from minitrain.course.i18n import Translator, catalogue, decimal_comma, language, starter_docs, translator
from minitrain.course.labs import LABS, checklist, grade, start

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import lab_messages  # noqa: E402

_FIELD = re.compile(r"\{(\d*)\}")
_CODE = re.compile(r"`[^`]*`")
_LETTERS = re.compile(r"[A-Za-z]{2,}")


def _code(text: str) -> list[str]:
    """The code spans of a message, placeholders aside (`<this folder>`, `SECONDS` may be translated)."""
    return sorted(re.sub(r"<[^>]*>|\b[A-Z]{2,}\b", "…", _FIELD.sub("{}", c)) for c in _CODE.findall(text))


def _numbers(text: str, lang: str = "en") -> list[str]:
    """The numbers a message writes itself, as values (English 1,299.5 is Spanish 1299,5; 49,152 is 49 152):
    a translation keeps every one."""
    text = _FIELD.sub("", text)
    if lang == "en":
        text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    else:  # the decimal comma, and a space between groups of three digits
        text = re.sub(r"(?<=\d),(?=\d)", ".", re.sub(r"(?<=\d) (?=\d{3}\b)", "", text))
    return sorted(re.findall(r"\d+(?:\.\d+)?", text))


def english_left(lab: str, text: str) -> list[str]:
    """The English words still in `text` once translated for lab `lab`: [] when it reads in Spanish. `text` has
    an entry (or holds no word at all), and no English phrase of any entry (one its translation does not
    repeat, as it repeats code) is left in the translation: a value put in a message is translated too."""
    spanish = translator("es", f"lab{lab}")(text)
    if spanish == text and _LETTERS.search(text):
        return [text]
    return [phrase for phrase in _english_phrases(lab) if phrase in spanish]


@functools.cache
def _english_phrases(lab: str) -> tuple[str, ...]:
    entries = {**catalogue("common"), **catalogue(f"lab{lab}")}
    return tuple({part.strip() for en, es in entries.items() for part in en.split("{}")
                  if len(part.strip()) >= 12 and " " in part.strip() and part.strip() not in es})


@pytest.mark.parametrize(("flag", "variables", "expected"), [
    (None, {}, "en"),
    ("es", {"MINITRAIN_LANG": "en"}, "es"),
    ("en", {"MINITRAIN_LANG": "es"}, "en"),
    (None, {"MINITRAIN_LANG": "es", "LANG": "en_US.UTF-8"}, "es"),
    (None, {"LANG": "es_ES.UTF-8"}, "es"),
    (None, {"LC_MESSAGES": "es_AR.UTF-8", "LANG": "en_GB.UTF-8"}, "es"),
    (None, {"LC_ALL": "C.UTF-8", "LC_MESSAGES": "es_ES.UTF-8"}, "en"),  # LC_ALL wins, as in POSIX
    (None, {"LC_ALL": "es_MX.UTF-8", "LANG": "C"}, "es"),
    (None, {"MINITRAIN_LANG": "fr"}, "en"),
])
def test_the_language_is_the_flag_then_the_variable_then_the_locale(flag, variables, expected, monkeypatch):
    for name in ("MINITRAIN_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert language(flag) == expected


def test_a_translation_carries_the_values_across_and_translates_those_that_are_messages():
    tr = Translator({"not run: fix first: {}": "sin comprobar: corrige primero: {}",
                     "{} ({}, line {})": "{} ({}, línea {})",
                     "the step {} of {}": "el paso {1} de {0}",  # another order
                     "item one": "punto uno", "item two": "punto dos", "item; three": "punto; tres",
                     "took longer than {} s": "tardó más de {} s",
                     "{} — look for a loop in {}": "{}: busca un bucle en {}"})
    assert tr("not run: fix first: item one; item; three; item two") == \
        "sin comprobar: corrige primero: punto uno; punto; tres; punto dos"
    assert tr("the step 3 of 40") == "el paso 40 de 3"
    assert tr("took longer than 2.5 s — look for a loop in f (a.py, line 7)") == \
        "tardó más de 2.5 s: busca un bucle en f (a.py, línea 7)"
    assert tr("something no entry knows") == "something no entry knows"
    assert translator("en", "lab03")("took longer than 2 s") == "took longer than 2 s"
    tr = translator("es", "lab03")  # the catalogues: a message the sandbox composes, and an item's quoted name
    assert tr("took longer than 120 s — look for a loop that never ends in moving_average "
              "(minitrain/monitor/curves.py, line 12)") == \
        "tardó más de 120 s: busca un bucle que no termina nunca en moving_average (minitrain/monitor/curves.py, " \
        "línea 12)"
    assert tr("interrupted while checking 'overfitting_onset is None when val ended within the tolerance of its best'"
              ": your moving_average (minitrain/monitor/curves.py, line 3) was running") == \
        "interrumpido mientras se comprobaba 'overfitting_onset es None cuando val terminó dentro de la tolerancia " \
        "respecto a su mejor valor': se estaba ejecutando tu moving_average (minitrain/monitor/curves.py, línea 3)"


def test_every_message_a_checker_can_print_has_a_spanish_entry_and_no_entry_is_stale():
    missing, stale = {}, {}
    for name, texts in lab_messages.catalogue_templates().items():
        have = catalogue(name)
        missing[name] = [t for t in texts if t not in have]
        stale[name] = [t for t in have if t not in texts]
    assert not any(missing.values()), {k: v for k, v in missing.items() if v}
    assert not any(stale.values()), {k: v for k, v in stale.items() if v}
    assert {f"lab{n}" for n in LABS} <= set(missing), "a lab's checker was not read"


def test_the_collector_reads_every_kind_of_message_and_no_code(tmp_path):
    source = tmp_path / "labxx.py"
    source.write_text('''"""A docstring is no message."""
@CHECKS.check("an item name", hint="a hint, " + "joined")
def _item(lab):
    """Nor is this one."""
    why = f" (it used {step})" if step else ""
    lab.python("-m", "minitrain.cli", "train", ".venv/bin/python x --out-dir y")
    raise Failed(f"got {got:.3g}; expected {want}{why}", hint=tr("words"))
    raise Failed("{} of {} passed".format(1, 2) + "; ab ab")
    raise ValueError("a programming error")
''', encoding="utf-8")
    assert sorted(lab_messages.templates(source)) == sorted([
        "an item name", "a hint, joined", " (it used {})", "words", "got {}; expected {}{}", "{} of {} passed; ab ab"])


@pytest.mark.parametrize("name", sorted(lab_messages.sources()))
def test_each_entry_keeps_the_values_and_the_code_of_its_message(name):
    for en, es in catalogue(name).items():
        fields = _FIELD.findall(es)
        assert isinstance(es, str) and es.strip(), (en, es)
        assert len(fields) == en.count("{}"), (en, es)
        numbered = sorted(int(f) for f in fields if f)
        assert not numbered or numbered == list(range(en.count("{}"))), (en, es)
        assert _code(en) == _code(es), (en, es)
        assert _numbers(en) == _numbers(es, "es"), (en, es)
        prose = re.sub(r"\{[^}]*\}|\*\* -?[\d.]+", "", _CODE.sub("", es))  # code and Python literals aside
        assert not re.search(r"\d\.\d", prose), f"{es!r}: Spanish writes the decimal comma"


def test_numbers_put_into_a_spanish_message_take_the_decimal_comma():
    assert [decimal_comma(n) for n in ("66.34", "1,299", "49,152", "−0.5", "7", "1,234,567.25")] == [
        "66,34", "1299", "49 152", "−0,5", "7", "1 234 567,25"]
    tr = translator("es", "lab01")
    assert tr("your evaluate() returned val_loss 3.21; the mean over the 1,299 counted val tokens is 3.11") == \
        "tu evaluate() devolvió val_loss 3,21; la media sobre los 1299 tokens de validación contados es 3,11"
    assert translator("en", "lab01")("val_ppl 6.1 is not below the baseline's 5.8") == \
        "val_ppl 6.1 is not below the baseline's 5.8"


def test_a_fresh_starters_checklist_reads_in_spanish_line_by_line(tmp_path):
    for lab in LABS:
        workspace = tmp_path / lab
        start(lab, workspace)
        title, outcomes = grade(lab, workspace, limits=None)
        for text in (title, *(t for o in outcomes for t in (o.name, o.reason, o.hint))):
            assert not english_left(lab, text), f"lab {lab}: {text!r} has English left: {english_left(lab, text)}"


def test_lab_start_and_check_speak_spanish_when_asked(tmp_path, capsys, monkeypatch):
    assert cli.main(["lab", "start", "03", str(tmp_path / "ws"), "--lang", "es"]) == 0
    said = capsys.readouterr().out
    assert said.startswith("lab 03: se han escrito ") and "siguiente paso: lee " in said
    readme = (tmp_path / "ws" / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# Lab 03 · El sobreajuste y el panel de entrenamiento: tu espacio de trabajo")
    assert "El texto del lab es `lab/03-overfitting-and-dashboard.es.md`" in readme
    assert f"minitrain lab check 03 {tmp_path / 'ws'}" in readme
    stub = (tmp_path / "ws" / "minitrain/monitor/curves.py").read_text(encoding="utf-8")
    assert stub.startswith("# Punto de partida del lab 03: escribe cada función marcada con TODO.")
    monkeypatch.setenv("MINITRAIN_LANG", "es")
    assert cli.main(["lab", "check", "03", str(tmp_path / "ws"), "--timeout", "60"]) == 1
    lines = [line.strip() for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert lines[0] == f"lab 03 · El sobreajuste y el panel de entrenamiento: comprobando {tmp_path / 'ws'}"
    assert lines[-1] == f"0 de {len(checklist('03').checks)} superados."
    assert any(line.startswith("✗ moving_average es") for line in lines), lines
    assert any(line.startswith("pista: ") for line in lines)
    assert any(line.startswith("aún sin escribir: lanza NotImplementedError (TODO lab 03") for line in lines)
    assert cli.main(["lab", "check", "03", str(tmp_path / "nowhere")]) == 2  # a refusal's one error: line too
    assert capsys.readouterr().err == f"error: {tmp_path / 'nowhere'}: no existe esa carpeta; `minitrain lab start " \
        f"03 {tmp_path / 'nowhere'}` la crea\n"
    tr = translator("es", "lab03")
    for line in lines:  # an English line would have a translation: each one printed is already in Spanish
        content = re.sub(r"^(✓|✗|pista:) ", "", line)
        assert tr(content) == content, f"an English line: {line!r}"


# ------------------------------------------------------------------------------------------------ the glossary

GLOSSARY = REPO / "lab" / "GLOSSARY.md"


def glossary_rows(path: Path) -> list[tuple[str, str, str]]:
    """(English, Spanish, rejected variants) per row of the glossary's table, header aside."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
    return [tuple(cell.strip() for cell in line.strip("| ").split(" | ")) for line in lines[2:]]


def rejected() -> dict[str, str]:
    """{rejected variant: the Spanish term used instead}."""
    return {variant.strip(): spanish for _, spanish, variants in glossary_rows(GLOSSARY)
            for variant in variants.split(",") if variant.strip() != "—"}


def spanish_prose(text: str) -> str:
    """A Spanish text without what is never translated: code blocks, code spans, link targets, comments."""
    for pattern in (r"```.*?```", r"`[^`]*`", r"\]\([^)]*\)", r"<!--.*?-->"):
        text = re.sub(pattern, " ", text, flags=re.DOTALL)
    return text


def spanish_texts() -> dict[str, str]:
    """{where: Spanish prose} of every Spanish page of the course and every Spanish checker message."""
    pages = {str(p.relative_to(REPO)): spanish_prose(p.read_text(encoding="utf-8"))
             for folder in ("lab", "theory", "solutions") for p in sorted((REPO / folder).glob("*.es.md"))
             if p.name != "GLOSSARY.es.md"}
    for name in lab_messages.sources():
        for en, es in catalogue(name).items():
            pages[f"minitrain/course/es/{name}.yaml: {en[:40]}"] = spanish_prose(es)
    for lab in LABS:  # the starters' docstrings, but their display blocks (formulas, tables of names) and their
        for path, names in starter_docs(lab).items():  # Python strings ("epoch": the prose quotes with «»)
            for name, (_, es) in names.items():
                prose = "\n".join(line for line in es.splitlines() if not line.startswith("    "))
                prose = re.sub(r'"[^"\n]*"', " ", prose)
                pages[f"minitrain/course/es/lab{lab}-starter.yaml: {path} {name}"] = spanish_prose(prose)
    return pages


def test_the_two_glossaries_have_the_same_rows_and_every_term_once():
    rows = glossary_rows(GLOSSARY)
    assert rows == glossary_rows(GLOSSARY.with_name("GLOSSARY.es.md"))
    assert len(rows) >= 30 and all(len(row) == 3 and all(row) for row in rows), rows
    assert len({en for en, _, _ in rows}) == len(rows)
    assert not set(rejected()) & {spanish for _, spanish, _ in rows}, "a term rejected in one row is used in another"
    for page in ("README.md", "README.es.md"):
        assert "GLOSSARY." in (REPO / "lab" / page).read_text(encoding="utf-8"), f"lab/{page} does not link it"


def test_no_spanish_text_uses_a_rejected_variant():
    found = []
    for where, text in spanish_texts().items():
        for variant, instead in rejected().items():
            # a one-word variant in the plural too (archivos, comandos), but not the `tokenizers` library's name
            plural = "" if " " in variant else "(?:e?s)?"
            for match in re.finditer(rf"(?<![\w/.-]){re.escape(variant)}{plural}(?![\w/.-])", text, re.IGNORECASE):
                if match[0].lower() == "tokenizers":
                    continue
                line = text[: match.start()].count("\n") + 1
                found.append(f"{where}:{line}: {match[0]!r} (the glossary says {instead!r})")
    assert not found, "\n".join(found)


def test_the_variant_check_can_fail():
    text = spanish_prose("La `early stopping` de código vale; el early stopping en prosa, no. ```\nbaseline\n```")
    hits = [v for v in rejected() if re.search(rf"(?<![\w/.-]){re.escape(v)}(?![\w/.-])", text, re.IGNORECASE)]
    assert hits == ["early stopping"]



def badly_quoted(text: str) -> bool:
    """True when `text` nests «» (a quote inside a quote takes “”) or leaves one open or unopened."""
    depth = 0
    for mark in re.findall("[«»]", text):
        depth += 1 if mark == "«" else -1
        if depth not in (0, 1):
            return True
    return depth != 0


def test_no_spanish_text_nests_its_quotes():
    assert badly_quoted("«Conjuga «caminar» en P1»") and badly_quoted("«sin cerrar")
    assert not badly_quoted("«Conjuga “caminar” en P1» y «otra»")
    found = [where for where, text in spanish_texts().items() if badly_quoted(text)]
    assert not found, found
