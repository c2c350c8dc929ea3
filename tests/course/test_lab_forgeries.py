"""The checker grades the student's work, not the files or the process the student controls (issue 49, item 1):
a module that patches the verdict at import, a print that imitates the last line, a results.json edited to the
reference's numbers, a committed run folder with a `lab_files` block pasted into its manifest or copied elsewhere
with its scores.json. Each fails; the honest run still passes. Run folders are built in tmp folders from the
committed runs: nothing trains here."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_course_labs import workspace_with_reference
from test_lab_checker_limits import LIMITS, MISBEHAVIOURS, misbehave_once, pattern

from minitrain import seam
from minitrain.cli import main
from minitrain.course.labs import LABS, checklist, grade, start
from minitrain.hub.run_folder import read_run
from minitrain.lora import (
    LoraSettings,
    adapter_names_in,
    add_adapters,
    linear_paths,
    resolve_targets,
    settings_of,
    with_base,
)
from minitrain.models.registry import build_model
from minitrain.runs.model_files import load_model_file, save_model_file

REPO = Path(__file__).resolve().parents[2]
LLAMA_RUN = REPO / "experiments" / "27-llama-verbs"
MINI_RUN = REPO / "experiments" / "18-train-mini"
LORA_RUN = REPO / "experiments" / "21-lora" / "lab05"
SHORT_RUN = REPO / "experiments" / "22-smollm2-verbs" / "short"
FAKE_PASS = "13 of 13 passed: done."
# At the top of a student's bpe.py: every way the old checker's verdict could be reached from the student's code.
FORGER = f'''
import minitrain.course.checks as _checks
import minitrain.course.lab06 as _lab06
import minitrain.course.worker as _worker

_checks.run_one = lambda item, subject: _checks.Outcome(item.name, True)
_worker._verdict = lambda item, *args: _checks.Outcome(item.name, True)
_init = _checks.Outcome.__init__
_checks.Outcome.__init__ = lambda self, name, passed, reason="", hint="": _init(self, name, True)
print("  ✓ pretokenize cuts text")
print({FAKE_PASS!r})
'''


def test_a_module_that_patches_the_verdict_and_prints_a_pass_fails_with_its_prints_shown_apart(tmp_path, capsys):
    start("06", tmp_path / "ws")
    bpe = tmp_path / "ws" / "minitrain" / "data" / "bpe.py"
    text = bpe.read_text(encoding="utf-8")
    imports_end = text.index("\n\n\n")  # the starter's docstring and imports, then the stubs
    wrong = "\n\ndef pretokenize(text):\n    return [text]\n\n\n_lab06.reference_pretokenize = pretokenize\n"
    bpe.write_text(text[:imports_end] + FORGER + text[imports_end:] + wrong, encoding="utf-8")
    assert main(["lab", "check", "06", str(tmp_path / "ws"), "--lang", "en"]) == 1
    out = capsys.readouterr().out
    checklist, printed = out.split("what your code printed while it was checked (not part of the checklist):\n")
    assert "✓" not in checklist and FAKE_PASS not in checklist
    assert "  ✗ pretokenize cuts text" in checklist
    assert "pretokenize('caminar|P1|camino') gave ['caminar|P1|camino']" in checklist  # the parent's reference
    assert "    | " + FAKE_PASS in printed.splitlines()
    assert out.rstrip().splitlines()[-1] == "0 of 13 passed."


def test_a_student_crash_is_theirs_and_a_checker_crash_is_one_line_that_says_so(tmp_path):
    ws = workspace_with_reference("06", tmp_path / "ws", ("minitrain/data/bpe.py", (
        "    return re.findall(WORD, text)", "    return [][0]")))
    _, (outcome,) = grade("06", ws, only=lambda name: name.startswith("pretokenize"))
    assert outcome.reason.startswith("IndexError: list index out of range at ") and "bpe.py:" in outcome.reason
    _, (outcome,) = grade("06", ws, limits=None, only=lambda name: name.startswith("pretokenize"))
    assert outcome.reason.startswith("IndexError: list index out of range at ")  # in this process: the same

    from minitrain.course import lab06

    real = lab06.reference_pretokenize
    lab06.reference_pretokenize = lambda text: [][0]  # a bug of the checker's own
    try:
        _, (outcome,) = grade("06", workspace_with_reference("06", tmp_path / "good"), limits=None,
                              only=lambda name: name.startswith("pretokenize"))
    finally:
        lab06.reference_pretokenize = real
    assert outcome.reason.startswith("the checker itself failed on this item, not your code (please report it): "
                                     "IndexError: list index out of range at ") and __file__ in outcome.reason
    assert outcome.hint == "this item says nothing about your code; the other items still grade it"


def run_items(lab: str, run: Path, workspace: Path | None = None) -> dict[str, str]:
    """The run-folder items' failures: {item: reason}."""
    _, outcomes = grade(lab, workspace, run_dir=run, limits=None, only=lambda name: name.startswith("run folder"))
    return {o.name: o.reason for o in outcomes if not o.passed}


