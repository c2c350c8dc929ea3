"""No committed run folder, model file or config names a path of the machine it was made on.

A run records where its weights came from (manifest.json's init_from, a merge's or a quantization's source, a
PEFT adapter's base): relative to the folder it ran from (common/paths.recorded_path), so the committed
reference runs read the same on every checkout. This scans every tracked data file for an absolute path.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from safetensors import safe_open

from minitrain.common.paths import recorded_path

REPO = Path(__file__).resolve().parents[1]
DATA_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml", ".csv", ".safetensors")
# a path rooted at a machine's folders, as a string value: "/home/ana/...", "/work/x", "C:\\Users\\..."
ABSOLUTE = re.compile(r"""(?:^|["'\s=:(])(/(?:home|work|tmp|Users|root|opt|var|private|mnt|srv)/|[A-Z]:\\\\)""")


def tracked_data_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return [REPO / name for name in listed.decode().split("\0") if name.endswith(DATA_SUFFIXES)
            and name.startswith(("experiments/", "models/", "data/", "lab/", "solutions/", "tests/data/"))]


def text_of(path: Path) -> str:
    if path.suffix == ".safetensors":  # the JSON header's metadata, where a model file records its sources
        with safe_open(path, framework="numpy") as file:
            return json.dumps(file.metadata() or {})
    return path.read_text(encoding="utf-8", errors="replace")


def test_the_scan_finds_files_and_would_catch_an_absolute_path():
    files = tracked_data_files()
    assert any(f.suffix == ".safetensors" for f in files) and any(f.name == "manifest.json" for f in files)
    assert ABSOLUTE.search(json.dumps({"init_from": "/work/wt15b/runs/base/model.safetensors"}))
    assert ABSOLUTE.search("base_model_name_or_path: /home/ana/.venv/x.gguf")
    assert not ABSOLUTE.search(json.dumps({"init_from": "runs/21-lora/base", "url": "https://huggingface.co/x"}))


def test_no_committed_data_file_names_an_absolute_path():
    found = {str(f.relative_to(REPO)): m.group(1) for f in tracked_data_files()
             if (m := ABSOLUTE.search(text_of(f)))}
    assert not found, f"absolute paths in committed files (record them with recorded_path): {found}"


@pytest.mark.parametrize("inside", [True, False])
def test_recorded_path_is_relative_inside_the_current_folder_and_absolute_outside(tmp_path, monkeypatch, inside):
    (tmp_path / "here" / "runs").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "here")
    target = tmp_path / "here" / "runs" / "m.safetensors" if inside else tmp_path / "elsewhere" / "m.safetensors"
    assert recorded_path(target) == ("runs/m.safetensors" if inside else str(target))
    assert recorded_path("hf://user/model") == "hf://user/model" and recorded_path("user/model") == "user/model"


def test_the_committed_lab01_run_exports_from_another_folder(tmp_path, monkeypatch):
    """Its model file and vocabulary are found from the run folder (manifest.json's working_dir), not the cwd."""
    from minitrain.data.tokenizer import CharTokenizer
    from minitrain.hub.export_hf import export_model

    monkeypatch.chdir(tmp_path)
    export_model(REPO / "experiments" / "18-train-mini", "out")
    assert CharTokenizer.load(tmp_path / "out" / "vocab.json").chars == \
        CharTokenizer.load(REPO / "data" / "processed" / "vocab.json").chars
    assert (tmp_path / "out" / "model.safetensors").is_file()
