"""A config, a `--set` value, a lock file or a run's config.resolved.yaml that is damaged or hostile is one
`error:` line with exit code 2: never a traceback, never a hang, never a run away memory (issue 13, items 1, 6-8).

The hand-picked cases come from the adversarial audit; the property-based test at the end damages lab 01's
config at random and checks the same promise for every result."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_config import LAB01

from minitrain import cli
from minitrain.common.errors import UserError
from minitrain.config import ConfigError, load_config
from minitrain.config.yaml_lines import MAX_CHARS, MAX_DEPTH, YamlSyntaxError, parse_yaml

STEPS = "training:\n  total_steps: 10\n"

# Nine levels of nine aliases: 400 bytes that expand to 387 million nodes.
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


def validate(capsys, *args) -> tuple[int, str, str]:
    code = cli.main(["validate", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1, err
    assert err.startswith("error: ")
    for fragment in fragments:
        assert fragment in err, err


# --- YAML bombs and bounds (item 1) -----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "line", "fragment"), [
    (ALIAS_BOMB, 5, "aliases expand this to"),
    ("name: &a [*a]\n", 1, "an alias refers to a node that contains it"),
    ("a: &a {b: *a}\n", 1, "an alias refers to a node that contains it"),
    ("model: " + "[" * 3000 + "]" * 3000 + "\n", 1, f"nested more than {MAX_DEPTH} levels deep"),
    ("- " * 3000 + "x\n", 1, f"nested more than {MAX_DEPTH} levels deep"),
    ("model:\n  n_layer: " + "9" * 5000 + "\n", 2, "an integer of 5000 digits"),
    ("name: a\ndescription: \x00\n", 2, "character #x0000 is not allowed"),
    ("name: !!python/object/apply:os.system ['true']\n", 1, "could not determine a constructor"),
])
def test_hostile_yaml_is_one_syntax_error_with_its_line(text, line, fragment):
    with pytest.raises(YamlSyntaxError, match=re.escape(fragment)) as info:
        parse_yaml(text)
    assert info.value.line == line


def test_aliases_within_the_bounds_still_work(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("shared: &steps {total_steps: 10}\n" + LAB01.replace("scheduler:", "xscheduler:"), "utf-8")
    with pytest.raises(ConfigError, match="shared: unknown key"):  # the alias itself is fine; the key is not
        load_config(path)
    assert parse_yaml("a: &x {b: 1}\nc: *x\n").data == {"a": {"b": 1}, "c": {"b": 1}}


def test_an_alias_bomb_config_is_refused_at_once(tmp_path, capsys):
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB, encoding="utf-8")
    code, out, err = validate(capsys, path, "--no-data")
    assert_one_error_line(code, err, f"{path}:5: not valid YAML: aliases expand this to")
    assert out == ""


@pytest.mark.parametrize(("override", "fragment"), [
    ("name=&a [*a]", "an alias refers to a node that contains it"),
    ("name=*x", "found undefined alias"),
    ("name=a: b: c", "mapping values are not allowed here"),
    ("name=a\x01b", "character #x0001 is not allowed"),
    ("name=" + "[" * 3000, "nested more than"),
    ("model.n_layer=" + "7" * 5000, "an integer of 5000 digits"),
    ("name=!!python/name:os.system", "could not determine a constructor"),
])
def test_hostile_set_values_are_one_error_naming_the_key(tmp_path, override, fragment):
    path = tmp_path / "c.yaml"
    path.write_text(LAB01, encoding="utf-8")
    key = override.partition("=")[0]
    with pytest.raises(ConfigError) as info:
        load_config(path, [override])
    message = str(info.value)
    assert f": {key}: value is not a YAML scalar: " in message and fragment in message


def test_a_huge_config_is_refused_without_reading_it_all(tmp_path, capsys):
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * MAX_CHARS + "\n" + LAB01, encoding="utf-8")
    code, _, err = validate(capsys, path, "--no-data")
    assert_one_error_line(code, err, f"larger than the {MAX_CHARS:,} bytes it may hold")


# --- what the config path is (item 8) ---------------------------------------------------------------------------


def test_a_config_path_is_reported_as_what_it_is(tmp_path, capsys):
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    dangling = tmp_path / "dangling.yaml"
    dangling.symlink_to(tmp_path / "gone.yaml")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # nobody writes to it: reading it the plain way would block forever
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"model:\n  n_layer: \xff\xfe\n")
    cases = [
        (folder, "a folder, not a regular file"),
        (loop, "a symbolic link loop"),
        (dangling, "a symbolic link to a file that does not exist"),
        (fifo, "a FIFO (named pipe), not a regular file"),
        ("/dev/zero", "a character device, not a regular file"),  # endless: must not be read
        (binary, "not UTF-8 text (byte 18 is 0xff; a binary file?)"),
        (tmp_path / "missing.yaml", "config file not found"),
    ]
    for path, fragment in cases:
        code, _, err = validate(capsys, path, "--no-data")
        assert_one_error_line(code, err, str(path), fragment)


def test_a_config_with_nul_characters_is_one_line(tmp_path, capsys):
    path = tmp_path / "nul.yaml"
    path.write_text(LAB01 + "description: a\x00b\n", encoding="utf-8")
    code, _, err = validate(capsys, path, "--no-data")
    assert_one_error_line(code, err, f"{path}:{LAB01.count(chr(10)) + 1}: not valid YAML: character #x0000")


# --- lock files and config.resolved.yaml go through the same reader ----------------------------------------------


def test_a_hostile_lock_file_is_one_line(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(LAB01, encoding="utf-8")
    (tmp_path / "c.lock.yaml").write_text(ALIAS_BOMB, encoding="utf-8")
    code = cli.main(["train", str(config), "--strict", "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "aliases expand this to" in err


def test_a_hostile_resolved_config_in_a_run_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "config.resolved.yaml").write_text("name: &a [*a]\n", encoding="utf-8")
    code = cli.main(["info", str(tmp_path)])
    err = capsys.readouterr().err
    assert_one_error_line(code, err, "config.resolved.yaml:1: not valid YAML (an alias refers to a node")


def test_the_lock_reader_names_a_missing_lock(tmp_path):
    from minitrain.commands.lock_file import read_lock

    with pytest.raises(UserError, match="run `minitrain lock CONFIG` first") as info:
        read_lock(tmp_path / "none.lock.yaml")
    assert info.value.exit_code == 2


# --- damage at random ---------------------------------------------------------------------------------------------

FRAGMENTS = ["&a", "*a", "*b", "[", "]", "{", "}", ":", ": ", "- ", "!!python/object:x", "!!binary", "\x00", "\t",
             "'", '"', "{{", "}}", "{{ env.HOME }}", "{{ 1/0 }}", "\n  ", "\n", "99999999999999999999999999999999",
             "1e999", ".nan", "null", "~", "? ", "<<: *a", "%YAML 1.1\n", "---\n", "...", "#", "\ufeff", "é"]


@st.composite
def damaged_lab01(draw) -> str:
    text = LAB01
    for _ in range(draw(st.integers(1, 4))):
        cut = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["insert", "delete", "truncate", "duplicate"]))
        if kind == "insert":
            text = text[:cut] + draw(st.sampled_from(FRAGMENTS) | st.text(max_size=8)) + text[cut:]
        elif kind == "delete":
            text = text[:cut] + text[cut + draw(st.integers(1, 12)):]
        elif kind == "truncate":
            text = text[:cut]
        else:
            end = draw(st.integers(cut, min(len(text), cut + 60)))
            text = text[:end] + text[cut:end] + text[end:]
    return text


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=damaged_lab01())
def test_damaged_configs_never_trace_back(tmp_path, capsys, text):
    path = tmp_path / "damaged.yaml"
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    code, out, err = validate(capsys, path, "--no-data")
    assert code in (0, 2), err
    if code == 0:
        assert err == "" and out.rstrip().endswith("config is valid.")
    else:
        assert_one_error_line(code, err)
        assert out == ""
