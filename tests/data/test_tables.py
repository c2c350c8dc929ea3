"""Tables as training data: formats (pyarrow), sources (file, folder, hf:// dataset on the stand-in Hub), splits
and folds, preprocessing fitted on train, targets, and the errors that name the file, row and column."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.csv
import pyarrow.ipc
import pyarrow.parquet
import pytest
from huggingface_hub import constants

from minitrain.common.errors import DataError, UserError
from minitrain.config import config_from_dict
from minitrain.data.formats import read_table
from minitrain.data.locate import locate_source, split_of
from minitrain.data.preprocessing import Preprocessing, expand_columns
from minitrain.data.row_split import fold_rows, split_rows
from minitrain.data.tables import TablePipeline, build_table_data, infer_task

ROWS = [{"x": 1.5, "color": "red", "label": "a"}, {"x": 2.0, "color": "blue", "label": "b"},
        {"x": None, "color": "red", "label": "a"}, {"x": 4.0, "color": "green", "label": "b"}]


def write_all_formats(folder, rows=ROWS) -> dict[str, object]:
    """The same rows as csv, jsonl, json, parquet and arrow files."""
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows)
    paths = {fmt: folder / f"rows.{fmt}" for fmt in ("csv", "jsonl", "json", "parquet", "arrow")}
    pyarrow.csv.write_csv(table, paths["csv"])
    paths["jsonl"].write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    paths["json"].write_text(json.dumps(rows), "utf-8")
    pyarrow.parquet.write_table(table, paths["parquet"])
    with pyarrow.ipc.new_file(paths["arrow"], table.schema) as writer:
        writer.write_table(table)
    return paths


# --- formats ------------------------------------------------------------------------------------------------


def test_a_stream_arrow_file_reads_too(tmp_path):
    table = pa.Table.from_pylist(ROWS)
    path = tmp_path / "rows.arrow"
    with pa.OSFile(str(path), "wb") as sink, pyarrow.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    assert read_table(path).num_rows == 4


@pytest.mark.parametrize(("name", "text", "fmt", "message"), [
    ("bad.csv", "a,b\n1,2\n3\n", None, "Expected 2 columns, got 1"),
    ("bad.csv", "a,b\n1,2\n3\n", None, "Row #3"),
    ("bad.jsonl", '{"a": 1}\n{"a": \n', None, "cannot read it as jsonl"),
    ("bad.json", '[{"a": 1}, {"a": "x"}]', None, "row 2, column 'a': 'x' is a str where earlier rows hold int"),
    ("bad.json", '{"a": [1, 2]}', None, "must hold one array of objects"),
    ("bad.json", '[{"a": 1},', None, "bad.json:1: not valid JSON"),
    ("bad.parquet", "not parquet", None, "cannot read it as parquet"),
    ("empty.csv", "a,b\n", None, "holds no rows"),
    ("rows.dat", "a\n1\n", None, "cannot tell its format from the extension"),
])
def test_a_bad_file_is_one_error_naming_it(tmp_path, name, text, fmt, message):
    path = tmp_path / name
    path.write_text(text, "utf-8")
    with pytest.raises(UserError) as info:
        read_table(path, fmt)
    assert str(info.value).startswith(str(path)) and message in str(info.value)


# --- sources --------------------------------------------------------------------------------------------------


def test_a_folder_source_finds_the_split_files(tmp_path):
    for name in ("train-00000-of-00002.parquet", "train-00001-of-00002.parquet", "validation.parquet",
                 "test.parquet"):
        pyarrow.parquet.write_table(pa.Table.from_pylist(ROWS), tmp_path / name)
    found = locate_source(str(tmp_path))
    assert sorted(found) == ["test", "train", "val"] and len(found["train"]) == 2
    assert split_of(tmp_path / "dev.csv") == "val" and split_of(tmp_path / "digits.csv") is None


def test_a_folder_of_unnamed_files_is_refused(tmp_path):
    for name in ("a.csv", "b.csv"):
        (tmp_path / name).write_text("x\n1\n", "utf-8")
    with pytest.raises(DataError, match="2 data files and none named after a split"):
        locate_source(str(tmp_path))


def test_a_hub_dataset_downloads_into_the_cache_and_works_offline(hub, tmp_path, monkeypatch):
    csv = b"x,label\n" + b"".join(b"%d,%d\n" % (i, i % 2) for i in range(20))
    hub.add_dataset("alice/parity", {"data/train.csv": csv, "data/test.csv": csv, "README.md": b"# parity\n"})
    found = locate_source("hf://datasets/alice/parity")
    assert sorted(found) == ["test", "train"]
    assert str(found["train"][0]).startswith(str(constants.HF_HUB_CACHE))
    assert found["train"][0].read_bytes() == csv
    one = locate_source("hf://alice/parity/data/test.csv")  # the `datasets/` part may be left out; a path
    assert one == {"all": [found["test"][0]]}
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub.requests.clear()
    assert locate_source("hf://datasets/alice/parity") == found  # offline: the cached copy, no request
    assert hub.requests == []


def test_a_missing_hub_dataset_is_one_error(hub):
    with pytest.raises(DataError, match="no such dataset repo"):
        locate_source("hf://datasets/alice/nothing")


# --- splits and folds -----------------------------------------------------------------------------------------


def test_a_stratified_split_keeps_each_class_in_proportion_and_is_seeded():
    labels = np.repeat(["a", "b", "c"], [50, 30, 20])
    split = split_rows(100, {"train": 0.8, "val": 0.1, "test": 0.1}, seed=3, stratify=labels)
    assert {k: len(v) for k, v in split.items()} == {"train": 80, "val": 10, "test": 10}
    assert sorted(np.concatenate(list(split.values())).tolist()) == list(range(100))  # each row once
    for rows in (split["val"], split["test"]):
        assert sorted(np.unique(labels[rows], return_counts=True)[1].tolist()) == [2, 3, 5]
    again = split_rows(100, {"train": 0.8, "val": 0.1, "test": 0.1}, seed=3, stratify=labels)
    other = split_rows(100, {"train": 0.8, "val": 0.1, "test": 0.1}, seed=4, stratify=labels)
    assert all((again[k] == split[k]).all() for k in split) and not (other["val"] == split["val"]).all()


def test_a_split_that_would_be_empty_is_refused():
    with pytest.raises(UserError, match="a split would be empty"):
        split_rows(5, {"train": 0.9, "val": 0.05, "test": 0.05}, seed=0)


def test_stratified_folds_partition_the_rows_and_spread_each_class():
    labels = np.repeat([0, 1], [60, 40])
    folds = fold_rows(100, 5, seed=1, shuffle=True, stratify=labels)
    assert sorted(np.concatenate(folds).tolist()) == list(range(100))
    for fold in folds:
        assert np.bincount(labels[fold]).tolist() == [12, 8]
    plain = fold_rows(10, 3, seed=0, shuffle=False)
    assert [f.tolist() for f in plain] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]


# --- preprocessing --------------------------------------------------------------------------------------------


def test_preprocessing_is_fitted_on_train_and_applied_unchanged():
    train = {"x": np.array([0.0, 2.0, np.nan, 4.0]), "c": np.array(["b", "a", "b", None], dtype=object),
             "id": np.arange(4.0)}
    steps = [{"drop": {"columns": ["id"]}}, {"fillna": {"columns": ["x"], "strategy": "median"}},
             {"fillna": {"columns": ["c"], "strategy": "mode"}}, {"encode": {"columns": ["c"], "method": "onehot"}},
             {"normalize": {"columns": ["x"], "method": "minmax"}}]
    fitted, done = Preprocessing.fit(steps, train)
    assert list(done) == ["x", "c=a", "c=b"]
    np.testing.assert_allclose(done["x"], [0.0, 0.5, 0.5, 1.0])  # median 2 fills the gap; min 0, max 4
    np.testing.assert_array_equal(done["c=b"], [1, 0, 1, 1])  # the mode, b, fills the gap
    again = Preprocessing.from_dict(json.loads(json.dumps(fitted.to_dict())))  # saved as JSON, read back
    other = again.transform({"x": np.array([8.0]), "c": np.array(["a"], dtype=object), "id": np.zeros(1)}, "val")
    assert other["x"].tolist() == [2.0] and other["c=a"].tolist() == [1.0]  # train's min/max, not val's


@pytest.mark.parametrize("method", ["zscore", "robust"])
def test_normalize_matches_scikit_learn(method):
    from sklearn.preprocessing import RobustScaler, StandardScaler

    x = np.random.default_rng(0).normal(3, 2, size=(50, 3))
    columns = {f"f{i}": x[:, i] for i in range(3)}
    _, done = Preprocessing.fit([{"normalize": {"method": method}}], columns)
    ours = np.stack(list(done.values()), axis=1)
    theirs = (StandardScaler() if method == "zscore" else RobustScaler()).fit_transform(x)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_label_and_ordinal_encoding():
    column = {"size": np.array(["m", "s", "l", "s"], dtype=object)}
    _, label = Preprocessing.fit([{"encode": {"columns": ["size"], "method": "label"}}], column)
    assert label["size"].tolist() == [1, 2, 0, 2]  # sorted: l, m, s
    _, ordinal = Preprocessing.fit([{"encode": {"columns": ["size"], "method": "ordinal",
                                                "categories": ["s", "m", "l"]}}], column)
    assert ordinal["size"].tolist() == [1, 0, 2, 0]


def test_constant_fill_and_mean_fill():
    column = {"x": np.array([1.0, np.nan, 3.0])}
    assert Preprocessing.fit([{"fillna": {"strategy": "mean"}}], column)[1]["x"].tolist() == [1.0, 2.0, 3.0]
    assert Preprocessing.fit([{"fillna": {"strategy": "constant", "value": -1}}], column)[1]["x"].tolist() == [
        1.0, -1.0, 3.0]


@pytest.mark.parametrize(("steps", "message"), [
    ([{"drop": {"columns": ["nope"]}}], "data.preprocessing[0].drop: column 'nope' is not in the table"),
    ([{"normalize": {"columns": ["c"]}}], "column 'c' holds text; encode it before normalizing"),
    ([{"encode": {"columns": ["c"]}}], "row 3 of the training split: missing value; add a fillna step"),
    ([{"fillna": {"columns": ["c"], "strategy": "mean"}}], "holds text, which has no mean"),
    ([{"normalize": {"columns": ["x_1", "...", "x_0"]}}], "'...' must stand between two names"),
])
def test_a_step_that_does_not_fit_the_table_names_the_step_and_column(steps, message):
    columns = {"x_0": np.zeros(3), "x_1": np.ones(3), "c": np.array(["a", "b", None], dtype=object)}
    with pytest.raises(DataError) as info:
        Preprocessing.fit(steps, columns)
    assert message in str(info.value)


def test_the_spec_s_column_run_is_expanded():
    names = [f"pixel_{i}" for i in range(784)]
    assert expand_columns(["pixel_0", "pixel_1", "...", "pixel_783"], names, ("k",)) == names


def test_an_unseen_category_is_an_error_naming_row_and_column():
    fitted, _ = Preprocessing.fit([{"encode": {"columns": ["c"]}}], {"c": np.array(["a", "b"], dtype=object)})
    with pytest.raises(DataError, match="the val split, row 2, column 'c': value 'z' was not seen in training"):
        fitted.transform({"c": np.array(["a", "z"], dtype=object)}, "the val split")


# --- tables as training data --------------------------------------------------------------------------------


def table_config(source, **data) -> object:
    return config_from_dict({"model": {"type": "sequential", "layers": [{"linear": {"out_features": 2}}]},
                             "data": {"source": str(source), **data}, "training": {"total_steps": 5}})


def test_a_table_becomes_arrays_with_encoded_classes(tmp_path):
    rows = [{"x": float(i), "color": "red" if i % 3 else "blue", "label": "yes" if i % 2 else "no"} for i in range(40)]
    path = write_all_formats(tmp_path, rows)["parquet"]
    cfg = table_config(path, split={"train": 0.5, "val": 0.25, "test": 0.25, "stratify": "label"},
                       preprocessing=[{"encode": {"columns": ["color"]}}, {"normalize": {"method": "zscore"}}])
    table = build_table_data(cfg.data, None, seed=7)
    assert table.pipeline.task == "classification" and table.pipeline.classes == ["no", "yes"]
    assert table.pipeline.features == ["x", "color=blue", "color=red"]
    train = table.splits["train"]
    assert train.input.shape == (20, 3) and train.input.dtype == np.float32 and train.target.dtype == np.int64
    np.testing.assert_allclose(train.input.mean(axis=0), 0, atol=1e-6)  # zscore fitted on train
    assert {len(b.target) for name, b in table.splits.items() if name != "train"} == {10}
    info = table.info
    assert info["splits"]["train"]["rows"] == 20 and len(info["splits"]["test"]["sha256"]) == 64
    assert info["files"][0]["sha256"] and info["task"] == "classification"
    again = TablePipeline.from_dict(json.loads(json.dumps(table.pipeline.to_dict())))
    assert again == table.pipeline


def test_regression_is_inferred_from_a_target_of_fractions(tmp_path):
    rows = [{"x": float(i), "label": i / 3} for i in range(20)]
    cfg = table_config(write_all_formats(tmp_path, rows)["csv"], split={"train": 0.6, "val": 0.4})
    table = build_table_data(cfg.data, None, seed=0)
    assert table.pipeline.task == "regression" and table.splits["val"].target.shape == (8, 1)
    assert infer_task(np.array([1.0, 2.0])) == "classification"


@pytest.mark.parametrize(("rows", "data", "key", "message"), [
    ([{"x": 1.0, "y": 0}] * 10, {"split": {"train": 0.5, "val": 0.5}}, ("data", "target"),
     "column 'label' is not in the data"),
    ([{"x": 1.0, "label": 0}] * 10, {}, ("data", "split"), "holds every row: say how to split it"),
    ([{"x": "a", "label": i % 2} for i in range(10)], {"split": {"train": 0.5, "val": 0.5}},
     ("data", "preprocessing"), "column 'x': 'a' is not a number; encode the column"),
    ([{"x": 1.0, "label": 0}] * 10, {"split": {"train": 0.5, "val": 0.5}}, ("data", "target"),
     "has only 1 class"),
])
def test_a_bad_table_is_one_error_under_its_key(tmp_path, rows, data, key, message):
    cfg = table_config(write_all_formats(tmp_path, rows)["csv"], **data)
    with pytest.raises(DataError) as info:
        build_table_data(cfg.data, None, seed=0)
    assert info.value.key == key and message in info.value.detail


def test_a_class_missing_from_train_is_named(tmp_path):
    write_all_formats(tmp_path / "train", [{"x": 1.0, "label": "a"}, {"x": 2.0, "label": "b"}])
    write_all_formats(tmp_path / "val", [{"x": 1.0, "label": "c"}])
    cfg = config_from_dict({"model": {"type": "sequential", "layers": [{"linear": {"out_features": 2}}]},
                            "data": {"train": str(tmp_path / "train" / "rows.csv"),
                                     "val": str(tmp_path / "val" / "rows.csv")}, "training": {"total_steps": 5}})
    with pytest.raises(DataError, match="the val split, row 1: class 'c' of 'label' never occurs in the training"):
        build_table_data(cfg.data, None, seed=0)
