"""Damage, generated rather than listed: a real run folder, one artifact damaged at a time, every command run on it.

A tiny run is trained once. Each example copies it into a fresh temporary folder, applies one random damage to one
file (truncate it, flip bytes, insert bytes that are not UTF-8, delete it, put a folder, a FIFO or a symbolic-link
loop in its place, nest it 100,000 levels deep, give a JSON value another type, write an integer of thousands of
digits, or craft a checkpoint's metadata and recompute its checksum), then runs `info`, `export`, `sample`,
`validate` and `train --resume` in-process, as the CLI runs them. Every command must

    exit with a documented code (0, 1, 2, 3, 4, 130, 143),
    print exactly one `error:` line when it fails and none when it succeeds, and never a traceback,
    finish within TIMEOUT seconds (no hang),
    change nothing outside the example's temporary folder.

`make test` runs a fixed number of examples from a fixed seed (hypothesis' derandomize); `make fuzz` runs many more
(MINITRAIN_DAMAGE_EXAMPLES, random seeds). The session ends with a line saying how many damaged cases it tried.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minitrain import cli
from minitrain.config import load_config
from minitrain.course.fixtures import write_tiny_data
from minitrain.runs.model_files import _content_digest
from minitrain.training.run import run_training

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("MINITRAIN_DAMAGE_EXAMPLES", "30"))
FUZZ = "MINITRAIN_DAMAGE_EXAMPLES" in os.environ
TIMEOUT = 60  # seconds per command; the slowest, a resume that only finishes the run, takes about one
EXIT_CODES = {0, 1, 2, 3, 4, 130, 143}
REPO = Path(__file__).resolve().parents[2]
STATS: Counter = Counter()

CONFIG = """\
model: {n_layer: 1, n_head: 2, d_model: 16, d_ff: 32, vocab_size: 64, max_seq_len: 32}
optimizer: {type: adamw, lr_max: 3.0e-3, lr_min: 3.0e-4, clip: 1.0}
scheduler: {warmup_steps: 2, total_steps: 8}
training:
  batch_size: 4
  val_every: 4
  log_every: 2
  checkpoint: {save_every: 4}
data: {train_path: data/train.jsonl, val_path: data/val.jsonl, vocab_path: data/vocab.json}
monitoring: {progress: none}
"""


class Hang(BaseException):
    """A command ran past TIMEOUT (a BaseException, so no handler in minitrain can swallow it)."""


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A finished run: base/config.yaml, base/data/, base/run/, base/models/; paths in it relative to base."""
    base = tmp_path_factory.mktemp("damage-base")
    write_tiny_data(base, baseline_ppl=1000.0)
    (base / "config.yaml").write_text(CONFIG, encoding="utf-8")
    with contextlib.chdir(base):
        run_training(load_config("config.yaml"), "run", progress=False, models_dir="models", config_path="config.yaml",
                     baseline_path="baseline.json")
    return base


def count(surface: str) -> None:
    """One generated case of a damage suite (tests/*/test_damage*.py), under the surface it damages."""
    STATS["cases"] += 1
    STATS[f"surface:{surface}"] += 1


def summary() -> str:
    """The line the test session ends with (tests/conftest.py prints it): every damage suite's cases, by surface."""
    surfaces = ", ".join(f"{key.removeprefix('surface:')} {n}" for key, n in sorted(STATS.items())
                         if key.startswith("surface:"))
    return (f"damage suite: {STATS['cases']} damaged cases ({surfaces}), {STATS['commands']} command runs, "
            f"{STATS['tracebacks']} tracebacks, {STATS['failed']} clean errors, "
            f"{STATS['slowest'] / 1000:.1f} s slowest command")


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file under `folder` (links not followed) and a hash of its bytes."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            found[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


# ------------------------------------------------------------------------------------------------------ damage

