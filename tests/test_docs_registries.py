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


def test_trackers_and_callbacks_are_listed_by_the_docs_from_their_registries():
    from minitrain.config.observing import CALLBACKS, CHARTS, TRACKER_BACKENDS, CallbackEntry

    assert list(CallbackEntry.model_fields["type"].annotation.__args__) == list(CALLBACKS)
    text = DOCS.read_text(encoding="utf-8")
    listed = lambda names: ", ".join(f"`{name}`" for name in names)  # noqa: E731
    assert f"| `tracking.backend` | {listed(TRACKER_BACKENDS)} |" in text
    assert f"| `dashboard.charts[].type` | {listed(CHARTS)} |" in text
    assert f"| `type` | {listed(CALLBACKS)} |" in text
    for name, kind in CALLBACKS.items():  # the callbacks table has a row for each type
        assert re.search(rf"^\| `{name}` \| {kind.trigger} \|", text, re.M), name


def test_the_merging_page_lists_every_merge_method_in_the_registrys_order():
    from minitrain.merging.methods import MERGE_METHODS

    text = (DOCS.parent / "merging.md").read_text(encoding="utf-8")
    table = text.split("| method | merged tensor | file |", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"^\| `(\w+)`", table, re.M) == list(MERGE_METHODS)
    assert f"merge_method: ties                 # {' | '.join(MERGE_METHODS)}\n" in text


def test_the_architecture_page_names_each_registry_and_its_record():
    from minitrain.autograd.loss_kinds import LOSSES
    from minitrain.config.observing import CALLBACKS, CHARTS, TRACKER_BACKENDS
    from minitrain.data.formats import TABLE_FORMATS
    from minitrain.formats.gguf_layouts import GGUF_LAYOUTS
    from minitrain.merging.methods import MERGE_METHODS
    from minitrain.models.sequential_layers import LAYERS
    from minitrain.pruning.masks import STRUCTURES
    from minitrain.pruning.scores import METHODS as PRUNING_METHODS

    text = (DOCS.parent / "architecture.md").read_text(encoding="utf-8")
    table = text.split("## One registry per plug-in kind\n", 1)[1].split("\n\n", 1)[0]
    for registry, name in [(MERGE_METHODS, "MERGE_METHODS"), (PRUNING_METHODS, "METHODS"), (STRUCTURES, "STRUCTURES"),
                           (TRACKER_BACKENDS, "TRACKER_BACKENDS"), (CALLBACKS, "CALLBACKS"),
                           (TABLE_FORMATS, "TABLE_FORMATS"), (GGUF_LAYOUTS, "GGUF_LAYOUTS"), (CHARTS, "CHARTS"),
                           (LOSSES, "LOSSES"), (LAYERS, "LAYERS")]:
        record = type(next(iter(registry.values())))
        fields = ", ".join(record.__dataclass_fields__)
        assert f"`{name}`: `{record.__name__}({fields})`" in table, f"{registry.kind}: {record.__name__}({fields})"


def test_the_data_formats_rows_name_every_table_format():
    from minitrain.data.formats import TABLE_FORMATS

    rows = [row for row in section_rows("data") if keys_of(row[0]) == ["format"]]
    # the type cells: all but the key, the default and the meaning (an escaped \| splits a cell in two)
    assert {name for row in rows for cell in row[1:-2] for name in keys_of(cell)} == {*TABLE_FORMATS, "auto"}