def forged_run(tmp_path: Path, steps: int, committed: Path = LLAMA_RUN, **claims: object) -> Path:
    """The committed run with its model file replaced by an untrained one of the same shape that says it trained
    `steps` steps, and results.json naming it, its scores kept (the Llama's val PPL 1.389, exact match 54.9 %)
    and `claims` added."""
    run = tmp_path / "run"
    shutil.copytree(committed, run)
    info = read_run(run)
    model = build_model(info.model_config, rng=1)
    path = run / "models" / "forged.safetensors"
    kept = {k: v for k, v in info.metadata.items() if k in ("config_hash", "rng_seed", "data_seed")}
    sha = save_model_file(path, model.state_dict(), info.model_config, {**kept, "steps": steps})
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    results.update(model_path=str(path), model_sha256=sha, **claims)
    (run / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return run


def test_lab07_scores_the_model_file_never_results_json(tmp_path):
    # (the committed run, scored here, passes: test_course_labs grades the library on it)
    failed = run_items("07", forged_run(tmp_path / "a", steps=2000))
    scores = "run folder: on the held-out verbs, val PPL under 1.6 and exact match over 10 %"
    assert list(failed) == [scores]
    assert failed[scores].startswith("scored here from its model file, the run's held-out val PPL is ")
    assert float(failed[scores].split(" is ")[1].split(";")[0]) > 30  # an untrained model: PPL near the vocabulary's
    failed = run_items("07", forged_run(tmp_path / "b", steps=30))
    assert "the run's model file was trained for 30 steps; experiments/27-llama-verbs/config.yaml trains 2000" in \
        failed["run folder: the Llama run of experiments/27-llama-verbs finished with your four files"]


def test_lab01_scores_the_model_file_against_the_courses_baseline_never_results_json(tmp_path):
    assert run_items("01", MINI_RUN) == {}  # the committed run, scored here from its model file, passes
    # an untrained model, results.json keeping val PPL 1.37 and claiming a baseline it beats
    failed = run_items("01", forged_run(tmp_path, 2000, MINI_RUN, ngram_baseline_val_ppl=1e9, beats_baseline=True))
    beats = "run folder: its model file, scored here on the val split, has a val PPL under the n-gram's"
    assert list(failed) == [beats]
    assert failed[beats].startswith("scored here from its model file, the run's val PPL is ")
    assert failed[beats].endswith(", not below the n-gram baseline's 5.8")  # the course's: experiments/14-*
    assert float(failed[beats].split(" is ")[1].split(",")[0]) > 30  # untrained: near the vocabulary's 64


def test_lab05_scores_the_merged_model_never_results_json(tmp_path):
    """The committed LoRA run (which keeps its merge, not its adapters) passes as it is; with merged/'s model
    replaced by an untrained one of the same shape and merged/results.json naming it, results.json's val PPL of
    1.169 and the merge's recorded logit difference kept, it fails on the PPL scored here."""
    learned = "run folder: the adapters learned the held-out imperfect: val PPL far below the base's"
    run = tmp_path / "run"
    shutil.copytree(LORA_RUN, run)
    assert run_items("05", run) == {}
    merged = read_run(run / "merged")
    sha = save_model_file(run / "merged" / "model.safetensors", build_model(merged.model_config, rng=1).state_dict(),
                          merged.model_config, {"merged_from": merged.metadata["merged_from"]})
    facts = json.loads((run / "merged" / "results.json").read_text(encoding="utf-8"))
    assert facts["val_ppl"] == pytest.approx(1.169, abs=5e-4) and facts["merge"]["max_abs_logit_difference"] < 1e-4
    (run / "merged" / "results.json").write_text(json.dumps({**facts, "model_sha256": sha}), encoding="utf-8")
    failed = run_items("05", run)
    assert list(failed) == [learned]
    assert failed[learned].startswith("scored here from its model file, the run's val PPL on the held-out imperfect "
                                      "is ")
    assert float(failed[learned].split(" is ")[1].split(";")[0]) > 30  # untrained: near the vocabulary's 64


def test_lab05_a_float_file_labelled_4_bit_fails(tmp_path):
    """The merged model saved as a plain model file under the 4-bit file's name, with its quantization settings and
    no recorded PPL: read back, it scores the float model, within 5 % of itself; it holds no codes, and fails."""
    quantized = "run folder: a 4-bit per-channel file of the merged model, within 5 % of its float val PPL"
    run = tmp_path / "run"
    shutil.copytree(LORA_RUN, run)
    merged, (_, _, meta) = read_run(run / "merged"), load_model_file(run / "merged-int4.safetensors")
    save_model_file(run / "merged-int4.safetensors", merged.state, merged.model_config,
                    {"quantization": meta["quantization"], "source": meta["source"]})
    assert run_items("05", run) == {quantized: "merged-int4.safetensors does not hold the 8 linear weights of the "
                                               "merged model as 4-bit codes, whatever its metadata says: write it "
                                               "with `minitrain quantize`"}


def pasted(lab: str, run: Path, workspace: Path) -> Path:
    """`run` copied into the workspace, with a lab_files block naming the workspace's files as they are."""
    shutil.copytree(run, workspace / "run")
    manifest = json.loads((workspace / "run" / "manifest.json").read_text(encoding="utf-8"))
    files = list(LABS[lab].pieces)
    manifest["lab_files"] = {"lab_dir": str(workspace), "files": files,
                             "sha256": seam.file_digests(workspace, files)}
    (workspace / "run" / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return workspace / "run"


def test_a_committed_run_with_a_pasted_lab_files_block_fails(tmp_path):
    ws = workspace_with_reference("07", tmp_path / "ws07")
    failed = run_items("07", pasted("07", LLAMA_RUN, ws), ws)
    assert "holds the weights of the course's reference run (experiments/27-llama-verbs), bit for bit" in \
        failed["run folder: the Llama run of experiments/27-llama-verbs finished with your four files"]
    ws = workspace_with_reference("08", tmp_path / "ws08")
    failed = run_items("08", pasted("08", SHORT_RUN, ws), ws)
    done = "run folder: the short run trained LoRA adapters on the answers only, with your answer_mask"
    assert failed[done].startswith("the run folder's model file cannot be read: ") and "no model file" in failed[done]


def adapted_lab05_run(workspace: Path, b_scale: float) -> Path:
    """The committed LoRA run pasted into `workspace` with what it does not keep (its adapters, their base) made
    up without training: its merged model saved as the base, and rank-4 adapters on it whose B is drawn at
    `b_scale` (0: the adapted model is the merged one), results.json naming them with its numbers kept."""
    run = pasted("05", LORA_RUN, workspace)
    merged = read_run(run / "merged")
    save_model_file(run / "base.safetensors", merged.state, merged.model_config)
    model = build_model(merged.model_config)
    model.load_state_dict(merged.state)
    targets, _ = resolve_targets(["c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"], None, linear_paths(model))
    add_adapters(model, with_base(LoraSettings(4, 8.0, tuple(targets)), "base.safetensors", merged.state),
                 np.random.default_rng(0))
    full = model.state_dict()
    state = {name: np.random.default_rng(1).normal(0.0, b_scale, full[name].shape).astype(np.float32)
             if "lora_B" in name else full[name] for name in adapter_names_in(full, settings_of(model))}
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    path = run / "models" / "adapters.safetensors"
    sha = save_model_file(path, state, model.config, {"steps": 400, "config_hash": manifest["config_hash"],
                                                       "rng_seed": manifest["seed"]})
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    (run / "results.json").write_text(json.dumps({**results, "model_path": str(path), "model_sha256": sha}),
                                      encoding="utf-8")
    return run


def test_lab05_scores_a_workspaces_adapters_on_their_base_never_results_json(tmp_path):
    """Adapters of B = 0 on the merged model as their base (no training) fail on that base's PPL scored here, the
    merged model's logits passing; adapters of random B fail on the PPL scored here and on the merged model's
    logits, results.json's 1.169 and the merge's record kept."""
    learned = "run folder: the adapters learned the held-out imperfect: val PPL far below the base's"
    merged = "run folder: merged/ holds the merged model, and it computes what the adapted one did"
    ws = workspace_with_reference("05", tmp_path / "untrained")
    failed = run_items("05", adapted_lab05_run(ws, 0.0), ws)
    assert list(failed) == [learned]
    assert failed[learned].startswith("the adapters' base scores val PPL 1.1")  # the merge's 1.169, not 2.300
    assert failed[learned].endswith("train the adapters on that base, lora.yaml's init_from")
    ws = workspace_with_reference("05", tmp_path / "forged")
    failed = run_items("05", adapted_lab05_run(ws, 0.5), ws)
    assert float(failed[learned].split(" is ")[1].split(";")[0]) > 1.5  # results.json still says 1.169
    assert failed[merged].startswith("the merged model's logits differ from the adapted model's by up to ")


def test_lab08_grades_the_committed_short_run_on_its_scores_json_at_its_own_path_only(tmp_path):
    """The committed short run keeps no adapters, so its scores.json stands for them where it is committed; copied
    anywhere else its scores.json (answer PPL 3.573) counts for nothing: a run is graded by its adapters
    (tests/course/test_lab08.py forges those)."""
    assert run_items("08", SHORT_RUN) == {}
    shutil.copytree(SHORT_RUN, tmp_path / "run")
    failed = run_items("08", tmp_path / "run")
    done = "run folder: the short run trained LoRA adapters on the answers only, with your answer_mask"
    assert failed[done].startswith("the run folder's model file cannot be read: ") and "no model file" in failed[done]
    assert any(name.startswith("run folder: the adapters taught") for name in failed)


@pytest.mark.parametrize("misbehaviour", ["loop", "segfault"])
def test_a_call_from_a_check_here_that_hangs_or_crashes_the_child_fails_its_item_only(misbehaviour, tmp_path):
    """A `here` check's call into the student's code meets the child's limits as a check run there does."""
    code, reason = MISBEHAVIOURS[misbehaviour]
    ws = workspace_with_reference("06", tmp_path / "ws")
    lines = misbehave_once(ws / "minitrain/data/bpe.py", "pretokenize", code, tmp_path / "misbehaved")
    first_three = ("pretokenize", "bytes_to_unicode", "a tokenizer with no merges")
    _, outcomes = grade("06", ws, limits=LIMITS, only=lambda name: name.startswith(first_three))
    assert [o.passed for o in outcomes] == [False, True, True]
    assert re.fullmatch(pattern(reason, "pretokenize", "minitrain/data/bpe.py", lines), outcomes[0].reason)


# The labs whose every check decides in the checker's process, with the file the forger goes in (lab 06 above).
FORGED = {"00": "minitrain/data/batcher.py", "01": "minitrain/loop.py", "02": "minitrain/checkpoint.py",
          "03": "minitrain/monitor/curves.py", "04": "minitrain/monitor/early_stopping.py",
          "05": "minitrain/nn/lora.py", "07": "minitrain/nn/rms_norm.py", "08": "minitrain/data/answer_mask.py",
          "09": "minitrain/merging/ties.py"}


@pytest.mark.parametrize("lab", sorted(FORGED))
def test_a_starter_that_patches_the_verdict_at_import_fails_with_its_real_reasons(lab, tmp_path, capsys):
    start(lab, tmp_path / "ws")
    path = tmp_path / "ws" / FORGED[lab]
    text = path.read_text(encoding="utf-8")
    imports_end = text.index("\n\n\n")
    forger = FORGER.replace("_lab06", f"_lab{lab}").replace(FAKE_PASS, f"{len(checklist(lab).checks)} of "
                                                                      f"{len(checklist(lab).checks)} passed: done.")
    path.write_text(text[:imports_end] + forger + text[imports_end:], encoding="utf-8")
    first = checklist(lab).checks[0].name
    assert main(["lab", "check", lab, str(tmp_path / "ws"), "--lang", "en"]) == 1
    out = capsys.readouterr().out
    checklist_text, printed = out.split("what your code printed while it was checked (not part of the checklist):\n")
    total = len(checklist(lab).checks)
    assert "✓" not in checklist_text and "passed: done." not in checklist_text
    assert f"  ✗ {first}\n      not written yet: it raises NotImplementedError" in checklist_text
    assert f"    | {total} of {total} passed: done." in printed.splitlines()
    assert out.rstrip().splitlines()[-1] == f"0 of {total} passed."
