"""Bad numbers and bad tables (issue 26, items 1, 3, 6 and 8): a loss too large to exponentiate, weights that are
not finite or not float32, table cells that are not UTF-8, not numbers or not finite. Each ends in a documented
exit code with one `error:` line (or, for a diverging run, exit 3 and status "diverged"), never a traceback, never
a file written from bad numbers, never a lock or a "running" status left behind.

Listed cases first, then generated ones (hypothesis, derandomized; MINITRAIN_DAMAGE_EXAMPLES runs more, with random
seeds, as in tests/training/test_damage.py).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_damage import CONFIG, count, metadata_of, run_cli

from minitrain.callbacks import Callback
from minitrain.common.errors import UserError
from minitrain.config import load_config
from minitrain.course.fixtures import write_tiny_data
from minitrain.evaluation.metrics import PerplexityMeter, perplexity
from minitrain.runs.model_files import _content_digest
from minitrain.runs.run_dir import locate
from minitrain.runs.run_lock import writer_of
from minitrain.training import scoring
from minitrain.training.run import run_training

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("MINITRAIN_DAMAGE_EXAMPLES", "8"))
FUZZ = "MINITRAIN_DAMAGE_EXAMPLES" in os.environ
GENERATED = settings(max_examples=EXAMPLES, derandomize=not FUZZ, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TRAIN = ["train", "config.yaml", "--models-dir", "models", "--quiet"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A finished tiny language-model run: base/config.yaml, base/data/, base/run/ (checkpoints at 4 and 8),
    base/models/; the config and the paths it records are relative to base."""
    base = tmp_path_factory.mktemp("numbers-base")
    write_tiny_data(base, baseline_ppl=1000.0)
    (base / "config.yaml").write_text(CONFIG, encoding="utf-8")
    with contextlib.chdir(base):
        run_training(load_config("config.yaml"), "run", progress=False, models_dir="models",
                     config_path="config.yaml", baseline_path="baseline.json")
    return base


@pytest.fixture
def work(tiny, tmp_path) -> Path:
    """A copy of the tiny run to damage, as the working folder."""
    copy = tmp_path / "w"
    shutil.copytree(tiny, copy)
    for name in ("run/manifest.json", "run/results.json"):  # recorded absolute paths: point them into the copy
        path = copy / name
        path.write_text(path.read_text().replace(str(tiny), str(copy)))
    with contextlib.chdir(copy):
        yield copy


def with_tensors(data: bytes, change) -> bytes:
    """The same file with `change(tensors)` applied and its checksum recomputed (a forger who knows the format)."""
    tensors = safetensors.numpy.load(data)
    meta = metadata_of(data)
    meta.pop("sha256")
    tensors = change(dict(tensors))
    meta["sha256"] = _content_digest(tensors, meta)
    return safetensors.numpy.save(tensors, metadata=meta)


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------------------ 1. a loss too large to exponentiate


def test_the_perplexity_of_a_huge_loss_is_inf_not_an_overflow_error():
    assert perplexity(709.0) == math.exp(709.0) and perplexity(710.0) == math.inf and math.isnan(perplexity(math.nan))
    meter = PerplexityMeter()
    meter.update(np.full((1, 2, 3), -1e4), np.zeros((1, 2), dtype=int), np.ones((1, 2), dtype=bool))
    assert meter.mean_nll == 1e4 and meter.ppl == math.inf


def test_a_huge_finite_val_loss_ends_the_run_as_diverged_with_the_lock_released(work):
    models = sorted((work / "models").iterdir())
    code, _, err = run_cli([*TRAIN, "--out-dir", "big", "--set", "optimizer.lr_max=50", "--set", "optimizer.lr_min=0"])
    assert code == 3, err
    assert one_error(err).startswith("error: training diverged: val_loss ") and "val_ppl inf" in err
    assert manifest(work / "big")["status"] == "diverged" and writer_of(work / "big") is None
    log = (work / "big" / "train_log.jsonl").read_text()
    assert "Infinity" not in log and "NaN" not in log  # the diverged validation is not logged: the log stays JSON
    assert sorted((work / "models").iterdir()) == models


