"""docs/yaml-mode.md's tables of model families, optimizers and schedules say what the registries hold: every
registered type is listed, every key of a type has a row, and each row names exactly the types that take it. A
new family, optimizer or schedule without its docs fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from minitrain.config.schema import MODEL_KEYS, OPTIMIZER_KEYS, SCHEDULER_KEYS
from minitrain.models.registry import FAMILIES

DOCS = Path(__file__).resolve().parents[1] / "docs" / "yaml-mode.md"


def section_rows(heading: str) -> list[list[str]]:
    """The table rows (cells, stripped) of the `### heading` section, header and rule left out."""
    text = DOCS.read_text(encoding="utf-8")
    body = text.split(f"\n### `{heading}`\n", 1)[1].split("\n### ", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in body.splitlines()
            if line.startswith("|")]
    return rows[2:]


def keys_of(cell: str) -> list[str]:
    return re.findall(r"`(\w+)`", cell)


def types_of(cell: str, every: list[str]) -> set[str]:
    """"all", "all but one_cycle", "step (0.1), exponential (required)" -> the set of type names."""
    cell = re.sub(r"\([^)]*\)", "", cell)
    if cell.startswith("all but "):
        return set(every) - {name.strip() for name in cell.removeprefix("all but ").split(",")}
    if cell == "all":
        return set(every)
    return {name.strip() for name in cell.split(",")}


@pytest.mark.parametrize(("heading", "table"), [("optimizer", OPTIMIZER_KEYS), ("scheduler", SCHEDULER_KEYS)])
def test_each_key_row_names_exactly_the_types_that_take_it(heading, table):
    rows = section_rows(heading)
    every = list(table)
    type_row = next(row for row in rows if keys_of(row[0]) == ["type"])
    assert [name.strip() for name in type_row[3].split(",")] == every  # the registry's types, in its order
    documented = set()
    for row in rows:
        for key in keys_of(row[0]):
            if key == "type":
                continue
            documented.add(key)
            users = {name for name, keys in table.items() if key in keys}
            assert types_of(row[1], every) == users, f"{heading}.{key}: the docs say {row[1]!r}"
    assert documented == set().union(*table.values()) - {"type"}


def test_the_model_table_lists_every_family_and_its_keys():
    rows = section_rows("model")
    type_row = next(row for row in rows if keys_of(row[0]) == ["type"])
    assert keys_of(type_row[1]) == list(FAMILIES)
    shared = set.intersection(*MODEL_KEYS.values())
    headed: dict[str, set[str]] = {"": set()}
    family = ""
    for row in rows:
        if match := re.fullmatch(r"\*\*(\w+)\*\*", row[0]):
            family = match.group(1)
            headed[family] = set()
        else:
            headed[family] |= set(keys_of(row[0]))
    assert set(headed) - {""} == set(FAMILIES)  # a heading row for each family
    assert headed[""] - {"type"} >= shared - {"type"}  # the keys every family has, before the families
    for name, family in FAMILIES.items():
        assert headed[name] == set(family.keys.model_fields), f"model keys of {name}"


def test_trackers_and_callbacks_are_built_for_exactly_the_schemas_names_and_the_docs_list_them():
    from minitrain.config.observing import CALLBACK_OPTIONS, DEFAULT_TRIGGER, TRACKER_BACKENDS, CallbackEntry
    from minitrain.tracking import TRACKERS
    from minitrain.training.watchers import BUILDERS

    assert list(TRACKERS) == list(TRACKER_BACKENDS)
    assert list(BUILDERS) == list(CALLBACK_OPTIONS) == list(DEFAULT_TRIGGER)
    assert list(CallbackEntry.model_fields["type"].annotation.__args__) == list(CALLBACK_OPTIONS)
    text = DOCS.read_text(encoding="utf-8")
    listed = lambda names: ", ".join(f"`{name}`" for name in names)  # noqa: E731
    assert f"| `tracking.backend` | {listed(TRACKER_BACKENDS)} |" in text
    assert f"| `type` | {listed(CALLBACK_OPTIONS)} |" in text
    for name in CALLBACK_OPTIONS:  # the callbacks table has a row for each type
        assert re.search(rf"^\| `{name}` \| {DEFAULT_TRIGGER[name]} \|", text, re.M), name
