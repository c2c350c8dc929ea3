"""Atomic writes: a failed write leaves the previous file intact and no temporary file behind."""

import json
import os

import pytest

from minitrain.common.errors import UserError
from minitrain.common.io import (
    append_line,
    atomic_write,
    atomic_write_json,
    atomic_write_text,
    check_output,
    read_bytes,
    read_json,
    read_json_object,
    regular_file_problem,
)


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

    monkeypatch.setattr("minitrain.common.io.os.fsync", disk_full)
    with pytest.raises(UserError, match=r"out.txt: cannot write \(No space left on device\)"):
        atomic_write_text(target, "after")
    monkeypatch.undo()
    assert target.read_text() == "before" and sorted(os.listdir(tmp_path)) == ["a-file", "out.txt"]


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- reading ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: None, r"data file not found"),
    (lambda p: p.mkdir(), r"the data file is a folder, not a regular file"),
    (lambda p: os.mkfifo(p), r"the data file is a FIFO \(named pipe\), not a regular file"),
    (lambda p: (p.symlink_to(p.with_name("loop")), p.with_name("loop").symlink_to(p)),
     r"cannot read the data file \(a symbolic link loop\)"),
])
def test_reading_something_that_is_not_a_regular_file_says_what_it_is(tmp_path, make, message):
    path = tmp_path / "train.jsonl"
    make(path)
    with pytest.raises(UserError, match=message) as info:
        read_bytes(path, "data file")  # a FIFO must not block: nothing writes to it
    assert info.value.exit_code == 2 and str(info.value).startswith(f"{path}: ")
    assert regular_file_problem(path) is not None


def test_devices_and_oversized_files_are_refused_without_reading_them(tmp_path):
    with pytest.raises(UserError, match="/dev/zero: the config is a character device, not a regular file"):
        read_bytes("/dev/zero", "config")
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(UserError, match="big: the log is larger than the 100 bytes it may hold"):
        read_bytes(tmp_path / "big", "log", limit=100)
    assert read_bytes(tmp_path / "big", "log", limit=101) == b"x" * 101


@pytest.mark.parametrize(("data", "message"), [
    (b"\xff{}", "the manifest is not UTF-8 text (byte 0 is 0xff; a binary file?)"),
    (b'{"a": ', "the manifest is not valid JSON (Expecting value, line 1 column 7)"),
    (b'{"a": 1' + b"0" * 4400 + b"}", "the manifest holds an integer of more than 4,300 digits"),
    (b"[" * 100_000 + b"]" * 100_000, "the manifest nests deeper than 64 levels"),
    (b"[" * 65 + b"]" * 65, "the manifest nests deeper than 64 levels"),
    (b"[1, 2]", "the manifest must be a JSON object, not a list"),
])
def test_damaged_json_is_one_error_naming_the_file(tmp_path, data, message):
    (tmp_path / "m.json").write_bytes(data)
    with pytest.raises(UserError) as info:
        read_json_object(tmp_path / "m.json", "manifest")
    assert str(info.value) == f"{tmp_path / 'm.json'}: {message}" and info.value.exit_code == 2


def test_json_nested_to_the_limit_still_reads(tmp_path):
    expected: list = []
    for _ in range(62):
        expected = [expected]
    (tmp_path / "m.json").write_text(json.dumps({"a": expected}))  # 64 levels: the object and 63 lists
    assert read_json(tmp_path / "m.json", "manifest") == {"a": expected}


def test_an_output_is_compared_with_an_input_folder_by_its_paths_inodes_and_the_folders_links(tmp_path):
    """check_output finds `out` inside an input folder from out's parents (as written and resolved), the same
    file by (st_dev, st_ino), and an input folder's symbolic links (to a file or a folder) that reach it."""
    data = tmp_path / "data"
    (data / "deep" / "er").mkdir(parents=True)
    (data / "deep" / "er" / "rows.csv").write_text("x\n")
    (tmp_path / "via").symlink_to(data / "deep")
    elsewhere = tmp_path / "elsewhere.csv"
    elsewhere.write_text("old\n")
    os.link(data / "deep" / "er" / "rows.csv", tmp_path / "hard.csv")
    (tmp_path / "soft.csv").symlink_to(data / "deep" / "er" / "rows.csv")
    check_output(elsewhere, [data], force=True, flag="-o")  # not the input's: --force replaces it
    for out in (tmp_path / "via" / "er" / "rows.csv", tmp_path / "soft.csv", data / "deep" / ".." / "deep"):
        with pytest.raises(UserError, match="is \\(or holds\\) the input"):
            check_output(out, [data], force=True, flag="-o", folder=True)
    (tmp_path / "outside").mkdir()
    for link, target in ((data / "link.csv", elsewhere), (data / "deep" / "shelf", tmp_path / "outside")):
        out = target if target.is_file() else target / "new.csv"
        out.write_text("mine\n")
        link.symlink_to(target)  # the folder reads `out` through its link: out is the input's too
        with pytest.raises(UserError, match="is \\(or holds\\) the input"):
            check_output(out, [data], force=True, flag="-o")
    with pytest.raises(UserError, match="is \\(or holds\\) the input"):
        check_output(tmp_path / "hard.csv", [data], force=True, flag="-o")
    with pytest.raises(UserError, match="is \\(or holds\\) the input"):  # an output folder holding an input
        check_output(tmp_path, [data / "deep" / "er" / "rows.csv"], force=True, flag="-o", folder=True)