def test_resuming_weights_that_overflow_ends_as_diverged_and_writes_no_model_file(work):
    checkpoint = work / "run" / "checkpoints" / "step-8.safetensors"
    checkpoint.write_bytes(with_tensors(checkpoint.read_bytes(), lambda t: {
        name: a * np.float32(1e30) if not name.startswith("optimizer.") else a for name, a in t.items()}))
    models = sorted((work / "models").iterdir())
    code, _, err = run_cli([*TRAIN, "--out-dir", "run", "--resume", "run"])
    assert code == 3, err
    assert "in the final evaluation after step 7" in one_error(err) and "train_loss nan" in err
    assert manifest(work / "run")["status"] == "diverged" and writer_of(work / "run") is None
    assert sorted((work / "models").iterdir()) == models and not (work / "run" / "results.json").exists()


class Broken(Callback):
    """A watcher with a bug: it raises at the third step."""

    def on_step_end(self, ctx) -> None:
        if ctx.step == 2:
            raise RuntimeError("a bug in a callback")


def test_an_unexpected_exception_leaves_status_failed_and_the_folder_free(work, monkeypatch):
    """A bug in minitrain itself (here: scoring the finished run) keeps its traceback, and the folder says failed."""
    def broken_scoring(*args, **kwargs):
        raise RuntimeError("a bug in scoring")

    monkeypatch.setattr(scoring, "score_held_out_splits", broken_scoring)
    with pytest.raises(RuntimeError, match="a bug in scoring"):
        run_training(load_config("config.yaml"), "broken", progress=False, models_dir="models",
                     config_path="config.yaml", baseline_path="baseline.json")
    recorded = manifest(work / "broken")
    assert recorded["status"] == "failed" and recorded["error"] == "RuntimeError: a bug in scoring"
    assert writer_of(work / "broken") is None


def test_a_callback_that_raises_is_one_error_and_leaves_status_failed(work):
    failed = r"callback Broken failed at step 2 \(step\): RuntimeError: a bug in a callback"
    with pytest.raises(UserError, match=failed):
        run_training(load_config("config.yaml"), "broken", progress=False, models_dir="models",
                     config_path="config.yaml", baseline_path="baseline.json", callbacks=[Broken()])
    assert manifest(work / "broken")["status"] == "failed" and writer_of(work / "broken") is None


# ------------------------------------------------------------------------------------------------------ tables

REPO = Path(__file__).resolve().parents[2]
FEATURES = ("a", "b", "c")
TABLE_CONFIG = """\
name: numbers-table
model:
  type: sequential
  layers: [{{linear: {{out_features: 8}}}}, {{activation: relu}}, {{linear: {{out_features: 2}}}}]
data:
  source: {source}
  split: {{train: 0.7, val: 0.15, test: 0.15}}
  preprocessing: [{{normalize: {{method: minmax}}}}]
optimizer: {{type: adamw, lr_max: 0.01}}
training: {{epochs: 2, batch_size: 16, val_every: 2, log_every: 2}}
monitoring: {{progress: none}}
"""


def table_text(rows: int = 80) -> str:
    rng = np.random.default_rng(0)
    lines = ["a,b,c,label"]
    for a, b, c in rng.random((rows, 3)).round(4):
        lines.append(f"{a},{b},{c},{int(a + b > 1)}")
    return "\n".join(lines) + "\n"


