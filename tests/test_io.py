"""Atomic writes: a failed write leaves the previous file intact and no temporary file behind."""

import json
import os

import pytest

from minitrain.errors import UserError
from minitrain.io import append_line, atomic_write, atomic_write_json, atomic_write_text


def test_atomic_write_replaces_and_uses_normal_mode(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    atomic_write_text(target, "first")
    atomic_write_text(target, "second")
    assert target.read_text() == "second"
    assert os.stat(target).st_mode & 0o777 == 0o666 & ~_umask()
    assert os.listdir(target.parent) == ["out.txt"]


def test_failed_write_keeps_previous_file(tmp_path):
    target = tmp_path / "out.json"
    atomic_write_json(target, {"a": 1})

    def explode(f):
        f.write(b"partial")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        atomic_write(target, explode)
    assert json.loads(target.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["out.json"]


def test_json_is_stable_and_append_line_adds_lines(tmp_path):
    atomic_write_json(tmp_path / "a.json", {"b": 2, "a": [1.5]})
    assert (tmp_path / "a.json").read_text() == '{\n  "a": [\n    1.5\n  ],\n  "b": 2\n}\n'
    append_line(tmp_path / "log.jsonl", '{"step": 0}')
    append_line(tmp_path / "log.jsonl", '{"step": 1}\n')
    assert (tmp_path / "log.jsonl").read_text() == '{"step": 0}\n{"step": 1}\n'


def test_a_file_system_failure_is_one_user_error_naming_the_file(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(UserError, match=r"a-file/out.json: cannot write \(.*/a-file exists and is not a folder\)"):
        atomic_write_json(tmp_path / "a-file" / "out.json", {})
    with pytest.raises(UserError, match=r"a-file/log.jsonl: cannot write \(Not a directory\)"):
        append_line(tmp_path / "a-file" / "log.jsonl", "{}")

    target = tmp_path / "out.txt"
    atomic_write_text(target, "before")

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("minitrain.io.os.fsync", disk_full)
    with pytest.raises(UserError, match=r"out.txt: cannot write \(No space left on device\)"):
        atomic_write_text(target, "after")
    monkeypatch.undo()
    assert target.read_text() == "before" and sorted(os.listdir(tmp_path)) == ["a-file", "out.txt"]


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
