"""`minitrain prune --method lottery` (minitrain/training/lottery.py) on a tiny run, 2 rounds of 4 steps: each
round's sparsity on the geometric path, the pruned weights exactly 0 through the retraining, each round starting
from the run's own weights at the rewind step (its checkpoint) with the kept ones and the mask of the round's
magnitudes, and a rerun after an interruption takes the finished round as it is and writes the same bytes."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import safetensors.numpy
from test_cli import run
from test_lora_run import base as base  # the fixture: a tiny run folder with verb records
from test_lora_run import lora_config, train

from minitrain.hub.run_folder import read_run
from minitrain.pruning.masks import keep_mask
from minitrain.runs.model_files import load_model_file
from minitrain.training.lottery import round_sparsities

SOURCE = "  checkpoint:\n    save_every: 2\n    keep_last: null\nscheduler:\n  warmup_steps: 2\n  total_steps: 6\n"


def linear_weights(path) -> dict[str, np.ndarray]:
    state, _, _ = load_model_file(path)
    return {name: w for name, w in state.items() if w.ndim == 2 and ".h." in name}


def test_round_sparsities_prune_the_same_share_of_what_is_left_and_end_at_the_target():
    s = round_sparsities(0.7, 3)
    kept = [1.0] + [1 - x for x in s]
    assert s[-1] == pytest.approx(0.7)
    assert [kept[r + 1] / kept[r] for r in range(3)] == pytest.approx([0.3 ** (1 / 3)] * 3)


def test_a_lottery_ticket_rewinds_to_its_checkpoint_holds_its_mask_and_resumes(tmp_path, base, capsys):
    # checkpoints every 2 steps, all kept; the scheduler's 6 steps
    config = lora_config(tmp_path, base, "output:\n  plots: false\n")
    text = config.read_text().replace("  total_steps: 6\n", "").replace("  checkpoint:\n    save_every: 3\n", "")
    config.write_text(text.replace("data:\n", SOURCE + "data:\n"))
    train(config, tmp_path / "source", capsys)
    out = tmp_path / "ticket.safetensors"
    code, printed, err = run(["prune", tmp_path / "source", out, "--method", "lottery", "--sparsity", "0.5",
                              "--rounds", "2"], capsys)
    assert code == 0, err
    assert printed.splitlines()[2].startswith("round 1: 29.3 %") and "lottery unstructured 50 %" in printed
    _, _, meta = load_model_file(out)
    assert meta["pruning"]["rewind_step"] == 2 and meta["pruning"]["rewind_checkpoint"].endswith("step-2.safetensors")
    rounds = tmp_path / "ticket.rounds"
    rewound = linear_weights(tmp_path / "source" / "checkpoints" / "step-2.safetensors")
    before = linear_weights(read_run(tmp_path / "source").model_path)  # what round 1 prunes by
    pruned_before = {name: np.zeros_like(w, dtype=bool) for name, w in before.items()}
    for r, s in enumerate(round_sparsities(0.5, 2), start=1):
        start = linear_weights(rounds / f"round-{r}-start.safetensors")
        after = linear_weights(read_run(rounds / f"round-{r}").model_path)
        checkpoint = safetensors.numpy.load_file(rounds / f"round-{r}" / "checkpoints" / "step-4.safetensors")
        for name, w in start.items():
            keep = keep_mask(np.abs(before[name]), s, exclude_pruned=pruned_before[name])
            assert np.array_equal(w, np.where(keep, rewound[name], 0)), (r, name)  # rewound, masked by |W|
            assert np.array_equal(after[name] == 0, ~keep) and int((~keep).sum()) == round(s * w.size)
            assert not np.array_equal(after[name], w)  # it retrained
            moment = checkpoint[f"optimizer.exp_avg_sq.{name}"]  # the gradient of a pruned weight was always 0
            assert not moment[~keep].any() and moment[keep].all()
            pruned_before[name] = ~keep
        before = after
    assert all(np.array_equal(w, before[name]) for name, w in linear_weights(out).items())  # the last round's

    # Interrupted in round 2 after step 2 (its folder holds that checkpoint, no results): the rerun resumes it
    # and writes the same bytes
    first, log = out.read_bytes(), (rounds / "round-2" / "train_log.jsonl").read_bytes()
    for name in ("results.json", "checkpoints/step-4.safetensors", "checkpoints/latest"):
        (rounds / "round-2" / name).unlink()
    shutil.rmtree(rounds / "round-2" / "models")
    untouched = [rounds / "round-1" / "results.json", rounds / "round-2" / "checkpoints" / "step-2.safetensors"]
    written = [path.stat().st_mtime_ns for path in untouched]
    code, _, err = run(["prune", tmp_path / "source", out, "--method", "lottery", "--sparsity", "0.5",
                        "--rounds", "2", "--force"], capsys)
    assert code == 0, err
    assert out.read_bytes() == first and (rounds / "round-2" / "train_log.jsonl").read_bytes() == log
    assert [path.stat().st_mtime_ns for path in untouched] == written  # round 1 taken, round 2 resumed

    # Another lottery into the same OUT (another sparsity: other masks) never takes these rounds as its own
    code, _, err = run(["prune", tmp_path / "source", out, "--method", "lottery", "--sparsity", "0.3",
                        "--rounds", "2", "--force"], capsys)
    assert code == 2 and err.count("error:") == 1 and "holds a round of another lottery" in err, err
    assert out.read_bytes() == first and [path.stat().st_mtime_ns for path in untouched] == written


def test_a_lottery_without_its_rewind_checkpoint_is_one_error_line(tmp_path, base, capsys):
    code, _, err = run(["prune", base, tmp_path / "t.safetensors", "--method", "lottery", "--sparsity", "0.5",
                        "--rewind-step", "1"], capsys)
    assert code == 2 and err.startswith("error:") and "no checkpoint at step 1" in err
    assert not (tmp_path / "t.safetensors").exists()
    code, _, err = run(["prune", base, tmp_path / "t.safetensors", "--method", "wanda", "--sparsity", "0.5",
                        "--rounds", "2"], capsys)
    assert code == 2 and "lottery ticket's" in err