def table_config(folder: Path, source: Path) -> Path:
    path = folder / f"{source.stem}.yaml"
    path.write_text(TABLE_CONFIG.format(source=source), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    """A finished table run: base/t.csv (80 rows: a, b, c, label), base/run/, base/models/."""
    base = tmp_path_factory.mktemp("numbers-table")
    (base / "t.csv").write_text(table_text(), encoding="utf-8")
    with contextlib.chdir(REPO):  # where the default (language-model) data paths a table run still hashes resolve
        run_training(load_config(table_config(base, base / "t.csv")), base / "run", progress=False,
                     models_dir=base / "models")
    return base


def rows_csv(folder: Path, cells: dict[tuple[int, str], bytes] = (), header: bytes | None = None) -> Path:
    """The first 10 rows of the table as a CSV to predict, with `cells` {(row, column): raw bytes} replaced."""
    lines = [line.split(",") for line in table_text(10).splitlines()]
    raw = [[cell.encode() for cell in line] for line in lines]
    for (row, column), value in dict(cells).items():
        raw[row][lines[0].index(column)] = value
    if header is not None:
        raw[0][0] = header
    path = folder / "rows.csv"
    path.write_bytes(b"\n".join(b",".join(line) for line in raw) + b"\n")
    return path


def test_a_header_that_is_not_utf8_is_one_error_in_validate_train_and_predict(table, tmp_path):
    bad = rows_csv(tmp_path, header=b"\xff\xfea")
    config = table_config(tmp_path, bad)
    with contextlib.chdir(REPO):
        for argv in (["validate", str(config)], ["train", str(config), "--out-dir", str(tmp_path / "run"), "--quiet"],
                     ["predict", str(table / "run"), str(bad), "-o", str(tmp_path / "out.csv")]):
            code, _, err = run_cli(argv)
            one_error(err)  # validate and train list the problem under the config's `error:` line
            assert code == 2 and f"{bad}, the header: the name of column 1 is not UTF-8 text" in err, err
    assert not (tmp_path / "run").exists() and not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize(("cell", "message"), [
    (b"xyz", "row 3, column 'b': 'xyz' is not a number, and the normalize step was fitted on numbers"),
    (b"\xff\xfe", "row 3, column 'b': b'\\xff\\xfe' is not UTF-8 text"),
    (b"inf", "row 3, column 'b': inf is not a finite number"),
    (b"-1e308", "(after preprocessing) is past the largest float32 the model reads (3.4e+38)"),
])
def test_predict_refuses_a_bad_cell_naming_file_row_and_column(table, tmp_path, cell, message):
    bad = rows_csv(tmp_path, {(3, "b"): cell})
    code, out, err = run_cli(["predict", str(table / "run"), str(bad), "-o", str(tmp_path / "out.csv")])
    assert code == 2 and one_error(err).startswith(f"error: {bad}, ") and message in err, err
    assert not (tmp_path / "out.csv").exists() and not out


# ------------------------------------------------------------------------------------------------ model files


def replace_model(run: Path, change) -> Path:
    """Rewrite the model file `run` names (a forger recomputing the checksum, and the sha256 the run records);
    returns its path as recorded, which is how a command run from the run's working folder names it."""
    results = json.loads((run / "results.json").read_text())
    model = locate(results["model_path"], run)
    model.write_bytes(with_tensors(model.read_bytes(), change))
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    for name in ("results.json", "manifest.json"):
        recorded = json.loads((run / name).read_text())
        recorded["model_sha256"] = digest
        (run / name).write_text(json.dumps(recorded))
    return Path(results["model_path"])


def set_tensor(name: str, value=None, dtype=None):
    def change(tensors):
        a = tensors[name].copy() if dtype is None else tensors[name].astype(dtype)
        if value is not None:
            a.flat[0] = value
        return {**tensors, name: a}
    return change


WEIGHT = "transformer.h.0.mlp.c_fc.weight"


@pytest.mark.parametrize(("value", "dtype", "message"), [
    (np.nan, None, f"tensor {WEIGHT!r} holds NaN or infinite values"),
    (-np.inf, None, f"tensor {WEIGHT!r} holds NaN or infinite values"),
    (None, np.int8, f"tensor {WEIGHT!r} is stored as int8; minitrain files hold float32 or float64 there"),
    (None, np.bool_, f"tensor {WEIGHT!r} is stored as bool; minitrain files hold float32 or float64 there"),
])
def test_a_model_file_with_bad_weights_is_refused_naming_the_tensor(work, value, dtype, message):
    model = replace_model(work / "run", set_tensor(WEIGHT, value, dtype))
    for argv in (["sample", "run", "--prompt", "caminar|P1|", "--temperature", "1"],
                 ["quantize", "run", "q.safetensors", "--bits", "8"], ["export", "run", "exported"]):
        code, _, err = run_cli(argv)
        assert code == 2 and one_error(err).startswith(f"error: {model}: {message}"), err
    assert not (work / "q.safetensors").exists() and not (work / "exported").exists()


def test_finite_weights_that_overflow_are_refused_by_sample_and_quantize(work):
    replace_model(work / "run", lambda t: {name: a * np.float32(1e30) for name, a in t.items()})
    code, _, err = run_cli(["sample", "run", "--prompt", "caminar|P1|", "--temperature", "1"])
    assert code == 2 and "error: sample run: the model's next-token logits are NaN or infinite" in one_error(err)
    code, _, err = run_cli(["quantize", "run", "q.safetensors", "--bits", "8"])
    assert code == 2 and "val_ppl nan on the val split" in one_error(err) and not (work / "q.safetensors").exists()


def test_predict_refuses_a_table_model_with_nan_weights(table, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(table / "run", run)
    shutil.copytree(table / "models", tmp_path / "models")
    for name in ("results.json", "manifest.json"):
        (run / name).write_text((run / name).read_text().replace(str(table), str(tmp_path)))
    model = replace_model(run, set_tensor("layers.0.weight", np.nan))
    code, _, err = run_cli(["predict", str(run), str(rows_csv(tmp_path)), "-o", str(tmp_path / "out.csv")])
    assert code == 2 and f"{model}: tensor 'layers.0.weight' holds NaN" in one_error(err), err
    assert not (tmp_path / "out.csv").exists()


# ------------------------------------------------------------------------------------------------ generated damage

NOT_UTF8 = st.binary(min_size=1, max_size=4).filter(lambda b: not _decodes(b) and not set(b) & set(b',\r\n"'))
BAD_NUMBERS = st.sampled_from([b"inf", b"-inf", b"nan", b"1e308", b"-1e308", b"3e38", b"1e39", b"-0.0"]) | st.floats(
    allow_nan=True, allow_infinity=True).map(lambda x: repr(x).encode())


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@st.composite
def damaged_rows(draw) -> tuple[str, dict, bytes | None]:
    """(kind, {(row, column): bytes}, header bytes or None): one bad header, or one to three bad cells."""
    kind = draw(st.sampled_from(["header", "not-utf8", "text", "number"]), label="kind")
    if kind == "header":
        return kind, {}, draw(NOT_UTF8) + b"a"
    values = {"not-utf8": NOT_UTF8, "text": st.text("xyzq", min_size=1, max_size=6).map(str.encode),
              "number": BAD_NUMBERS}[kind]
    cells = draw(st.dictionaries(st.tuples(st.integers(1, 10), st.sampled_from(FEATURES)), values, min_size=1,
                                 max_size=3), label="cells")
    return kind, cells, None


def finite_probabilities(path: Path) -> bool:
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    return all(math.isfinite(float(row[k])) for row in rows for k in row if k.startswith("p_"))


@GENERATED
@given(damaged_rows())
def test_damaged_table_rows_give_one_error_line_through_validate_train_and_predict(table, damage):
    kind, cells, header = damage
    count("table rows")
    with tempfile.TemporaryDirectory(prefix="minitrain-numbers-") as tmp, contextlib.chdir(REPO):
        folder = Path(tmp)
        bad = rows_csv(folder, cells, header)
        out = folder / "out.csv"
        code, _, err = run_cli(["predict", str(table / "run"), str(bad), "-o", str(out)])
        must_fail = kind != "number" or any(not math.isfinite(float(v)) or abs(float(v)) > 3.4e38
                                            for v in cells.values())
        assert code in ((2,) if must_fail else (0, 2)), f"{damage}: predict -> {code}\n{err}"
        if code:
            assert one_error(err).startswith(f"error: {bad}") and not out.exists(), f"{damage}\n{err}"
        else:
            assert finite_probabilities(out), damage  # honest output, or none
        # The same damage in the training data (80 rows: 10 damaged): validate, then train when it passes.
        source = folder / "train.csv"
        source.write_bytes(bad.read_bytes() + table_text(80).split("\n", 1)[1].encode())
        config = table_config(folder, source)
        code, _, err = run_cli(["validate", str(config)])
        assert code in (0, 2) and (code == 0 or one_error(err)), f"{damage}: validate -> {code}\n{err}"
        if kind != "number":
            assert code == 2, f"{damage}: validate passed\n{err}"
        run = folder / "run"
        code, _, err = run_cli(["train", str(config), "--out-dir", str(run), "--models-dir", str(folder / "models"),
                                "--quiet"])
        assert code in (0, 2, 3) and (code == 0 or one_error(err)), f"{damage}: train -> {code}\n{err}"
        if code == 2:
            assert not run.exists(), f"{damage}: a refused train left {sorted(run.iterdir())}"
        elif code == 3:
            assert manifest(run)["status"] == "diverged"


BAD_WEIGHTS = st.sampled_from(["nan", "inf", "-inf", "int8", "bool", "float16", "int32", "uint8", "int64"])


def damaged_weights(kind: str, name: str, index: int):
    """A change to one tensor of a model file: one value NaN or infinite, or the whole tensor of another dtype."""
    if kind in ("nan", "inf", "-inf"):
        return lambda t: {**t, name: _with_value(t[name], index, float(kind))}
    return set_tensor(name, dtype=np.dtype(kind))


def _with_value(a: np.ndarray, index: int, value: float) -> np.ndarray:
    a = a.copy()
    a.flat[index % a.size] = value
    return a


@GENERATED
@given(kind=BAD_WEIGHTS, pick=st.integers(0, 2**16), index=st.integers(0, 2**16))
def test_crafted_model_files_are_refused_by_every_reader(tiny, table, kind, pick, index):
    count("model files")
    with tempfile.TemporaryDirectory(prefix="minitrain-numbers-") as tmp:
        work = Path(tmp)
        for name in ("lm", "tab"):
            shutil.copytree(tiny if name == "lm" else table, work / name)
            for recorded in ("run/results.json", "run/manifest.json"):
                path = work / name / recorded
                path.write_text(path.read_text().replace(str(tiny if name == "lm" else table), str(work / name)))
        for name, commands in (("lm", [["sample", "run", "--prompt", "caminar|P1|", "--temperature", "1"],
                                       ["quantize", "run", "q.safetensors", "--bits", "8"],
                                       ["export", "run", "exported"], ["info", "run"]]),
                               ("tab", [["predict", "run", str(rows_csv(work)), "-o", "out.csv"],
                                        ["export", "run", "exported"], ["info", "run"]])):
            run = work / name / "run"
            tensors = sorted(safetensors.numpy.load_file(locate(json.loads((run / "results.json").read_text())[
                "model_path"], run)))
            tensor = tensors[pick % len(tensors)]
            model = replace_model(run, damaged_weights(kind, tensor, index))
            with contextlib.chdir(work / name):
                for argv in commands:
                    code, _, err = run_cli(argv)
                    if argv[0] == "info":  # reads the run's records, not its weights
                        assert code in (0, 2) and (code == 0 or one_error(err)), f"{kind} {tensor}: {err}"
                        continue
                    assert code == 2, f"{kind} {tensor}: minitrain {' '.join(argv)} -> {code}\n{err}"
                    assert one_error(err).startswith(f"error: {model}: tensor {tensor!r}"), err
                assert not any(Path(p).exists() for p in ("q.safetensors", "exported", "out.csv"))
