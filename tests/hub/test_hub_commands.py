"""The export, publish/push and sample subcommands, parsed and run as the CLI runs them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from fakehub import make_run

from minitrain.cli import build_parser
from minitrain.commands.publish import latest_run
from minitrain.common.errors import UserError
from minitrain.data.tokenizer import CharTokenizer
from minitrain.hub.export_hf import EXPORT_FILES
from minitrain.hub.sources import load_model
from minitrain.models.sampling import generate


def run_command(argv: list[str]) -> int:
    args = build_parser(argv).parse_args(argv)
    return args.handler(args)


def test_export_command_writes_and_lists_the_folder(run, tmp_path, capsys):
    assert run_command(["export", str(run), str(tmp_path / "out"), "--repo", "alice/m"]) == 0
    listed = capsys.readouterr().out.split()
    assert sorted(os.path.basename(p) for p in listed) == sorted(EXPORT_FILES)
    assert 'from_pretrained("alice/m")' in (tmp_path / "out" / "README.md").read_text()


@pytest.mark.parametrize("name", ["publish", "push"])
def test_publish_and_its_push_alias_upload(hub, run, capsys, name):
    assert run_command([name, "--repo", "alice/m", str(run), "--private"]) == 0
    assert sorted(hub.repos["alice/m"].files) == sorted(EXPORT_FILES) and hub.repos["alice/m"].private
    assert f"Published: {hub.url}/alice/m" in capsys.readouterr().out


def test_publish_without_run_dir_takes_the_latest_finished_run(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "project" / "runs"
    runs.mkdir(parents=True)
    older = shutil.move(make_run(tmp_path / "a"), runs / "older")
    newer = shutil.move(make_run(tmp_path / "b"), runs / "newer")
    os.utime(Path(older) / "results.json", ns=(1, 1))
    assert latest_run(runs) == Path(newer)
    monkeypatch.chdir(tmp_path / "project")
    assert run_command(["publish", "--repo", "alice/m", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"Publishing the latest run: {Path('runs') / 'newer'}" in out and "Dry run" in out
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="no finished run"):
        run_command(["publish", "--repo", "alice/m"])


def test_the_publish_specs_spellings_and_its_default_folder_dot_output(hub, tmp_path, monkeypatch, capsys):
    # publish spec §3.1 PublishArgs: RUN_DIR defaults to ./output (a spec-shaped manifest's run folder), even with a
    # newer run under runs/; --format safetensors is minitrain's hf folder; --model-card is the default
    (tmp_path / "project" / "runs").mkdir(parents=True)
    shutil.move(make_run(tmp_path / "a"), tmp_path / "project" / "runs" / "newer")
    output = Path(shutil.move(make_run(tmp_path / "b"), tmp_path / "project" / "output"))
    os.utime(output / "results.json", ns=(1, 1))
    monkeypatch.chdir(tmp_path / "project")
    assert run_command(["publish", "--repo", "alice/m", "--format", "safetensors", "--model-card"]) == 0
    assert "Publishing ./output (the default folder)" in capsys.readouterr().out
    assert sorted(hub.repos["alice/m"].files) == sorted(EXPORT_FILES)
    assert run_command(["export", "output", "out", "--format", "safetensors"]) == 0
    assert all(hub.repos["alice/m"].files[name] == (Path("out") / name).read_bytes() for name in EXPORT_FILES
               if name != "README.md")  # the card names the repo
    assert run_command(["publish", "--repo", "alice/n", "--no-model-card"]) == 0
    assert sorted(hub.repos["alice/n"].files) == sorted(set(EXPORT_FILES) - {"README.md"})


def test_publish_dot_output_when_the_run_went_to_runs_says_where_runs_go(hub, tmp_path, monkeypatch):
    # the publish spec's §4.1 (init --base, train, publish ./output/) with minitrain's runs/<name>: the true reason
    shutil.move(make_run(tmp_path / "a"), (tmp_path / "runs").mkdir() or tmp_path / "runs" / "mine")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=r"publish \./output/: no such folder: a run goes to runs/<name> unless"):
        run_command(["publish", "--repo", "alice/m", "./output/", "--dry-run"])


def test_sample_greedy_prints_the_prompt_and_its_continuation(run, capsys):
    model, vocab = load_model(str(run))
    expected = generate(model, CharTokenizer.load(vocab), "comer|R1|", max_new_tokens=6)
    assert run_command(["sample", str(run), "--prompt", "comer|R1|"]) == 0
    assert capsys.readouterr().out == f"comer|R1|{expected}\n"


def test_sample_with_a_seed_is_reproducible_and_n_draws_differ(run, capsys):
    argv = ["sample", str(run), "--prompt", "vivir|P1|", "--temperature", "2", "--seed", "3", "-n", "5"]
    run_command(argv)
    first = capsys.readouterr().out.splitlines()
    run_command(argv)
    assert capsys.readouterr().out.splitlines() == first
    assert len(first) == 5 and len(set(first)) > 1 and all(s.startswith("vivir|P1|") for s in first)
    rng = np.random.default_rng(3)
    model, vocab = load_model(str(run))
    tokenizer = CharTokenizer.load(vocab)
    assert first[0] == "vivir|P1|" + generate(model, tokenizer, "vivir|P1|", 6, temperature=2.0, seed=rng)


def test_sample_rejects_a_prompt_outside_the_vocabulary(run):
    with pytest.raises(UserError, match="unknown character 'x'"):
        run_command(["sample", str(run), "--prompt", "xyz|P1|"])


@pytest.mark.parametrize("argv", [["--temperature", "-1"], ["--top-k", "0"], ["-n", "0"], ["--seed", "-1"],
                                  ["--temperature", "inf"], ["--temperature", "nan"]])
def test_sample_rejects_bad_settings_at_parse_time(run, argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_command(["sample", str(run), "--prompt", "comer|R1|", *argv])
    assert exit_info.value.code == 2


def test_sample_at_a_vanishing_temperature_is_the_greedy_answer(run, capsys):
    assert run_command(["sample", str(run), "--prompt", "comer|R1|"]) == 0
    greedy = capsys.readouterr().out
    assert run_command(["sample", str(run), "--prompt", "comer|R1|", "--temperature", "1e-320", "--seed", "0"]) == 0
    assert capsys.readouterr().out == greedy