# Not here: the config file the commands are given (config.yaml at the top). Reading it (a FIFO, a folder, a
# YAML alias bomb, deep nesting) is the config loader's, tested with it (issue 14); add it once both are merged.
TARGETS = ["run/manifest.json", "run/results.json", "run/config.resolved.yaml", "run/config.yaml",
           "run/train_log.jsonl", "run/metrics.csv", "run/report.md", "run/.run.lock", "run/checkpoints/latest",
           "run/checkpoints/step-8.safetensors", "run/checkpoints/step-4.safetensors", "MODEL",
           "data/vocab.json", "data/train.jsonl", "data/val.jsonl"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=8)
    | st.sampled_from([-1e308, 1e308, 0.0, -0.0, 1e-320, float("nan"), float("inf"), -1.0, 47, "47", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def json_paths(value, prefix=()):
    """Every key path into a parsed JSON value (objects and lists)."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from json_paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from json_paths(child, (*prefix, index))


def replaced(value, path, new):
    if not path:
        return new
    value[path[0]] = replaced(value[path[0]], path[1:], new)
    return value


def to_json(value) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")  # NaN/Infinity as Python writes them


@st.composite
def damage(draw, data: bytes, name: str):
    """(description, new bytes or a marker for a non-file) for the file `name` holding `data`."""
    kinds = ["truncate", "flip", "non-utf8", "delete", "folder", "fifo", "link-loop", "nest", "huge-int", "empty"]
    if name.endswith((".json", ".lock")):
        kinds += ["json-value"] * 4
    if name.endswith(".jsonl"):
        kinds += ["json-line"] * 3
    if name.endswith(".safetensors"):
        kinds += ["crafted-metadata"] * 4
    kind = draw(st.sampled_from(kinds))
    if kind in ("truncate", "flip", "non-utf8", "nest", "huge-int", "empty"):
        return damaged_bytes(draw, kind, data)
    if kind in ("json-value", "json-line"):
        return damaged_json(draw, kind, data)
    if kind == "crafted-metadata":
        return crafted(draw, data)
    return kind, None  # delete, folder, fifo, link-loop: no bytes


def damaged_bytes(draw, kind: str, data: bytes) -> tuple[str, bytes]:
    """(description, new bytes): `data` cut, flipped, made non-UTF-8, replaced by deep nesting, given a huge
    integer, or emptied."""
    if kind == "truncate":
        cut = draw(st.integers(0, max(len(data) - 1, 0)))
        return f"truncate at {cut}", data[:cut]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            if out:
                at = draw(st.integers(0, len(out) - 1))
                out[at] ^= draw(st.integers(1, 255))
        return "flip bytes", bytes(out)
    if kind == "non-utf8":
        at = draw(st.integers(0, len(data)))
        bad = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80"]))  # stray, truncated, surrogate
        return f"non-UTF-8 at {at}", data[:at] + bad + data[at:]
    if kind == "nest":
        depth = draw(st.sampled_from([70, 1000, 100_000]))
        return f"nested {depth} deep", b"[" * depth + b"]" * depth if draw(st.booleans()) else \
            b'{"a": ' + b"[" * depth + b"]" * depth + b"}"
    if kind == "huge-int":
        digits = draw(st.sampled_from([400, 4301, 5000]))
        number = b"1" + b"0" * (digits - 1)
        at = next((i for i, c in enumerate(data) if chr(c).isdigit()), None)
        return f"{digits}-digit integer", (data[:at] + number + data[at + 1:]) if at is not None else number
    return "emptied", b""


def damaged_json(draw, kind: str, data: bytes) -> tuple[str, bytes]:
    """(description, new bytes): one value of a JSON file replaced, or one row of a JSON-lines log changed."""
    if kind == "json-value":
        try:
            parsed = json.loads(data)
        except ValueError:
            return "not JSON to begin with", data
        path = draw(st.sampled_from(list(json_paths(parsed))))
        new = draw(json_values)
        return f"{'.'.join(map(str, path)) or 'whole file'} = {new!r}"[:120], to_json(replaced(parsed, path, new))
    lines = data.splitlines()
    if not lines:
        return "empty log", data
    at = draw(st.integers(0, len(lines) - 1))
    row = json.loads(lines[at])
    key = draw(st.sampled_from([*row, "val_ppl", "step"]))
    if draw(st.booleans()):
        row.pop(key, None)
        new_line = to_json(row)
    else:
        new_line = to_json({**row, key: draw(json_values)})
    return f"log line {at + 1}: {new_line[:80]!r}", b"\n".join([*lines[:at], new_line, *lines[at + 1:]]) + b"\n"


def crafted(draw, data: bytes) -> tuple[str, bytes]:
    """A minitrain safetensors file with one metadata value changed and its checksum recomputed to match."""
    meta = metadata_of(data)
    key = draw(st.sampled_from(sorted(k for k in meta if k not in ("format", "sha256"))))
    value = json.loads(meta[key])
    if key == "model_config" and draw(st.booleans()):
        field = draw(st.sampled_from(["n_layer", "n_head", "d_model", "d_ff", "vocab_size", "max_seq_len", "dropout"]))
        value[field] = draw(st.sampled_from([0, -1, 10**6, 3, "4", None, 2.5, True, 1.0]))
        what = f"model_config.{field} = {value[field]!r}"
    elif isinstance(value, dict) and value and draw(st.booleans()):
        inner = draw(st.sampled_from(sorted(value)))
        value[inner] = draw(json_values)
        what = f"{key}.{inner} = {value[inner]!r}"
    elif draw(st.booleans()):
        value = draw(json_values)
        what = f"{key} = {value!r}"
    else:
        value, what = DELETE, f"{key} deleted"
    return f"crafted {what}"[:120], with_metadata(data, {key: value})


DELETE = object()


def metadata_of(data: bytes) -> dict[str, str]:
    """The raw `__metadata__` map of a safetensors file's bytes."""
    (length,) = np.frombuffer(data[:8], dtype="<u8")
    return json.loads(data[8 : 8 + int(length)])["__metadata__"]


def with_metadata(data: bytes, changes: dict) -> bytes:
    """The same tensors with metadata values replaced (JSON values; DELETE removes the key) and the checksum
    recomputed, as someone who knows the format would forge it."""
    tensors = safetensors.numpy.load(data)
    meta = metadata_of(data)
    meta.pop("sha256")
    for key, value in changes.items():
        if value is DELETE:
            meta.pop(key, None)
        else:
            meta[key] = json.dumps(value)
    meta["sha256"] = _content_digest(tensors, meta)
    return safetensors.numpy.save(tensors, metadata=meta)


def apply(path: Path, kind: str, new: bytes | None) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    if new is not None:
        path.write_bytes(new)
    elif kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-loop":
        path.symlink_to(path.name)  # a link to itself


# ----------------------------------------------------------------------------------------------------- commands


@contextlib.contextmanager
def hang_guard(seconds: int, what: str):
    """Fail with `what` if the block runs past `seconds` (SIGALRM): a hang guard, not a speed check, so a slow or
    busy machine passes and a hang fails instead of stalling the suite."""

    def hang(signum, frame):
        raise Hang(f"{what} ran past {seconds} s")  # a BaseException: no handler in minitrain swallows it

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """`minitrain ARGV` in-process: (exit code, stdout, stderr); a traceback fails the example."""
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    try:
        with hang_guard(TIMEOUT, f"minitrain {' '.join(argv)}"), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = cli.main(argv)
    except SystemExit as e:  # argparse refusing a flag's value: its usage and `minitrain CMD: error: ...`, exit 2
        code = e.code
    except BaseException:
        STATS["tracebacks"] += 1
        raise
    finally:
        STATS["commands"] += 1
        STATS["slowest"] = max(STATS["slowest"], int(1000 * (time.perf_counter() - start)))
    return code, out.getvalue(), err.getvalue()


def check(argv: list[str], what: str) -> None:
    code, _, err = run_cli(argv)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    context = f"{what}: minitrain {' '.join(argv)} -> {code}\n{err}"
    assert code in EXIT_CODES, context
    assert "Traceback" not in err, context
    assert len(errors) == (0 if code == 0 else 1), context
    STATS["failed"] += code != 0


@settings(max_examples=EXAMPLES, derandomize=not FUZZ, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_damaged_run_artifacts_give_one_error_line_never_a_traceback(pristine, data):
    before = fingerprint(pristine), fingerprint(REPO / "models")
    with tempfile.TemporaryDirectory(prefix="minitrain-damage-") as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(pristine, work, symlinks=True)
        for name in ("run/manifest.json", "run/results.json"):  # recorded paths: point them into the copy
            path = work / name
            path.write_text(path.read_text().replace(str(pristine), str(work)))
        model = next((work / "models").glob("minigpt-*.safetensors"))
        target = data.draw(st.sampled_from(TARGETS), label="file")
        path = model if target == "MODEL" else work / target
        kind, new = data.draw(damage(path.read_bytes() if path.is_file() else b"", path.name), label="damage")
        apply(path, kind, new)
        count("run folders")
        what = f"{target}: {kind}"
        with contextlib.chdir(work):
            check(["info", "run"], what)
            check(["export", "run", "export"], what)
            check(["sample", "run", "--prompt", "caminar|P1|", "--max-new-tokens", "8"], what)
            check(["validate", "config.yaml"], what)
            check(["train", "config.yaml", "--resume", "run", "--out-dir", "run", "--models-dir", "models", "--quiet"],
                  what)
    assert (fingerprint(pristine), fingerprint(REPO / "models")) == before  # nothing outside the example changed
