"""Every figure labs 05-09 quote is the committed run's, to the digits shown, in both languages (issue 49).

test_course_text.py checks that each number with two decimals or more is *some* committed result; this checks
that each figure is the right one: a table maps the phrase the text writes (English, and Spanish with the decimal
comma and a space between thousands) to the committed file and key it comes from, formatted as the text shows it.
Whitespace (line breaks) is read as one space. A figure the text changes without its run, or a run committed
again without its text, fails here by name.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
E22, E21 = "experiments/22-smollm2-verbs", "experiments/21-lora/lab05"
E23 = "experiments/23-merging/lab09/timing.json"


class Figure(NamedTuple):
    lab: str  # the lab text's name without .md
    en: str  # the phrase as the English text writes it, `{}` where each figure goes
    es: str  # the same in the Spanish text
    values: tuple[tuple[str, str, str], ...]  # (committed file, key path, format) for each `{}`, in order


def _value(source: str, key: str) -> float:
    """`key` of the committed JSON file `source`: dotted (`after.answer_ppl`), with `*100` (a share as a percent),
    `/1000` (ms as s) or `*held_out_records` (a share as a count) after a space."""
    path, _, scale = key.partition(" ")
    value = json.loads((ROOT / source).read_text(encoding="utf-8"))
    for part in path.split("."):
        value = value[part]
    if scale == "*held_out_records":
        return value * json.loads((ROOT / source).read_text(encoding="utf-8"))["held_out_records"]
    return value * 100 if scale == "*100" else value / 1000 if scale == "/1000" else value


def spanish(number: str) -> str:
    """1,105.3 -> 1105,3 and 36,149 -> 36 149 (the RAE's usage: a space between thousands from five digits)."""
    whole, _, decimals = number.partition(".")
    digits = whole.replace(",", "")
    if len(digits) >= 5:
        digits = f"{int(digits):,}".replace(",", " ")
    return digits + ("," + decimals if decimals else "")


FIGURES = [
    # lab 05: the reference run's table (tests/lab05_table.py checks a fresh run's against it; the 90,032 B of its
    # 4-bit file is the committed file's size at the lab's path: test_course_text computes it)
    Figure("05-lora-and-quantization", "| {} of {} (`trainable_share` {}) |", "| {} de {} (`trainable_share` {}) |",
           ((f"{E21}/manifest.json", "trainable_parameters", ",.0f"), (f"{E21}/manifest.json", "parameters", ",.0f"),
            (f"{E21}/manifest.json", "trainable_share", ".6f"))),
    Figure("05-lora-and-quantization", "| {}, {} % |", "| {}, {} % |",
           ((f"{E21}/results.json", "val_ppl", ".3f"), (f"{E21}/results.json", "val_exact_match *100", ".1f"))),
    Figure("05-lora-and-quantization", "was chosen) | {} |", "| {} |", ((f"{E21}/results.json", "dev_ppl", ".3f"),)),
    # each lab's time, as measured on the course machine with the load (where it was recorded)
    *(Figure(lab, f"{{}} s, {{}} s of them {what}", f"{{}} s, {{}} s de ellos {que}",
             ((f"{folder}/manifest.json", "wall_seconds", ".1f"), (f"{folder}/manifest.json", "train_wall_seconds",
              ".1f")))
      for lab, folder, what, que in (
          ("01-train-mini", "experiments/18-train-mini", "training steps", "en pasos de entrenamiento"),
          ("03-overfitting-and-dashboard", "experiments/19-overfitting", "training", "entrenando"),
          ("04-early-stopping", "experiments/20-early-stopping", "training", "entrenando"),
          ("05-lora-and-quantization", E21, "training", "entrenando"),
          ("07-gpt2-to-llama", "experiments/27-llama-verbs", "training", "entrenando"))),
    Figure("05-lora-and-quantization", "the base's run took {} s", "modelo base tardó {} s",
           (("experiments/21-lora/results.json", "base.wall_seconds", ".1f"),)),
    Figure("06-bpe-tokenizer", "the experiment took {} s, remade on the course machine (2 cores) on 2026-12-07 at a "
           "load average of {} falling to {}", "el experimento tardó {} s, rehecho en la máquina del curso (2 núcleos) "
           "el 7-12-2026 con una carga media de {} que bajó a {}",
           (("experiments/26-bpe-verbs/timing.json", "script_wall_seconds", ".1f"),
            ("experiments/26-bpe-verbs/timing.json", "load_average_1min.before", ".1f"),
            ("experiments/26-bpe-verbs/timing.json", "load_average_1min.after", ".1f"))),
    Figure("06-bpe-tokenizer", "{} against the committed {}", "{} frente al {} guardado",
           (("experiments/26-bpe-verbs/timing.json", "remade_bpe512_val_ppl_per_token", ".4f"),
            ("experiments/26-bpe-verbs/results.json", "runs.bpe-512.val_ppl_per_token", ".4f"))),
    # lab 08: the times, measured, with their load
    Figure("08-capstone-real-model", "the committed short run took {} s, {} s of them training",
           "la ejecución corta del repositorio tardó {} s, {} de ellos entrenando",
           ((f"{E22}/short/manifest.json", "wall_seconds", ",.0f"),
            (f"{E22}/short/manifest.json", "train_wall_seconds", ".0f"))),
    Figure("08-capstone-real-model", "took {} s for the whole script, {} s of them training, on 2026-12-07 at a load "
           "average of {} to {}", "el script entero tardó {} s, {} de ellos entrenando, el 7-12-2026 con una carga "
           "media de {} a {}",
           ((f"{E22}/quick/timing.json", "script_wall_seconds", ".0f"),
            (f"{E22}/quick/manifest.json", "train_wall_seconds", ".0f"),
            (f"{E22}/quick/timing.json", "load_average_1min.lowest", ".0f"),
            (f"{E22}/quick/timing.json", "load_average_1min.highest", ".0f"))),
    Figure("08-capstone-real-model", "`lab check 08`: {} s on the course machine on 2026-12-07, at a load average of "
           "{} before and {} after", "`lab check 08`: {} s en la máquina del curso el 7-12-2026, con una carga media "
           "de {} antes y {} después", ((f"{E22}/check-timing.json", "run_folder_items_seconds", ".0f"),
                                        (f"{E22}/check-timing.json", "load_average_1min.before", ".0f"),
                                        (f"{E22}/check-timing.json", "load_average_1min.after", ".0f"))),
    Figure("08-capstone-real-model", "loading SmolLM2 takes {} s, the answer PPL {} s and the exact match of the 16 "
           "questions {} s, where all 144 would take {} s", "cargar SmolLM2 lleva {} s, la PPL de la respuesta {} s y "
           "el acierto exacto de las 16 preguntas {} s, cuando las 144 llevarían {} s",
           tuple((f"{E22}/check-timing.json", f"pieces_seconds.{key}", ".0f") for key in (
               "base_loaded_and_adapted", "answer_scores_144", "exact_match_16", "exact_match_144"))),
    Figure("08-capstone-real-model", "the base's scoring took {} s", "puntuar el modelo base tardó {} s",
           ((f"{E22}/short/scores.json", "before.seconds", ".1f"),)),
    Figure("08-capstone-real-model", "a training step {} s with other jobs beside it (the full run's, {} s;",
           "un paso de entrenamiento {} s con otros trabajos en marcha (el de la ejecución completa, {} s;",
           ((f"{E22}/short/manifest.json", "ms_per_step /1000", ".1f"),
            (f"{E22}/results.json", "training.ms_per_step /1000", ".1f"))),
    Figure("08-capstone-real-model", "about {} GB of memory at its peak", "unos {} GB de memoria en su pico",
           ((f"{E22}/short/manifest.json", "peak_rss_mb /1000", ".1f"),)),
    Figure("08-capstone-real-model", "the answer PPL goes from {} to {} and exact match from {} % to {} % ({} of 16)",
           "la PPL de la respuesta pasa de {} a {}, y el acierto exacto del {} % al {} % ({} de 16)",
           ((f"{E22}/quick/scores.json", "before.answer_ppl", ".3f"), (f"{E22}/quick/scores.json", "after.answer_ppl",
            ".3f"), (f"{E22}/quick/scores.json", "before.exact_match *100", ".1f"),
            (f"{E22}/quick/scores.json", "after.exact_match *100", ".1f"),
            (f"{E22}/quick/scores.json", "after.exact_match *held_out_records", ".0f"))),
    Figure("08-capstone-real-model", "{} s for the script, {} s the run ({} s training, {} s a step), the two "
           "scorings {} s and {} s", "{} s el script, {} s la ejecución ({} s entrenando, {} s por paso), y las dos "
           "puntuaciones, {} s y {} s",
           ((f"{E22}/quick/timing.json", "script_wall_seconds", ".0f"), (f"{E22}/quick/manifest.json",
            "wall_seconds", ".0f"), (f"{E22}/quick/manifest.json", "train_wall_seconds", ".0f"),
            (f"{E22}/quick/manifest.json", "ms_per_step /1000", ".1f"), (f"{E22}/quick/scores.json", "before.seconds",
            ".1f"), (f"{E22}/quick/scores.json", "after.seconds", ".1f"))),
    Figure("08-capstone-real-model", "{} s for the run and {} minutes for the whole script",
           "{} s la ejecución y {} minutos el script entero",
           ((f"{E22}/results.json", "training.wall_seconds", ",.0f"),
            ("experiments/22-smollm2-verbs/README.md", "", ""))),  # the README's 25.5 min (results.json lacks it)
    # lab 08: the table and what the text reads from it
    Figure("08-capstone-real-model", "as shipped | — | {} | {} | {} % |", "tal cual | — | {} | {} | {} % |",
           ((f"{E22}/short/scores.json", "before.answer_ppl", ".3f"),
            (f"{E22}/short/scores.json", "before.answer_ppl_per_char", ".3f"),
            (f"{E22}/short/scores.json", "before.exact_match *100", ".1f"))),
    Figure("08-capstone-real-model", "`loss_on: all` | {} | {} | {} % |", "`loss_on: all` | {} | {} | {} % |",
           ((f"{E22}/short-all-tokens/scores.json", "after.answer_ppl", ".3f"),
            (f"{E22}/short-all-tokens/scores.json", "after.answer_ppl_per_char", ".3f"),
            (f"{E22}/short-all-tokens/scores.json", "after.exact_match *100", ".1f"))),
    Figure("08-capstone-real-model", "40 steps, `loss_on: completion` | {} | {} | {} % |",
           "40 pasos, `loss_on: completion` | {} | {} | {} % |",
           ((f"{E22}/short/scores.json", "after.answer_ppl", ".3f"),
            (f"{E22}/short/scores.json", "after.answer_ppl_per_char", ".3f"),
            (f"{E22}/short/scores.json", "after.exact_match *100", ".1f"))),
    Figure("08-capstone-real-model", "150 steps, `loss_on: completion` | {} | {} | {} % |",
           "150 pasos, `loss_on: completion` | {} | {} | {} % |",
           ((f"{E22}/results.json", "after.answer_ppl", ".3f"), (f"{E22}/results.json", "after.answer_ppl_per_char",
            ".3f"), (f"{E22}/results.json", "after.exact_match *100", ".1f"))),
    Figure("08-capstone-real-model", "all verbs | — | {} | {} % |", "| — | {} | {} % |",
           (("experiments/18-train-mini/results.json", "val_ppl", ".3f"),
            ("experiments/18-train-mini/results.json", "val_exact_match *100", ".1f"))),
    Figure("08-capstone-real-model", "{} of the 144 forms", "{} de las 144", (
        (f"{E22}/short/scores.json", "after.exact_match *held_out_records", ".0f"),)),
    Figure("08-capstone-real-model", "of the {} tokens the runs saw, only {} ({} %)",
           "de los {} tokens que vieron las ejecuciones, solo {} (el {} %)",
           ((f"{E22}/short/results.json", "tokens_seen", ",.0f"), (f"{E22}/short/results.json", "loss_tokens_seen",
            ",.0f"), ("experiments/22-smollm2-verbs/README.md", "", ""))),
    Figure("08-capstone-real-model", "({} against {} in its `results.json`)", "({} frente a {}",
           ((f"{E22}/short-all-tokens/results.json", "val_ppl", ".3f"), (f"{E22}/short/results.json", "val_ppl",
            ".3f"))),
    Figure("08-capstone-real-model", "{} trainable weights, {} % of the model", "{} pesos entrenables, el {} %",
           ((f"{E22}/short/manifest.json", "trainable_parameters", ",.0f"),
            (f"{E22}/short/manifest.json", "trainable_share *100", ".2f"))),
    # lab 09: the checker's time, measured with its load (the fresh walk's, and again)
    Figure("09-model-merging", "the checker took {} s at a load average of {}",
           "el comprobador tardó {} s con una carga media de {}",
           ((E23, "walk.wall_seconds", ".1f"), (E23, "walk.load_average_1min", ".0f"))),
    Figure("09-model-merging", "took {} s of wall time at a load average of {} on a student's workspace, and {} to "
           "{} s at a load average of {}", "tardó {} s de tiempo transcurrido con una carga media de {} sobre el "
           "espacio de trabajo de un estudiante, y de {} a {} s con una carga media de {}",
           ((E23, "walk.wall_seconds", ".1f"), (E23, "walk.load_average_1min", ".0f"),
            (E23, "remeasured.wall_seconds.lowest", ".1f"), (E23, "remeasured.wall_seconds.highest", ".1f"),
            (E23, "remeasured.load_average_1min", ".0f"))),
]


@cache
def _text(name: str) -> str:
    return re.sub(r"\s+", " ", (ROOT / "lab" / name).read_text(encoding="utf-8"))


def _phrase(template: str, values: tuple[tuple[str, str, str], ...], lang: str) -> str | re.Pattern:
    """The phrase with each figure in; a figure without a key (`""`) is any number there (a regex then)."""
    parts = []
    for source, key, spec in values:
        if not key:
            parts.append(None)
            continue
        shown = format(_value(source, key), spec)
        parts.append(spanish(shown) if lang == "es" else shown)
    if None not in parts:
        return template.format(*parts)
    pieces = template.split("{}")
    pattern = re.escape(pieces[0]) + "".join(
        (r"[\d.,]+" if part is None else re.escape(part)) + re.escape(piece)
        for part, piece in zip(parts, pieces[1:], strict=True))
    return re.compile(pattern)


@pytest.mark.parametrize("lang", ["en", "es"])
@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f"{f.lab[:2]}:{f.en[:40]}")
def test_each_quoted_figure_is_its_committed_value(figure, lang):
    name = f"{figure.lab}.md" if lang == "en" else f"{figure.lab}.es.md"
    phrase = _phrase(figure.en if lang == "en" else figure.es, figure.values, lang)
    text = _text(name)
    found = phrase.search(text) if isinstance(phrase, re.Pattern) else phrase in text
    assert found, (f"lab/{name} should say {phrase.pattern if isinstance(phrase, re.Pattern) else phrase!r}, "
                   f"the committed {', '.join(f'{s}:{k}' for s, k, _ in figure.values if k)}")


def test_the_figure_check_can_fail():
    assert spanish("1,105") == "1105" and spanish("36,149") == "36 149" and spanish("0.071588") == "0,071588"
    wrong = Figure("08-capstone-real-model", "the answer PPL goes from {} to", "", (
        (f"{E22}/quick/scores.json", "after.answer_ppl", ".3f"),))  # the after where the before belongs
    assert _phrase(wrong.en, wrong.values, "en") not in _text("08-capstone-real-model.md")
    assert _value(f"{E22}/quick/scores.json", "after.exact_match *held_out_records") == 2
