"""The one output rule (issue 43, minitrain/common/io.py `check_output`): no command replaces a file it did not
write unless --force, and none writes over its own input (the same file by any path: itself, a symbolic link, a
hard link), --force or not. Generated over commands x targets x --force; then the data losses the issue measured,
on real models."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_config_data import config_for, make_corpus
from test_damage_config import make_target

from minitrain import cli

ROOT = Path(__file__).parents[2]
EXAMPLES = int(os.environ.get("MINITRAIN_DAMAGE_EXAMPLES", "30"))
FUZZ = "MINITRAIN_DAMAGE_EXAMPLES" in os.environ
INPUT_BYTES = b"the command's input\n"
ALIASES = ["the config", "a link to the config", "a hard link to the config"]  # make_target's names: the input


def prepare(tmp: Path, command: str) -> tuple[list[str], Path, str]:
    """(argv with OUT for the output, the input file a target may alias, the output's suffix)."""
    if command in ("lock", "init"):
        data = make_corpus(tmp / "d")
        config = config_for(data)
        if command == "lock":
            return ["lock", str(config), "-o", "OUT"], config, ".yaml"
        return ["init", "--data", str(data), "-o", "OUT"], data / "train.jsonl", ".jsonl"
    suffix = ".gguf" if command == "export" else ".csv" if command == "predict" else ".safetensors"
    source = tmp / f"input{suffix}"
    source.write_bytes(INPUT_BYTES)
    if command == "merge":
        spec = tmp / "merge.yaml"
        spec.write_text(f"merge_method: linear\nmodels:\n  - model: {source}\n  - model: {tmp / 'b.safetensors'}\n")
        return ["merge", str(spec), "-o", "OUT"], source, suffix
    argv = {"quantize": ["quantize", str(source), "OUT", "--bits", "8"],
            "prune": ["prune", str(source), "OUT", "--method", "magnitude", "--sparsity", "0.5"],
            "export": ["export", str(source), "OUT", "--format", "gguf"],
            "predict": ["predict", str(tmp / "no-run"), str(source), "-o", "OUT"]}[command]
    return argv, source, suffix


def snapshot(path: Path) -> dict[str, bytes]:
    if path.is_dir():
        return {p.name: p.read_bytes() for p in path.iterdir()}
    return {"": path.read_bytes()}


@settings(max_examples=EXAMPLES, derandomize=not FUZZ, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.parametrize("command", ["quantize", "prune", "merge", "predict", "export", "lock", "init"])
@given(kind=st.sampled_from(["a text file", *ALIASES, "a folder"]), force=st.booleans())
def test_an_output_never_replaces_its_input_nor_without_force_a_file_it_did_not_write(command, kind, force,
                                                                                       tmp_path_factory, capsys):
    tmp = tmp_path_factory.mktemp("out")
    argv, source, suffix = prepare(tmp, command)
    input_before = source.read_bytes()
    out = Path(make_target(kind, tmp, source, b"\x00\xff", name=f"out{suffix}"))
    before = snapshot(out)
    code = cli.main([str(out) if a == "OUT" else a for a in argv] + (["--force"] if force else []))
    err = capsys.readouterr().err
    assert source.read_bytes() == input_before
    if kind in ALIASES:
        assert code == 2 and err.count("\n") == 1 and err.startswith("error: ")
        assert f"{out}: is (or holds) the input" in err and "--force never writes over an input" in err
    elif kind == "a folder" and command != "merge":  # a merge of pretrained models is a folder: merging's refusal
        assert code == 2 and err.count("\n") == 1 and f"{out}: is a folder; give a file name" in err
    elif kind == "a text file" and not force:
        assert code == 2 and err.count("\n") == 1 and f"{out}: exists and is not a file this command wrote; " \
                                                       "pass --force to replace it" in err
    else:  # allowed: the rule lets it through; the command then writes it, or fails on its (fake) input
        assert "is (or holds) the input" not in err and "pass --force" not in err
        if code == 0:
            assert snapshot(out) != before
            return
    assert snapshot(out) == before


@pytest.mark.parametrize("alias", ["same", "symlink", "hardlink"])
def test_the_data_losses_of_issue_43_are_refused_and_force_writes_another_file(tmp_path, capsys, alias):
    model = tmp_path / "m.safetensors"
    shutil.copyfile(ROOT / "models" / "minigpt-phase18-64ab16764a406b88.safetensors", model)
    vocab = str(ROOT / "data" / "processed" / "vocab.json")
    gguf = tmp_path / "m.gguf"
    assert cli.main(["export", str(model), str(gguf), "--format", "gguf", "--vocab", vocab]) == 0
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"text": "my training data"}\n')
    links = {"same": lambda p: p, "symlink": lambda p: (tmp_path / f"l{p.suffix}").symlink_to(p) or
             tmp_path / f"l{p.suffix}", "hardlink": lambda p: os.link(p, tmp_path / f"h{p.suffix}") or
             tmp_path / f"h{p.suffix}"}
    model_bytes, gguf_bytes = model.read_bytes(), gguf.read_bytes()
    capsys.readouterr()
    cases = [["quantize", str(model), str(links[alias](model)), "--bits", "2", "--vocab", vocab],
             ["export", str(gguf), str(links[alias](gguf)), "--format", "gguf", "--dtype", "q8_0"],
             ["export", str(model), str(notes), "--format", "gguf", "--vocab", vocab]]
    for argv in cases:
        for force in ([], ["--force"]):
            assert cli.main(argv + force) == 2
            assert capsys.readouterr().err.count("\n") == 1
    assert model.read_bytes() == model_bytes and gguf.read_bytes() == gguf_bytes
    assert notes.read_text() == '{"text": "my training data"}\n'
    other = tmp_path / "other.gguf"
    other.write_bytes(b"an older file\n")
    assert cli.main(["export", str(model), str(other), "--format", "gguf", "--vocab", vocab]) == 2
    assert cli.main(["export", str(model), str(other), "--format", "gguf", "--vocab", vocab, "--force"]) == 0
    assert other.read_bytes() == gguf_bytes


def test_a_run_folders_model_file_is_its_input_too(tmp_path, capsys):
    """A run's model lives in models/, outside its folder: quantize RUN onto it is refused, --force or not."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "experiments" / "18-train-mini", run)
    model = tmp_path / "m.safetensors"
    shutil.copyfile(ROOT / "models" / "minigpt-phase18-64ab16764a406b88.safetensors", model)
    results = json.loads((run / "results.json").read_text())
    (run / "results.json").write_text(json.dumps({**results, "model_path": str(model)}))
    before = model.read_bytes()
    for force in ([], ["--force"]):
        assert cli.main(["quantize", str(run), str(model), "--bits", "2", *force]) == 2
        assert f"{model}: is (or holds) the input" in capsys.readouterr().err
    assert model.read_bytes() == before


@pytest.mark.parametrize("target", ["manifest.json", "results.json", "config.resolved.yaml"])
def test_a_model_files_run_folder_is_its_input_too(tmp_path, capsys, target):
    """predict RUN/models/M reads RUN's manifest, results and config (hub/run_folder.read_run): -o onto one of
    them is refused, --force or not."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "experiments" / "digits-mlp", run)
    model = run / "models" / "sequential-0b60aea68a1fadd0.safetensors"  # the committed run holds its model
    rows = tmp_path / "rows.csv"
    rows.write_text("".join((ROOT / "data" / "digits" / "digits.csv").read_text().splitlines(True)[:4]))
    before = (run / target).read_bytes()
    assert cli.main(["predict", str(model), str(rows), "-o", str(tmp_path / "p.csv")]) == 0  # the run reads well
    for force in ([], ["--force"]):
        assert cli.main(["predict", str(model), str(rows), "-o", str(run / target), *force]) == 2
        assert f"{run / target}: is (or holds) the input" in capsys.readouterr().err
    assert (run / target).read_bytes() == before
